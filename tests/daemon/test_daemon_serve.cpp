// The CacheAdmin and Compiler services of a real jitd process, called over
// its Unix socket through the client library.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cache_seed.h"
#include "reflection_probe.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SeedCache;
using testing::TempDir;
using testing::TestDaemon;
using testing::ThreeEntries;

std::vector<std::string> Keys(const v1::ListEntriesResponse& response) {
  std::vector<std::string> keys;
  for (const auto& entry : response.entries()) keys.push_back(entry.key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

// A daemon on an empty cache.
class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(dir_);
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->WaitUntilServing();
    client_ = daemon_->Connect();
  }
  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

// A daemon on a cache seeded with three entries before it started.
class SeededServeTest : public ServeTest {
 protected:
  void SetUp() override {
    SeedCache(dir_ / "cache", ThreeEntries());
    ServeTest::SetUp();
  }
};

TEST_F(ServeTest, StatsOnAnEmptyCacheReportsZeroEntriesTheDirAndTheBudget) {
  absl::StatusOr<v1::StatsResponse> stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->entries(), 0u);
  EXPECT_EQ(stats->bytes(), 0u);
  EXPECT_EQ(stats->cache_dir(), (dir_ / "cache").string());
  EXPECT_EQ(stats->max_bytes(), uint64_t{10} << 30);  // the default budget
  EXPECT_GT(stats->high_watermark_bytes(), stats->low_watermark_bytes());
  EXPECT_GE(stats->uptime_s(), 0.0);
}

TEST_F(SeededServeTest, ListEntriesShowsEntriesPublishedBeforeStartWithTheirFields) {
  absl::StatusOr<v1::ListEntriesResponse> listed = client_->ListEntries({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->total(), 3u);
  EXPECT_THAT(Keys(*listed), ElementsAre(std::string(32, 'a'), std::string(32, 'b'), std::string(32, 'c')));
  for (const v1::EntryInfo& entry : listed->entries()) {
    if (entry.key() != std::string(32, 'a')) continue;
    EXPECT_EQ(entry.kernel(), "moe.topk_sum");
    EXPECT_EQ(entry.params(), "dtype=bf16");
    EXPECT_EQ(entry.arch(), "sm_90");
    EXPECT_GT(entry.size_bytes(), 4096u);  // the cubin plus metadata
    EXPECT_GT(entry.created_unix_ms(), 0);
    EXPECT_EQ(entry.nvrtc_version(), "13.0");
    EXPECT_DOUBLE_EQ(entry.compile_ms(), 12.5);
  }
}

TEST_F(SeededServeTest, ListEntriesFiltersByGlobAndArchAndLimitKeepsTheTotal) {
  v1::ListEntriesRequest by_glob;
  by_glob.set_kernel_glob("moe.*");
  EXPECT_EQ(client_->ListEntries(by_glob)->total(), 2u);
  v1::ListEntriesRequest by_arch;
  by_arch.set_arch("sm_100a");
  EXPECT_THAT(Keys(*client_->ListEntries(by_arch)), ElementsAre(std::string(32, 'c')));
  v1::ListEntriesRequest limited;
  limited.set_limit(1);
  absl::StatusOr<v1::ListEntriesResponse> one = client_->ListEntries(limited);
  EXPECT_EQ(one->entries_size(), 1);
  EXPECT_EQ(one->total(), 3u);
}

TEST_F(SeededServeTest, EvictDryRunReportsWithoutRemoving) {
  v1::EvictRequest request;
  request.set_kernel_glob("moe.*");
  request.set_dry_run(true);
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_TRUE(evicted->dry_run());
  EXPECT_EQ(evicted->evicted_entries(), 2u);
  EXPECT_EQ(evicted->evicted_size(), 2);
  EXPECT_GT(evicted->evicted_bytes(), 0u);
  EXPECT_EQ(client_->ListEntries({})->total(), 3u);
}

TEST_F(SeededServeTest, EvictRemovesTheSelectedEntriesAndReportsWhatRemains) {
  v1::EvictRequest request;
  request.set_kernel_glob("moe.*");
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_FALSE(evicted->dry_run());
  EXPECT_EQ(evicted->evicted_entries(), 2u);
  EXPECT_EQ(evicted->remaining_entries(), 1u);
  EXPECT_THAT(Keys(*client_->ListEntries({})), ElementsAre(std::string(32, 'c')));
}

TEST_F(SeededServeTest, EvictByKeyAndByBudgetReachTheCache) {
  v1::EvictRequest by_key;
  by_key.add_keys(std::string(32, 'b'));
  EXPECT_EQ(client_->Evict(by_key)->evicted_entries(), 1u);
  v1::EvictRequest to_zero;
  to_zero.set_max_bytes(0);  // present-but-zero: evict everything unpinned
  EXPECT_EQ(client_->Evict(to_zero)->remaining_entries(), 0u);
}

TEST_F(ServeTest, EvictWithoutAnyFilterIsInvalidArgument) {
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict({});
  EXPECT_EQ(evicted.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SeededServeTest, VerifyFindsAByteFlippedInABlob) {
  absl::StatusOr<v1::VerifyResponse> clean = client_->Verify({});
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ(clean->checked(), 3u);
  EXPECT_EQ(clean->ok(), 3u);
  EXPECT_EQ(clean->corrupt(), 0u);
  EXPECT_EQ(clean->index_integrity(), "ok");

  testing::FlipByte(testing::BlobPathOf(dir_ / "cache", std::string(32, 'b')));
  absl::StatusOr<v1::VerifyResponse> found = client_->Verify({});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->corrupt(), 1u);
  EXPECT_EQ(found->ok(), 2u);
  EXPECT_EQ(found->repaired(), 0u);
  ASSERT_EQ(found->problems_size(), 1);
  EXPECT_THAT(found->problems(0), HasSubstr(std::string(32, 'b')));
}

TEST_F(SeededServeTest, VerifyRepairDropsTheCorruptEntry) {
  testing::FlipByte(testing::BlobPathOf(dir_ / "cache", std::string(32, 'a')));
  v1::VerifyRequest repair;
  repair.set_repair(true);
  absl::StatusOr<v1::VerifyResponse> repaired = client_->Verify(repair);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(repaired->corrupt(), 1u);
  EXPECT_EQ(repaired->repaired(), 1u);
  EXPECT_THAT(Keys(*client_->ListEntries({})), ElementsAre(std::string(32, 'b'), std::string(32, 'c')));
}

TEST_F(ServeTest, CompilerServesTheShippedKernelsByDefault) {
  v1::GetKernelRequest request;
  request.set_kernel("diffusion.modulate_scale_shift");
  (*request.mutable_params())["dtype"] = "bf16";
  absl::StatusOr<v1::GetKernelResponse> kernel = client_->GetKernel(request);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->source(), v1::GetKernelResponse::COMPILED);
  ASSERT_EQ(kernel->symbols_size(), 1);
  EXPECT_EQ(kernel->symbols(0).name_expression(),
            "sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16>");
  absl::StatusOr<v1::ListKernelsResponse> listed = client_->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->kernels_size(), 7);
}

TEST_F(ServeTest, HealthAnswersServing) {
  absl::StatusOr<bool> serving = client_->IsServing();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);
}

TEST_F(ServeTest, ReflectionListsEveryService) {
  absl::StatusOr<std::string> services = testing::ListServicesByReflection(daemon_->endpoint());
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, HasSubstr("jitd.v1.CacheAdmin"));
  EXPECT_THAT(*services, HasSubstr("jitd.v1.Compiler"));
  EXPECT_THAT(*services, HasSubstr("grpc.health.v1.Health"));
}

// A daemon started with --admin-token-file.
class AdminTokenTest : public ServeTest {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "token") << "s3cret-token\n";
    SeedCache(dir_ / "cache", ThreeEntries());
    daemon_ =
        std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--admin-token-file", (dir_ / "token").string()});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->WaitUntilServing();
    client_ = daemon_->Connect();
  }
};

TEST_F(AdminTokenTest, EvictIsDeniedWithoutTheTokenAndWithAWrongOne) {
  v1::EvictRequest request;
  request.add_keys(std::string(32, 'a'));
  EXPECT_EQ(client_->Evict(request).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(daemon_->Connect("wrong-token")->Evict(request).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client_->ListEntries({})->total(), 3u);  // nothing was removed
}

TEST_F(AdminTokenTest, EvictSucceedsWithTheToken) {
  v1::EvictRequest request;
  request.add_keys(std::string(32, 'a'));
  absl::StatusOr<v1::EvictResponse> evicted = daemon_->Connect("s3cret-token")->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->evicted_entries(), 1u);
}

TEST_F(AdminTokenTest, VerifyNeedsTheTokenOnlyToRepair) {
  EXPECT_TRUE(client_->Verify({}).ok());
  v1::VerifyRequest repair;
  repair.set_repair(true);
  EXPECT_EQ(client_->Verify(repair).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(daemon_->Connect("s3cret-token")->Verify(repair).ok());
}

TEST_F(AdminTokenTest, ReadingCallsNeedNoToken) {
  EXPECT_TRUE(client_->Stats().ok());
  EXPECT_TRUE(client_->ListEntries({}).ok());
}

}  // namespace
}  // namespace jitd
