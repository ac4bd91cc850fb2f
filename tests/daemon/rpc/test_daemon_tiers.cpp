// The daemon's tiers tell each other the truth: a kernel answered from
// memory is in use on disk too (hits, last use, `ls` order, eviction), and
// an entry the disk removes (budget eviction, verify --repair) is not
// served from memory afterwards. Real jitd, real cache directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cache_seed.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "small_daemon_test.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using testing::KernelRequest;
using testing::kProcessTimeout;
using testing::PollUntil;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class TiersTest : public testing::SmallDaemonTest {
 protected:
  absl::StatusOr<v1::GetKernelResponse> Get(const std::string& dtype_or_clamp,
                                            v1::GetKernelRequest::Mode mode = v1::GetKernelRequest::COMPILE) {
    v1::GetKernelRequest request = dtype_or_clamp.rfind("fp", 0) == 0
                                       ? KernelRequest("small.fill", {{"dtype", dtype_or_clamp}}, mode)
                                       : KernelRequest("small.scale", {{"clamp", dtype_or_clamp}}, mode);
    return client_->GetKernel(request);
  }

  v1::EntryInfo Entry(const std::string& key) {
    absl::StatusOr<v1::ListEntriesResponse> listed = client_->ListEntries({});
    EXPECT_TRUE(listed.ok()) << listed.status();
    for (const v1::EntryInfo& e : listed->entries()) {
      if (e.key() == key) return e;
    }
    ADD_FAILURE() << "no entry " << key;
    return {};
  }
};

TEST_F(TiersTest, AKernelServedOnlyFromMemoryShowsEveryHitAndAFreshLastUseOnDisk) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> compiled = Get("fp32");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->source(), v1::GetKernelResponse::COMPILED);
  const std::string key = compiled->key();
  const v1::EntryInfo before = Entry(key);
  EXPECT_EQ(before.hits(), 0u);

  constexpr int kMemoryAnswers = 7;
  int64_t last_request_ms = 0;
  for (int i = 0; i < kMemoryAnswers; ++i) {
    last_request_ms = NowUnixMs();
    absl::StatusOr<v1::GetKernelResponse> hot = Get("fp32");
    ASSERT_TRUE(hot.ok()) << hot.status();
    ASSERT_EQ(hot->source(), v1::GetKernelResponse::MEMORY);
  }
  // ListEntries writes the queued uses first: no wait for the flush.
  const v1::EntryInfo after = Entry(key);
  EXPECT_EQ(after.hits(), static_cast<uint64_t>(kMemoryAnswers));
  EXPECT_GE(after.last_used_unix_ms(), last_request_ms - 1) << "the last memory answer is the last use";
  absl::StatusOr<v1::StatsResponse> stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->memory_hits(), static_cast<uint64_t>(kMemoryAnswers));
  EXPECT_GE(stats->hits(), static_cast<uint64_t>(kMemoryAnswers)) << "memory answers are cache hits";

  const testing::ProcessResult ls = daemon_->Jitctl({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_THAT(ls.output, ::testing::ContainsRegex("small.fill +dtype=fp32"));
}

TEST_F(TiersTest, EvictOlderThanSparesAKernelInUseFromMemory) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> in_use = Get("fp32");
  absl::StatusOr<v1::GetKernelResponse> idle = Get("fp64");
  ASSERT_TRUE(in_use.ok() && idle.ok());
  // --older-than counts whole seconds of idleness: let two pass, then use
  // one of the two kernels (from memory) and evict what has been idle.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  ASSERT_EQ(Get("fp32")->source(), v1::GetKernelResponse::MEMORY);

  v1::EvictRequest request;
  request.set_older_than_s(2);
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  ASSERT_EQ(evicted->evicted_size(), 1);
  EXPECT_EQ(evicted->evicted(0).key(), idle->key()) << "only the idle kernel goes";
  EXPECT_EQ(Get("fp32", v1::GetKernelRequest::CACHED_ONLY)->source(), v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(Get("fp64", v1::GetKernelRequest::CACHED_ONLY).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TiersTest, BudgetEvictionDropsTheHotCopy) {
  // Sizes first, from a daemon without a budget: three entries.
  Start();
  std::vector<std::string> keys;
  uint64_t total = 0;
  for (const char* which : {"fp32", "fp64", "off"}) {
    absl::StatusOr<v1::GetKernelResponse> r = Get(which);
    ASSERT_TRUE(r.ok()) << r.status();
    keys.push_back(r->key());
    total += Entry(r->key()).size_bytes();
  }
  v1::EvictRequest drop_third;
  drop_third.add_keys(keys[2]);
  ASSERT_TRUE(client_->Evict(drop_third).ok());
  Stop();

  // A budget the three together pass (96% of it, above the 95% high
  // watermark) and two of them fit under the low watermark (85%): adding
  // the third evicts exactly the least recently used one.
  Start({"--max-cache-bytes", std::to_string(static_cast<uint64_t>(static_cast<double>(total) / 0.96))});
  const uint64_t evictions_before = client_->Stats()->evictions();  // cumulative: the Evict above is one
  ASSERT_EQ(Get("fp32")->source(), v1::GetKernelResponse::DISK);    // now in memory, and least recently used
  ASSERT_EQ(Get("fp64")->source(), v1::GetKernelResponse::DISK);
  ASSERT_EQ(Get("fp32")->source(), v1::GetKernelResponse::MEMORY);
  ASSERT_EQ(Get("fp64")->source(), v1::GetKernelResponse::MEMORY);  // fp64 used last
  ASSERT_EQ(Get("off")->source(), v1::GetKernelResponse::COMPILED);
  ASSERT_TRUE(PollUntil([&] { return client_->Stats()->evictions() > evictions_before; }, kProcessTimeout))
      << daemon_->process().Output();
  const v1::StatsResponse stats = *client_->Stats();
  EXPECT_EQ(stats.entries(), 2u);
  EXPECT_EQ(Get("fp32", v1::GetKernelRequest::CACHED_ONLY).status().code(), absl::StatusCode::kNotFound)
      << "the evicted kernel is not served from memory either";
  EXPECT_EQ(Get("fp64", v1::GetKernelRequest::CACHED_ONLY)->source(), v1::GetKernelResponse::MEMORY);
}

TEST_F(TiersTest, VerifyRepairDropsTheHotCopyOfACorruptEntry) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> compiled = Get("fp32");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(Get("fp32")->source(), v1::GetKernelResponse::MEMORY);
  testing::FlipByte(testing::BlobPathOf(daemon_->cache_dir(), compiled->key()));

  v1::VerifyRequest repair;
  repair.set_repair(true);
  absl::StatusOr<v1::VerifyResponse> verified = client_->Verify(repair);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->corrupt(), 1u);
  EXPECT_EQ(Get("fp32", v1::GetKernelRequest::CACHED_ONLY).status().code(), absl::StatusCode::kNotFound)
      << "a repaired-away entry is not served from memory";
  absl::StatusOr<v1::GetKernelResponse> again = Get("fp32");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(again->key(), compiled->key());
}

}  // namespace
}  // namespace jitd
