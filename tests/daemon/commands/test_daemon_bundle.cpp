// `jitd bundle create` and `jitd bundle verify` as an operator runs them,
// and `jitd --bundle` serving what they made: the real jitd binary, a cache
// directory filled by `jitd warm` with real NVRTC compiles, bundles
// written, checked, mounted, tampered with and refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
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

// One bit of `key`'s cubin in `bundle`, flipped in place (same inode: a
// daemon that has the file open reads the change).
void Tamper(const std::filesystem::path& bundle, const std::string& key) {
  std::string cubin;
  {
    absl::StatusOr<std::unique_ptr<cache::Bundle>> open = cache::Bundle::Open(bundle);
    ASSERT_TRUE(open.ok()) << open.status();
    absl::StatusOr<cache::Entry> entry = (*open)->Find(key);
    ASSERT_TRUE(entry.ok()) << entry.status();
    cubin = entry->cubin;
  }
  std::string bytes = *files::ReadWholeFile(bundle);
  const size_t at = bytes.find(cubin);
  ASSERT_NE(at, std::string::npos);
  bytes[at + cubin.size() / 2] ^= 0x10;
  ::chmod(bundle.c_str(), 0644);
  std::ofstream(bundle, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<std::string> Serve(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--kernels", testing::SmallKernelsDir().string(), "--workers", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

v1::GetKernelRequest Fill(const std::string& dtype, v1::GetKernelRequest::Mode mode) {
  return testing::KernelRequest("small.fill", {{"dtype", dtype}}, mode);
}

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
  bundle->reset();
  // One bit of the second entry's cubin, as a bad copy would change it.
  Tamper(bundle_, second);

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

// A daemon with an empty cache and the bundle mounted answers from the
// bundle (CACHED_ONLY too), keeps the entry in memory after, and never
// copies it into its cache directory.
TEST_F(BundleCli, AMountedBundleAnswersWithSourceBundleAndNeverFillsTheCache) {
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()}).exit_code, 0);
  TempDir serve;
  testing::TestDaemon daemon(serve, Serve({"--bundle", bundle_.string()}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  EXPECT_THAT(daemon.process().Output(), HasSubstr("bundle " + bundle_.string() + ": 2 entries"));
  auto client = daemon.Connect();

  auto first = client->GetKernel(Fill("fp64", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source(), v1::GetKernelResponse::BUNDLE);
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  absl::StatusOr<cache::Entry> entry = (*bundle)->Find(first->key());
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(first->cubin(), entry->cubin);

  auto again = client->GetKernel(Fill("fp64", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source(), v1::GetKernelResponse::MEMORY);
  // A COMPILE request the bundle holds compiles nothing.
  auto compile = client->GetKernel(Fill("fp32", v1::GetKernelRequest::COMPILE));
  ASSERT_TRUE(compile.ok()) << compile.status();
  EXPECT_EQ(compile->source(), v1::GetKernelResponse::BUNDLE);

  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_EQ(stats.bundle_hits(), 2u);
  EXPECT_EQ(stats.compiles(), 0u);
  EXPECT_EQ(stats.entries(), 0u) << "a bundle's entry is never copied into the cache directory";
  ASSERT_EQ(stats.bundles_size(), 1);
  EXPECT_EQ(stats.bundles(0).path(), bundle_.string());
  EXPECT_EQ(stats.bundles(0).entries(), 2u);
  EXPECT_EQ(stats.bundles(0).seal(), "sha256");
  EXPECT_EQ(stats.bundles(0).seal_hex(), (*bundle)->seal_hex());
  const auto shown = daemon.Jitctl({"stats"});
  EXPECT_THAT(shown.output, HasSubstr("2 hits, 0 corrupt; " + bundle_.string() + " (2 entries"));

  // What the bundle lacks is compiled, and goes to the cache directory.
  auto scale = client->GetKernel(testing::KernelRequest("small.scale", {{"clamp", "on"}}));
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ(scale->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(daemon.Stats().entries(), 1u);
}

TEST_F(BundleCli, ATamperedBundleStopsTheStartNamingItsFirstBadEntry) {
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()}).exit_code, 0);
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const std::string first = (*bundle)->keys()[0];
  bundle->reset();
  Tamper(bundle_, first);

  TempDir serve;
  std::vector<std::string> args = testing::TestDaemon::DefaultArgs(serve);
  for (const std::string& arg : Serve({"--bundle", bundle_.string()})) args.push_back(arg);
  const auto refused = RunProcess(args, serve / "jitd.log", kTimeout);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("cannot mount --bundle " + bundle_.string()));
  EXPECT_THAT(refused.output, HasSubstr("entry 0 (key " + first + ")"));
  EXPECT_FALSE(std::filesystem::exists(serve / "jitd.sock")) << "refused before it listened";
}

TEST_F(BundleCli, ADaemonWithAFleetKeyMountsOnlyBundlesSignedWithIt) {
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()}).exit_code, 0);
  const std::filesystem::path signed_bundle = dir_ / "signed.jitdbundle";
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", signed_bundle.string(),
                  "--signing-key-file", key_.string()})
                .exit_code,
            0);
  TempDir serve;
  std::vector<std::string> args = testing::TestDaemon::DefaultArgs(serve);
  for (const std::string& arg : Serve({"--remote-signing-key-file", key_.string(), "--bundle", signed_bundle.string(),
                                       "--bundle", bundle_.string()})) {
    args.push_back(arg);
  }
  const auto refused = RunProcess(args, serve / "jitd.log", kTimeout);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("cannot mount --bundle " + bundle_.string()));
  EXPECT_THAT(refused.output, HasSubstr("mounts only bundles signed with that key"));

  testing::TestDaemon daemon(serve,
                             Serve({"--remote-signing-key-file", key_.string(), "--bundle", signed_bundle.string()}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  auto answer = daemon.Connect()->GetKernel(Fill("fp32", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->source(), v1::GetKernelResponse::BUNDLE);
  EXPECT_EQ(daemon.Stats().bundles(0).seal(), "hmac-sha256");
}

// A bundle changed after the daemon verified it is never served from: the
// entry misses, is counted, and the kernel is compiled instead; the
// bundle's other entries still serve.
TEST_F(BundleCli, ABundleChangedUnderTheDaemonIsNeverServed) {
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()}).exit_code, 0);
  std::string fp64;
  {
    absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    for (const std::string& key : (*bundle)->keys()) {
      if ((*bundle)->Find(key)->meta.params == "dtype=fp64") fp64 = key;
    }
  }
  ASSERT_FALSE(fp64.empty());
  TempDir serve;
  testing::TestDaemon daemon(serve, Serve({"--bundle", bundle_.string()}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  Tamper(bundle_, fp64);

  auto client = daemon.Connect();
  auto compiled = client->GetKernel(Fill("fp64", v1::GetKernelRequest::COMPILE));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(compiled->key(), fp64);
  auto untouched = client->GetKernel(Fill("fp32", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(untouched.ok()) << untouched.status();
  EXPECT_EQ(untouched->source(), v1::GetKernelResponse::BUNDLE);
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_EQ(stats.bundle_corrupt(), 1u);
  EXPECT_EQ(stats.bundle_hits(), 1u);
  EXPECT_THAT(daemon.process().Output(), HasSubstr("no longer verifies"));
}

// Planted bytes under the right key: after the daemon mounted the bundle,
// one entry is rewritten in place with other cubin bytes and a blob
// checksum recomputed to match, so that the entry decodes cleanly. The
// daemon must hold it to the digest it verified under the seal at mount:
// never served, counted corrupt, while `jitd bundle verify` agrees the file
// is no longer the one sealed.
TEST_F(BundleCli, AnEntryPlantedInPlaceWithAValidChecksumIsNeverServed) {
  ASSERT_EQ(Jitd({"bundle", "create", "--cache-dir", cache_.string(), "-o", bundle_.string()}).exit_code, 0);
  std::string fp64;
  cache::Entry entry;
  {
    absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    for (const std::string& key : (*bundle)->keys()) {
      absl::StatusOr<cache::Entry> found = (*bundle)->Find(key);
      ASSERT_TRUE(found.ok()) << found.status();
      if (found->meta.params == "dtype=fp64") {
        fp64 = key;
        entry = *std::move(found);
      }
    }
  }
  ASSERT_FALSE(fp64.empty());
  TempDir serve;
  testing::TestDaemon daemon(serve, Serve({"--bundle", bundle_.string()}));
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();

  const std::string original = cache::EncodeBlob(entry.meta, entry.cubin);
  std::string planted_cubin = entry.cubin;
  planted_cubin[planted_cubin.size() / 2] ^= 0x10;
  const std::string planted = cache::EncodeBlob(entry.meta, planted_cubin);
  ASSERT_EQ(original.size(), planted.size());
  std::string bytes = *files::ReadWholeFile(bundle_);
  const size_t at = bytes.find(original);
  ASSERT_NE(at, std::string::npos) << "the entry's blob is not where the bundle keeps it";
  bytes.replace(at, original.size(), planted);
  ::chmod(bundle_.c_str(), 0644);
  std::ofstream(bundle_, std::ios::binary | std::ios::trunc) << bytes;

  auto client = daemon.Connect();
  auto answered = client->GetKernel(Fill("fp64", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_FALSE(answered.ok()) << "planted bytes served, source " << answered->source();
  EXPECT_EQ(answered.status().code(), absl::StatusCode::kNotFound) << answered.status();
  auto untouched = client->GetKernel(Fill("fp32", v1::GetKernelRequest::CACHED_ONLY));
  ASSERT_TRUE(untouched.ok()) << untouched.status();
  EXPECT_EQ(untouched->source(), v1::GetKernelResponse::BUNDLE);
  EXPECT_EQ(daemon.Stats().bundle_corrupt(), 1u);
  EXPECT_THAT(daemon.process().Output(), HasSubstr("changed after the bundle was mounted"));
  const auto verified = Jitd({"bundle", "verify", bundle_.string()});
  EXPECT_NE(verified.exit_code, 0) << verified.output;
}

// --fleet offline: the daemon's config file names the set; the bundle holds
// a cubin per fleet arch and the PTX of the lowest.
TEST_F(BundleCli, AFleetBundleHoldsEachFleetArchAndTheLowestsPtx) {
  testing::WriteFile(dir_ / "one.toml", "[[spec]]\nkernel = \"small.scale\"\nparams = { clamp = \"on\" }\n");
  testing::WriteFile(dir_ / "jitd.toml", "fleet_archs = \"sm_100,sm_90\"\n");
  const auto created = Jitd({"bundle", "create", "--manifest", (dir_ / "one.toml").string(), "--kernels",
                             testing::SmallKernelsDir().string(), "--workers", "1", "--fleet", "--config",
                             (dir_ / "jitd.toml").string(), "-o", bundle_.string()});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  absl::StatusOr<std::unique_ptr<cache::Bundle>> bundle = cache::Bundle::Open(bundle_);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  std::set<std::string> archs;
  for (const std::string& key : (*bundle)->keys()) archs.insert((*bundle)->Find(key)->meta.arch);
  EXPECT_EQ(archs, (std::set<std::string>{"sm_100", "sm_90", "compute_90"}));

  const auto without =
      Jitd({"bundle", "create", "--manifest", (dir_ / "one.toml").string(), "--fleet", "-o", bundle_.string()});
  EXPECT_EQ(without.exit_code, 2);
  EXPECT_THAT(without.output, HasSubstr("--fleet needs the fleet set"));
}

}  // namespace
}  // namespace jitd
