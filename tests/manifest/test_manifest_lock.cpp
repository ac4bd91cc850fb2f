// Kernel locks: what ToToml writes Parse reads back unchanged, entries are
// sorted and found, and every kind of mistake in a hand-edited lock is an
// INVALID_ARGUMENT naming the file and line (a deployment must not start on
// a lock it misread).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "manifest/lock.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace {

const std::string kKeyA(64, 'a');
const std::string kKeyB = std::string(63, '0') + "f";

KernelLock Sample() {
  KernelLock lock;
  lock.tree = "team";
  lock.kernel_namespace = "sglang";
  lock.nvrtc_version = "13.0";
  lock.tree_fingerprint = std::string(64, 'c');
  lock.entries = {
      {"a.k", "dtype=bf16", "sm_90", kKeyA}, {"a.k", "dtype=fp16", "sm_90", kKeyB}, {"b.k", "", "sm_100a", kKeyA}};
  return lock;
}

std::string Entry(const std::string& kernel, const std::string& params, const std::string& arch,
                  const std::string& key) {
  return "[[instantiation]]\nkernel = \"" + kernel + "\"\nparams = \"" + params + "\"\narch = \"" + arch +
         "\"\nkey = \"" + key + "\"\n";
}

void ExpectInvalid(const std::string& text, const std::string& where, const std::string& what) {
  auto lock = KernelLock::Parse(text, "x.lock");
  ASSERT_FALSE(lock.ok()) << text;
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(lock.status().message().find(where), std::string::npos) << lock.status();
  EXPECT_NE(lock.status().message().find(what), std::string::npos) << lock.status();
}

TEST(KernelLock, RoundTripsThroughToToml) {
  const KernelLock lock = Sample();
  const std::string text = lock.ToToml();
  EXPECT_NE(text.find("jitd lint --write-lock"), std::string::npos);
  EXPECT_NE(text.find("jitd --lock FILE"), std::string::npos);
  auto back = KernelLock::Parse(text, "team.lock");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->origin, "team.lock");
  EXPECT_EQ(back->tree, "team");
  EXPECT_EQ(back->kernel_namespace, "sglang");
  EXPECT_EQ(back->nvrtc_version, "13.0");
  EXPECT_EQ(back->tree_fingerprint, lock.tree_fingerprint);
  ASSERT_EQ(back->entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->entries[i].kernel, lock.entries[i].kernel);
    EXPECT_EQ(back->entries[i].params, lock.entries[i].params);
    EXPECT_EQ(back->entries[i].arch, lock.entries[i].arch);
    EXPECT_EQ(back->entries[i].key, lock.entries[i].key);
  }
  EXPECT_EQ(back->ToToml(), text);
}

TEST(KernelLock, RoundTripsStringsThatNeedEscaping) {
  KernelLock lock = Sample();
  lock.kernel_namespace = "q\"b\\s\tü";
  auto back = KernelLock::Parse(lock.ToToml(), "x.lock");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kernel_namespace, lock.kernel_namespace);
}

TEST(KernelLock, SortsEntriesAndFindsThem) {
  const std::string text = "schema = 1\n" + Entry("b.k", "", "sm_90", kKeyA) + Entry("a.k", "n=2", "sm_90", kKeyB) +
                           Entry("a.k", "n=1", "sm_90", kKeyA);
  auto lock = KernelLock::Parse(text, "x.lock");
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_EQ(lock->entries.size(), 3u);
  EXPECT_EQ(lock->entries[0].params, "n=1");
  EXPECT_EQ(lock->entries[2].kernel, "b.k");
  EXPECT_EQ(lock->tree, "");
  const LockEntry* e = lock->Find("a.k", "n=2", "sm_90");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->key, kKeyB);
  EXPECT_NE(lock->Find("b.k", "", "sm_90"), nullptr);
  EXPECT_EQ(lock->Find("a.k", "n=2", "sm_100a"), nullptr);
  EXPECT_EQ(lock->Find("a.k", "n=3", "sm_90"), nullptr);
  EXPECT_EQ(lock->Find("c.k", "", "sm_90"), nullptr);
}

TEST(KernelLock, AnEmptyLockIsValidAndFindsNothing) {
  auto lock = KernelLock::Parse("schema = 1\n", "x.lock");
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_TRUE(lock->entries.empty());
  EXPECT_EQ(lock->Find("a.k", "", "sm_90"), nullptr);
}

TEST(KernelLock, RefusesMistakesNamingTheLine) {
  const std::string head = "schema = 1\n";  // line 1; entries start at line 2
  ExpectInvalid("tree = \"t\"\n", "x.lock:1", "schema = 1");
  ExpectInvalid("schema = 2\n", "x.lock:1", "schema must be 1");
  ExpectInvalid("schema = \"1\"\n", "x.lock:1", "schema must be 1");
  ExpectInvalid(head + "colour = \"red\"\n", "x.lock:2", "unknown key 'colour'");
  ExpectInvalid(head + "tree = 3\n", "x.lock:2", "'tree' in the lock must be a string");
  ExpectInvalid(head + "schema = 1\n", "x.lock:2", "");  // a TOML error: redefinition
  ExpectInvalid(head + "[[instantiation]]\nkernel = \"a.k\"\nparams = \"\"\narch = \"sm_90\"\n", "x.lock:2",
                "needs 'key'");
  ExpectInvalid(head + Entry("a.k", "", "sm_90", kKeyA.substr(1)), "x.lock:6", "64 lowercase hex");
  ExpectInvalid(head + Entry("a.k", "", "sm_90", std::string(64, 'A')), "x.lock:6", "64 lowercase hex");
  ExpectInvalid(head + Entry("a.k", "", "sm_90", std::string(63, 'a') + "g"), "x.lock:6", "64 lowercase hex");
  ExpectInvalid(head + "[[instantiation]]\nkernel = \"a.k\"\nparams = \"\"\narch = \"sm_90\"\nkey = \"" + kKeyA +
                    "\"\nextra = 1\n",
                "x.lock:7", "unknown key 'extra' in [[instantiation]]");
  ExpectInvalid(head + "[[instantiation]]\nkernel = 1\nparams = \"\"\narch = \"sm_90\"\nkey = \"" + kKeyA + "\"\n",
                "x.lock:3", "'kernel' in [[instantiation]] must be a string");
  ExpectInvalid(head + Entry("a.k", "n=1", "sm_90", kKeyA) + Entry("b.k", "", "sm_90", kKeyA) +
                    Entry("a.k", "n=1", "sm_90", kKeyB),
                "x.lock:12", "a.k{n=1}@sm_90 is listed twice (first at line 2)");
  ExpectInvalid(head + "instantiation = 3\n", "x.lock:2", "[[instantiation]] tables");
  ExpectInvalid(head + "this is not toml\n", "x.lock:2", "");
}

TEST(KernelLock, ReadNamesTheFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "jitd_test_manifest_lock";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "bad.lock";
  std::ofstream(file) << "schema = 1\nwhat = 1\n";
  auto lock = KernelLock::Read(file);
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find(file.string() + ":2"), std::string::npos) << lock.status();
  std::ofstream(file, std::ios::trunc) << Sample().ToToml();
  lock = KernelLock::Read(file);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(lock->origin, file.string());
  EXPECT_FALSE(KernelLock::Read(dir / "missing.lock").ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace jitd::manifest

namespace jitd::manifest {
namespace {

// The name a tree is served under is not part of its keys (a key is what
// was compiled); a lock written while it was (jitd 0.2 listed the named
// key) still holds, and nothing else does.
TEST(TreeNames, AServingNameLeavesKeysAsTheyAreAndOldNamedLocksStillHold) {
  auto tree = KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto toolchain = Toolchain::Detect();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  const KernelRequest bare{"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {}};
  const KernelRequest named{"sglang/moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {}};
  auto unnamed = Resolver::Create(*tree, *toolchain, "sm_90");
  auto served = Resolver::Create({ServedTree{"sglang", *tree, nullptr}}, *toolchain, "sm_90");
  ASSERT_TRUE(unnamed.ok() && served.ok());
  auto a = (*unnamed)->Resolve(bare);
  auto b = (*served)->Resolve(named);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(b->key, a->key) << "the serving name compiles nothing";
  EXPECT_TRUE(a->named_key.empty());
  ASSERT_FALSE(b->named_key.empty());
  EXPECT_NE(b->named_key, b->key);

  const auto lock_of = [&](const std::string& key) {
    auto lock = KernelLock::Parse("schema = 1\ntree = \"sglang\"\n" + Entry("moe.topk_sum", "dtype=fp32", "sm_90", key),
                                  "sglang.lock");
    EXPECT_TRUE(lock.ok()) << lock.status();
    auto locked =
        Resolver::Create({ServedTree{"sglang", *tree, std::make_shared<const KernelLock>(*lock)}}, *toolchain, "sm_90");
    EXPECT_TRUE(locked.ok());
    return (*locked)->Resolve(named).status();
  };
  EXPECT_TRUE(lock_of(b->key).ok());
  EXPECT_TRUE(lock_of(b->named_key).ok()) << "a jitd 0.2 lock of the same sources";
  absl::Status other = lock_of(kKeyB);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition) << other;
}

}  // namespace
}  // namespace jitd::manifest
