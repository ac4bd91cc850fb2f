// `jitd bundle create` and `jitd bundle verify` as an operator runs them:
// the real jitd binary, a cache directory filled by `jitd warm` with real
// NVRTC compiles, bundles written, checked, tampered with and refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "jitd/base/files.h"
#include "jitd/bundle.h"
#include "kernel_fixtures.h"
#include "process.h"
#include "temp_dir.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::RunProcess;
using testing::TempDir;

constexpr std::chrono::minutes kTimeout{2};

class BundleCli : public ::testing::Test {
 protected:
  // A cache of two instantiations of the small kernels, warmed once.
  void SetUp() override {
    testing::WriteFile(dir_ / "specs.toml",
                       "[[spec]]\nkernel = \"small.fill\"\nparams = { dtype = \"fp64\" }\n"
                       "[[spec]]\nkernel = \"small.fill\"\nparams = { dtype = \"fp32\" }\n");
    const auto warm = Jitd({"warm", "--cache-dir", cache_.string(), "--kernels", testing::SmallKernelsDir().string(),
                            "--manifest", (dir_ / "specs.toml").string(), "--workers", "1"});
    ASSERT_EQ(warm.exit_code, 0) << warm.output;
    testing::WriteFile(key_, "0123456789abcdef0123456789abcdef\n");
  }

  testing::ProcessResult Jitd(std::vector<std::string> args) {
    args.insert(args.begin(), testing::JitdBinary());
    return RunProcess(args, dir_ / "jitd.log", kTimeout);
  }

  TempDir dir_;
  std::filesystem::path cache_ = dir_ / "cache";
  std::filesystem::path bundle_ = dir_ / "seed.jitdbundle";
  std::filesystem::path key_ = dir_ / "fleet.key";
};

TEST_F(BundleCli, ACacheDirectoryBecomesABundleThatVerifies) {
  const auto created = Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_THAT(created.output, HasSubstr("2 entries"));
  EXPECT_THAT(created.output, HasSubstr("sealed with a SHA-256 digest"));
  const auto verified = Jitd({"bundle", "verify", bundle_.string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.output;
  EXPECT_THAT(verified.output, HasSubstr("every entry and the seal verify"));
  // What it holds is the cache's entries, byte for byte.
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ((*bundle)->size(), 2u);
  for (const std::string& key : (*bundle)->keys()) {
    absl::StatusOr<cache::Entry> entry = (*bundle)->Find(key);
    ASSERT_TRUE(entry.ok()) << entry.status();
    EXPECT_EQ(entry->meta.kernel, "small.fill");
    EXPECT_FALSE(entry->cubin.empty());
  }
}

TEST_F(BundleCli, ASignedBundleVerifiesWithTheFleetKeyOnly) {
  const auto created = Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string(),
                             "--signing-key-file", key_.string()});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_THAT(created.output, HasSubstr("signed with a fleet key"));
  EXPECT_EQ(Jitd({"bundle", "verify", bundle_.string(), "--signing-key-file", key_.string()}).exit_code, 0);

  const auto without = Jitd({"bundle", "verify", bundle_.string()});
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_THAT(without.output, HasSubstr("give the key to verify it"));
  testing::WriteFile(dir_ / "other.key", "another fleet, another key of 32 bytes\n");
  const auto other = Jitd({"bundle", "verify", bundle_.string(), "--signing-key-file", (dir_ / "other.key").string()});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.output, HasSubstr("signature does not match"));
}

TEST_F(BundleCli, ATamperedBundleIsRefusedNamingTheFirstBadEntry) {
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()}).exit_code, 0);
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const std::string second = (*bundle)->keys()[1];
  absl::StatusOr<cache::Entry> entry = (*bundle)->Find(second);
  ASSERT_TRUE(entry.ok()) << entry.status();
  bundle->reset();

  // One bit of the second entry's cubin, as a bad copy would change it.
  std::string bytes = *files::ReadWholeFile(bundle_);
  const size_t at = bytes.find(entry->cubin);
  ASSERT_NE(at, std::string::npos);
  bytes[at + entry->cubin.size() / 2] ^= 0x10;
  ::chmod(bundle_.c_str(), 0644);
  std::ofstream(bundle_, std::ios::binary | std::ios::trunc) << bytes;

  const auto verified = Jitd({"bundle", "verify", bundle_.string()});
  EXPECT_EQ(verified.exit_code, 1);
  EXPECT_THAT(verified.output, HasSubstr("entry 1 (key " + second + ")"));
}

TEST_F(BundleCli, AManifestIsCompiledAndBundledExactlyNothingElse) {
  // The compiles go to a scratch directory under TMPDIR, removed after.
  std::filesystem::create_directories(dir_ / "tmp");
  testing::WriteFile(dir_ / "one.toml", "[[spec]]\nkernel = \"small.scale\"\nparams = { clamp = \"on\" }\n");
  const auto created =
      RunProcess({testing::JitdBinary(), "bundle", "create", "--manifest", (dir_ / "one.toml").string(), "--kernels",
                  testing::SmallKernelsDir().string(), "--workers", "1", "-o", bundle_.string()},
                 dir_ / "create.log", kTimeout, {{"TMPDIR", (dir_ / "tmp").string()}});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_THAT(created.output, HasSubstr("1 entry"));
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  ASSERT_EQ((*bundle)->size(), 1u);
  absl::StatusOr<cache::Entry> entry = (*bundle)->Find((*bundle)->keys()[0]);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->meta.kernel, "small.scale");
  EXPECT_EQ(entry->meta.params, "clamp=on");
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "tmp"));
}

TEST_F(BundleCli, AWarmUpWithFailuresWritesNoBundle) {
  // The small kernels hold one that does not compile, on purpose.
  const auto created = Jitd({"bundle", "create", "--all", "--kernels", testing::SmallKernelsDir().string(), "--workers",
                             "1", "-o", bundle_.string()});
  EXPECT_EQ(created.exit_code, 1) << created.output;
  EXPECT_THAT(created.output, HasSubstr("nothing was written"));
  EXPECT_FALSE(std::filesystem::exists(bundle_));
}

TEST_F(BundleCli, WhatCannotBeBundledOrReadIsSaidAndExitsTwo) {
  const auto no_cache = Jitd({"bundle", "create", "--cache-dir", (dir_ / "absent").string(), "-o", bundle_.string()});
  EXPECT_EQ(no_cache.exit_code, 2);
  EXPECT_THAT(no_cache.output, HasSubstr("is not a jitd cache directory"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "absent"));
  testing::WriteFile(dir_ / "short.key", "short\n");
  const auto short_key = Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string(),
                               "--signing-key-file", (dir_ / "short.key").string()});
  EXPECT_EQ(short_key.exit_code, 2);
  EXPECT_THAT(short_key.output, HasSubstr("at least 16 are needed"));
  const auto absent = Jitd({"bundle", "verify", (dir_ / "absent.jitdbundle").string()});
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_EQ(Jitd({"bundle"}).exit_code, 2);
  EXPECT_EQ(Jitd({"bundle", "create", "-o", bundle_.string()}).exit_code, 2);
  const auto both = Jitd({"bundle", "create", "--cache-dir", cache_.string(), "--all", "-o", bundle_.string()});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.output, HasSubstr("say where the entries come from, once"));
}

}  // namespace
}  // namespace jitd
