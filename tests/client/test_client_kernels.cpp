// Client::GetKernelBinary against real processes: the memo (the second
// request costs no RPC), path delivery (the blob file read and verified
// here), and the read-only fallback that answers while the daemon is away,
// from a cache directory that `jitd warm` filled with real NVRTC cubins.
// The arch is named in every spec, so that a GPU host's device arch does
// not change what these tests ask for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "cache_seed.h"
#include "fallback_client.h"
#include "jitd/cache.h"
#include "jitd/client.h"
#include "kernel_fixture.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::kFixtureKernel;
using testing::ProcessResult;
using testing::TempDir;
using testing::TestDaemon;

KernelSpec Scale(const std::string& dtype, std::vector<std::string> options = {}) {
  return {.kernel = kFixtureKernel, .params = {{"dtype", dtype}}, .arch = "sm_90", .options = std::move(options)};
}

// A cache directory opened read-only, as the cache library opens it.
absl::StatusOr<std::unique_ptr<cache::Cache>> OpenReadOnly(const std::filesystem::path& dir) {
  cache::CacheOptions options;
  options.dir = dir;
  options.read_only = true;
  options.background = false;
  return cache::Cache::Open(options);
}

// The cubin stored under `key` in a cache directory, read as the cache
// library reads it (checksum verified).
std::string CubinInCache(const std::filesystem::path& dir, const std::string& key) {
  auto cache = OpenReadOnly(dir);
  if (!cache.ok()) return "cannot open: " + std::string(cache.status().message());
  auto entry = (*cache)->Lookup(key);
  return entry.ok() ? entry->cubin : "no entry: " + std::string(entry.status().message());
}

// --- Against a running daemon ---------------------------------------------------

class DaemonKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFixtureKernels(dir_ / "kernels");
    daemon_ = std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--kernels", (dir_ / "kernels").string()});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok());
  }

  std::unique_ptr<Client> Connect(std::optional<bool> prefer_path = std::nullopt) const {
    ClientOptions options;
    options.endpoint = daemon_->endpoint();
    options.prefer_path = prefer_path;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(DaemonKernelsTest, TheSecondRequestForASpecCostsNoRpc) {
  auto client = Connect();
  auto first = client->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->source, v1::GetKernelResponse::COMPILED);
  EXPECT_EQ((*first)->symbols, (std::vector<KernelSymbol>{{testing::kScaleFloat, testing::kScaleFloatLowered}}));
  auto second = client->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->get(), first->get());
  EXPECT_EQ(client->counters().get_kernel_rpcs, 1u);
  EXPECT_EQ(client->counters().memo_hits, 1u);
  // The daemon saw one request, which compiled once.
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->compiles(), 1u);
  EXPECT_EQ(stats->requests(), 1u);
  // Another instantiation is another request.
  ASSERT_TRUE(client->GetKernelBinary(Scale("fp64")).ok());
  EXPECT_EQ(client->counters().get_kernel_rpcs, 2u);
}

TEST_F(DaemonKernelsTest, ConcurrentFirstRequestsShareOneRpc) {
  auto client = Connect();
  std::vector<std::thread> threads;
  std::atomic<int> served{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      if (client->GetKernelBinary(Scale("fp32")).ok()) ++served;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(served, 16);
  EXPECT_EQ(client->counters().get_kernel_rpcs, 1u);
  EXPECT_EQ(client->counters().memo_hits, 15u);
}

TEST_F(DaemonKernelsTest, ErrorsAreNotMemoized) {
  auto client = Connect();
  for (int i = 0; i < 2; ++i) {
    auto missing = client->GetKernelBinary({.kernel = "test.scal", .arch = "sm_90"});
    EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  }
  EXPECT_EQ(client->counters().get_kernel_rpcs, 2u);
}

TEST_F(DaemonKernelsTest, UnixClientsGetTheBlobsPathAndVerifyItThemselves) {
  auto by_path = Connect();  // unix: endpoint, so path delivery by default
  auto from_file = by_path->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_THAT((*from_file)->blob_path, HasSubstr(daemon_->cache_dir().string() + "/blobs/"));
  EXPECT_EQ((*from_file)->cubin, CubinInCache(daemon_->cache_dir(), (*from_file)->key));

  auto by_bytes = Connect(/*prefer_path=*/false);
  auto from_bytes = by_bytes->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status();
  EXPECT_EQ((*from_bytes)->blob_path, "");
  EXPECT_EQ((*from_bytes)->cubin, (*from_file)->cubin);
  EXPECT_EQ((*from_bytes)->key, (*from_file)->key);
}

TEST_F(DaemonKernelsTest, ADeliveredBlobThatFailsItsChecksumIsNeverServed) {
  auto client = Connect();
  auto first = client->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_FALSE((*first)->blob_path.empty());
  testing::FlipByte((*first)->blob_path);
  // A fresh client (empty memo): the daemon answers from memory with the
  // file's path; the file no longer matches its checksum.
  auto damaged = Connect()->GetKernelBinary(Scale("fp32"));
  EXPECT_TRUE(absl::IsDataLoss(damaged.status())) << damaged.status();
  EXPECT_THAT(damaged.status().message(), HasSubstr("failed verification"));
  EXPECT_THAT(damaged.status().message(), HasSubstr("not served"));
}

TEST_F(DaemonKernelsTest, ABlobThatCannotBeReadIsAskedForAsBytes) {
  auto client = Connect();
  auto first = client->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(first.ok()) << first.status();
  // Gone from disk (evicted meanwhile), still in the daemon's hot cache.
  std::filesystem::remove((*first)->blob_path);
  auto fresh = Connect();
  auto again = fresh->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->cubin, (*first)->cubin);
  EXPECT_EQ((*again)->blob_path, "");
  // The daemon notices the missing file itself and answers with the bytes.
  EXPECT_EQ(fresh->counters().get_kernel_rpcs, 1u);
}

TEST_F(DaemonKernelsTest, ARestartedDaemonIsBridgedByItsOwnCacheDirectory) {
  auto before = Connect()->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(before.ok()) << before.status();
  daemon_->process().Signal(SIGTERM);
  ASSERT_EQ(daemon_->process().WaitForExit(testing::kProcessTimeout), 0);

  // No daemon, but a fallback: connects.
  auto client = testing::ConnectWithFallback(daemon_->endpoint(), daemon_->cache_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  auto during = (*client)->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ((*during)->source, v1::GetKernelResponse::FALLBACK);
  EXPECT_EQ((*during)->key, (*before)->key);
  EXPECT_EQ((*during)->cubin, (*before)->cubin);

  // Fallback answers are not memoized: once the daemon is back, it answers.
  TestDaemon restarted(dir_, {"--kernels", (dir_ / "kernels").string()});
  ASSERT_TRUE(restarted.WaitUntilServing().ok());
  ASSERT_TRUE((*client)->WaitUntilServing(testing::kProcessTimeout).ok());
  auto after = (*client)->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE((*after)->source, v1::GetKernelResponse::FALLBACK);
  EXPECT_EQ((*after)->key, (*before)->key);
}

// --- With no daemon at all ---------------------------------------------------------

class FallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFixtureKernels(dir_ / "kernels");
    const ProcessResult warm = testing::RunJitdWarm(dir_ / "kernels", dir_ / "warmed", {"--all"}, dir_ / "warm.log");
    ASSERT_EQ(warm.exit_code, 0) << warm.output;
  }

  std::unique_ptr<Client> Connect(const std::filesystem::path& fallback) const {
    auto client = testing::ConnectWithFallback("unix:" + (dir_ / "absent.sock").string(), fallback);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The key of the only warmed entry of `params`.
  std::string WarmedKey(const std::string& params) const {
    auto cache = OpenReadOnly(dir_ / "warmed");
    if (!cache.ok()) return "";
    auto rows = (*cache)->List({.params = params});
    return rows.ok() && rows->size() == 1 ? rows->front().key : "";
  }

  TempDir dir_;
};

TEST_F(FallbackTest, ServesTheWarmedCubinVerifiedAndSaysSo) {
  auto client = Connect(dir_ / "warmed");
  auto binary = client->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->source, v1::GetKernelResponse::FALLBACK);
  EXPECT_EQ((*binary)->key, WarmedKey("dtype=fp32"));
  EXPECT_EQ((*binary)->cubin, CubinInCache(dir_ / "warmed", (*binary)->key));
  EXPECT_EQ((*binary)->cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ((*binary)->arch, "sm_90");
  EXPECT_EQ((*binary)->symbols, (std::vector<KernelSymbol>{{testing::kScaleFloat, testing::kScaleFloatLowered}}));
  EXPECT_THAT((*binary)->blob_path, HasSubstr((dir_ / "warmed" / "blobs").string()));
  EXPECT_EQ(client->counters().fallback_answers, 1u);
  // Not memoized: the next request tries the daemon first, again.
  ASSERT_TRUE(client->GetKernelBinary(Scale("fp32")).ok());
  EXPECT_EQ(client->counters().get_kernel_rpcs, 2u);
  EXPECT_EQ(client->counters().fallback_answers, 2u);
}

TEST_F(FallbackTest, ACorruptBlobIsNotServed) {
  testing::FlipByte(testing::BlobPathOf(dir_ / "warmed", WarmedKey("dtype=fp32")));
  auto binary = Connect(dir_ / "warmed")->GetKernelBinary(Scale("fp32"));
  EXPECT_TRUE(absl::IsUnavailable(binary.status())) << binary.status();
  EXPECT_THAT(binary.status().message(), HasSubstr("cannot reach jitd at unix:"));
  EXPECT_THAT(binary.status().message(), HasSubstr("1 entry for test.scale{dtype=fp32}@sm_90 failed verification"));
  // The other instantiation is intact and still served.
  EXPECT_TRUE(Connect(dir_ / "warmed")->GetKernelBinary(Scale("fp64")).ok());
}

TEST_F(FallbackTest, AMissSaysWhatWasLookedForWhere) {
  auto other_arch = Connect(dir_ / "warmed")->GetKernelBinary({kFixtureKernel, {{"dtype", "fp32"}}, "sm_100a", {}});
  EXPECT_TRUE(absl::IsUnavailable(other_arch.status())) << other_arch.status();
  EXPECT_THAT(other_arch.status().message(), HasSubstr("fallback cache " + (dir_ / "warmed").string() +
                                                       " has no entry for test.scale{dtype=fp32}@sm_100a"));
  // The params must be named as the cache stores them: all of them.
  auto no_params = Connect(dir_ / "warmed")->GetKernelBinary({kFixtureKernel, {}, "sm_90", {}});
  EXPECT_THAT(no_params.status().message(), HasSubstr("has no entry for test.scale{}@sm_90"));
}

TEST_F(FallbackTest, RequestsWithOptionsAreNotAnsweredFromIt) {
  auto binary = Connect(dir_ / "warmed")->GetKernelBinary(Scale("fp32", {"-lineinfo"}));
  EXPECT_TRUE(absl::IsUnavailable(binary.status())) << binary.status();
  EXPECT_THAT(binary.status().message(), HasSubstr("answers requests without extra options only"));
}

TEST_F(FallbackTest, AnUnwarmedDirectoryIsReportedAsSuch) {
  std::filesystem::create_directories(dir_ / "empty");
  auto binary = Connect(dir_ / "empty")->GetKernelBinary(Scale("fp32"));
  EXPECT_TRUE(absl::IsUnavailable(binary.status())) << binary.status();
  EXPECT_THAT(binary.status().message(), HasSubstr("has this directory been warmed?"));
}

TEST_F(FallbackTest, TheEntryWithoutExtraOptionsWinsOverANewerOneWithThem) {
  std::ofstream(dir_ / "specs.toml") << "[[spec]]\nkernel = \"test.scale\"\nparams = { dtype = \"fp32\" }\n"
                                        "options = [\"-lineinfo\"]\n";
  const ProcessResult warm = testing::RunJitdWarm(dir_ / "kernels", dir_ / "warmed",
                                                  {"--manifest", (dir_ / "specs.toml").string()}, dir_ / "warm2.log");
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  auto binary = Connect(dir_ / "warmed")->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(binary.ok()) << binary.status();
  auto cache = OpenReadOnly(dir_ / "warmed");
  ASSERT_TRUE(cache.ok());
  auto entry = (*cache)->Lookup((*binary)->key);
  ASSERT_TRUE(entry.ok());
  EXPECT_THAT(entry->meta.options, ::testing::Not(::testing::Contains(HasSubstr("line-info"))));
  EXPECT_EQ(((*cache)->List({.params = "dtype=fp32"}))->size(), 2u);
}

TEST_F(FallbackTest, OfTwoVersionsOfAKernelTheNewestIsServed) {
  // The kernel's source changed and was warmed again: a new key, created later.
  testing::WriteFixtureKernels(dir_ / "kernels", "second edition");
  const ProcessResult warm = testing::RunJitdWarm(dir_ / "kernels", dir_ / "warmed", {"--all"}, dir_ / "warm2.log");
  ASSERT_EQ(warm.exit_code, 0) << warm.output;
  auto cache = OpenReadOnly(dir_ / "warmed");
  ASSERT_TRUE(cache.ok());
  auto rows = (*cache)->List({.params = "dtype=fp32"});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  const cache::EntryInfo& newest = (*rows)[0].created_unix_ms >= (*rows)[1].created_unix_ms ? (*rows)[0] : (*rows)[1];
  auto binary = Connect(dir_ / "warmed")->GetKernelBinary(Scale("fp32"));
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->key, newest.key);
}

TEST_F(FallbackTest, WithoutAnArchItServesTheOnlyArchPresent) {
  // On a host without a driver, an empty arch is the daemon's default, which
  // the client cannot know: the fallback serves it when the entries leave no
  // doubt (this directory was warmed for sm_90 alone).
  if (CudaDriverStatus().ok()) GTEST_SKIP() << "a CUDA driver supplies the arch here";
  auto binary = Connect(dir_ / "warmed")->GetKernelBinary({kFixtureKernel, {{"dtype", "fp32"}}, "", {}});
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->arch, "sm_90");
}

TEST_F(FallbackTest, TheDirectoryCanComeFromTheEnvironment) {
  setenv("JITD_FALLBACK_CACHE_DIR", (dir_ / "warmed").c_str(), 1);
  auto client = Connect("");
  unsetenv("JITD_FALLBACK_CACHE_DIR");
  auto binary = client->GetKernelBinary(Scale("fp64"));
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->source, v1::GetKernelResponse::FALLBACK);
}

TEST_F(FallbackTest, ADirectoryWithoutAnOpenerIsRefusedAndSaysWhatToLink) {
  ClientOptions options;
  options.endpoint = "unix:" + (dir_ / "absent.sock").string();
  options.fallback_cache_dir = dir_ / "warmed";
  auto given = Client::Connect(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(given.status())) << given.status();
  EXPECT_THAT(given.status().message(), HasSubstr("link jitd::client_fallback"));
  EXPECT_THAT(given.status().message(), HasSubstr("ClientOptions::fallback_cache_dir"));
  options.fallback_cache_dir.clear();
  setenv("JITD_FALLBACK_CACHE_DIR", (dir_ / "warmed").c_str(), 1);
  auto from_env = Client::Connect(options);
  unsetenv("JITD_FALLBACK_CACHE_DIR");
  EXPECT_TRUE(absl::IsFailedPrecondition(from_env.status())) << from_env.status();
  EXPECT_THAT(from_env.status().message(), HasSubstr("from JITD_FALLBACK_CACHE_DIR"));
}

TEST_F(FallbackTest, ACorruptIndexIsReportedAndNothingIsServed) {
  {
    std::ofstream index(dir_ / "warmed" / "index.sqlite", std::ios::binary | std::ios::trunc);
    index << "not a database";
  }
  auto binary = Connect(dir_ / "warmed")->GetKernelBinary(Scale("fp32"));
  EXPECT_TRUE(absl::IsUnavailable(binary.status())) << binary.status();
  EXPECT_THAT(binary.status().message(), HasSubstr("fallback cache " + (dir_ / "warmed").string()));
}

TEST_F(FallbackTest, WithoutAFallbackAnAbsentDaemonFailsConnect) {
  ClientOptions options;
  options.endpoint = "unix:" + (dir_ / "absent.sock").string();
  EXPECT_TRUE(absl::IsUnavailable(Client::Connect(options).status()));
}

TEST_F(FallbackTest, JitctlGetServesFromTheFallbackAndSaysSo) {
  const std::string endpoint = "unix:" + (dir_ / "absent.sock").string();
  const ProcessResult get = testing::RunProcess(
      {testing::JitctlBinary(), "--endpoint", endpoint, "--fallback-cache-dir", (dir_ / "warmed").string(), "get",
       kFixtureKernel, "-p", "dtype=fp32", "--arch", "sm_90", "-o", (dir_ / "k.cubin").string()},
      dir_ / "jitctl.log", testing::kProcessTimeout);
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, ::testing::ContainsRegex("origin +fallback"));
  EXPECT_THAT(get.output, HasSubstr(testing::kScaleFloatLowered));
  std::ifstream written(dir_ / "k.cubin", std::ios::binary);
  const std::string cubin((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  EXPECT_EQ(cubin, CubinInCache(dir_ / "warmed", WarmedKey("dtype=fp32")));
}

}  // namespace
}  // namespace jitd
