// The byte budget (background, batched, LRU, watermarks), pinning, and every
// explicit eviction filter with its dry run.
#include <gtest/gtest.h>

#include <limits>
#include <thread>

#include "testing.h"

namespace jitd::cache {
namespace {

using namespace std::chrono_literals;
using testing::CubinFor;
using testing::KeyFor;
using testing::MetaFor;
using testing::OpenCache;
using testing::Options;
using testing::TempDir;

constexpr size_t kCubin = 4000;

uint64_t BlobSize(Cache& cache, uint64_t n) {
  auto list = cache.List({});
  for (const auto& e : *list) {
    if (e.key == KeyFor(n)) return e.size_bytes;
  }
  return 0;
}

TEST(Eviction, BudgetIsRespectedUnderChurnAndKeepsRecentlyUsedEntries) {
  TempDir dir;
  constexpr uint64_t kBudget = 100 * 1024;
  auto cache = OpenCache(Options(dir.path(), kBudget));
  // A "hot" entry used between every publish must survive all the churn.
  ASSERT_TRUE(cache->Publish(MetaFor(0), CubinFor(0, kCubin)).ok());
  for (uint64_t i = 1; i <= 300; ++i) {
    ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, kCubin)).ok());
    ASSERT_TRUE(cache->Lookup(KeyFor(0)).ok()) << "hot entry evicted at publish " << i;
    if (i % 10 == 0) {
      ASSERT_TRUE(cache->Flush().ok());
      auto s = cache->Stats();
      ASSERT_LE(s->bytes, kBudget) << "after publish " << i;
    }
  }
  auto s = cache->Stats();
  EXPECT_LE(s->bytes, kBudget);
  EXPECT_GT(s->evictions, 250u);
  // The newest entries are still there, the oldest cold ones are gone.
  EXPECT_TRUE(cache->Lookup(KeyFor(300)).ok());
  EXPECT_TRUE(absl::IsNotFound(cache->Lookup(KeyFor(1)).status()));
}

TEST(Eviction, EvictsDownToTheLowWatermarkOnlyPastTheHighOne) {
  TempDir dir;
  auto probe = OpenCache(Options(dir.path()));
  ASSERT_TRUE(probe->Publish(MetaFor(1000), CubinFor(1000, kCubin)).ok());
  const uint64_t entry = BlobSize(*probe, 1000);
  ASSERT_TRUE(probe->Evict({.keys = {KeyFor(1000)}}).ok());
  probe.reset();

  CacheOptions o = Options(dir.path(), 20 * entry);  // high = 19 entries, low = 17
  auto cache = OpenCache(o);
  for (uint64_t i = 0; i < 19; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, kCubin)).ok());
  ASSERT_TRUE(cache->Flush().ok());
  EXPECT_EQ(cache->Stats()->entries, 19u) << "at the high watermark nothing is evicted";
  ASSERT_TRUE(cache->Publish(MetaFor(19), CubinFor(19, kCubin)).ok());
  ASSERT_TRUE(cache->Flush().ok());
  auto s = cache->Stats();
  EXPECT_EQ(s->entries, 17u);
  EXPECT_LE(s->bytes, s->low_watermark_bytes);
  EXPECT_EQ(s->evictions, 1u + 3u) << "the probe eviction, then three by budget";
}

TEST(Eviction, BackgroundThreadEnforcesTheBudgetWithoutFlush) {
  TempDir dir;
  CacheOptions o = Options(dir.path(), 50 * 1024);
  o.background = true;
  o.flush_interval = 50ms;
  auto cache = OpenCache(o);
  for (uint64_t i = 0; i < 60; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, kCubin)).ok());
  // Wait (bounded) for the background thread to catch up.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (cache->Stats()->bytes > o.max_bytes && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_LE(cache->Stats()->bytes, o.max_bytes);
}

TEST(Eviction, PinnedEntriesSurviveBudgetAndExplicitEviction) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path(), 40 * 1024));
  ASSERT_TRUE(cache->Publish(MetaFor(0), CubinFor(0, kCubin)).ok());
  ASSERT_TRUE(cache->Pin(KeyFor(0), true).ok());
  EXPECT_TRUE(absl::IsNotFound(cache->Pin(KeyFor(12345), true)));
  for (uint64_t i = 1; i < 100; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, kCubin)).ok());
  ASSERT_TRUE(cache->Flush().ok());
  EXPECT_TRUE(cache->Lookup(KeyFor(0)).ok());
  auto r = cache->Evict({.keys = {KeyFor(0)}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->evicted.empty());
  auto all = cache->Evict({.max_bytes = 0});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(cache->Stats()->entries, 1u);
  EXPECT_EQ(cache->Stats()->pinned_entries, 1u);
  ASSERT_TRUE(cache->Pin(KeyFor(0), false).ok());
  ASSERT_TRUE(cache->Evict({.keys = {KeyFor(0)}}).ok());
  EXPECT_EQ(cache->Stats()->entries, 0u);
}

TEST(Eviction, OnlyPinnedEntriesLeftOverBudgetIsReportedNotLooped) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path(), 10 * 1024));
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, kCubin)).ok());
    ASSERT_TRUE(cache->Pin(KeyFor(i), true).ok());
  }
  ASSERT_TRUE(cache->Flush().ok());
  EXPECT_EQ(cache->Stats()->entries, 5u);
}

class Seeded : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = OpenCache(Options(dir_.path()));
    const int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    // moe.* on sm_90 and sm_100a, norm.* on sm_90; entries 0-3 a day old.
    for (uint64_t i = 0; i < 8; ++i) {
      EntryMeta m = MetaFor(i, i < 4 ? "moe.align_block_size" : "norm.rmsnorm", i % 2 ? "sm_100a" : "sm_90");
      m.created_unix_ms = (i < 4 ? now - 24 * 3600 * 1000 : now) + static_cast<int64_t>(i);
      ASSERT_TRUE(cache_->Publish(m, CubinFor(i, kCubin)).ok());
    }
  }
  std::vector<std::string> Keys(const EvictResult& r) {
    std::vector<std::string> out;
    for (const auto& e : r.evicted) out.push_back(e.key);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<std::string> KeysOf(std::initializer_list<uint64_t> ns) {
    std::vector<std::string> out;
    for (auto n : ns) out.push_back(KeyFor(n));
    std::sort(out.begin(), out.end());
    return out;
  }
  TempDir dir_;
  std::unique_ptr<Cache> cache_;
};

TEST_F(Seeded, EvictByKey) {
  auto r = cache_->Evict({.keys = {KeyFor(2), KeyFor(5)}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Keys(*r), KeysOf({2, 5}));
  EXPECT_EQ(cache_->Stats()->entries, 6u);
  EXPECT_TRUE(absl::IsNotFound(cache_->Lookup(KeyFor(2)).status()));
}

TEST_F(Seeded, EvictByKernelGlob) {
  auto r = cache_->Evict({.kernel_glob = "moe.*"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Keys(*r), KeysOf({0, 1, 2, 3}));
}

TEST_F(Seeded, EvictByArch) {
  auto r = cache_->Evict({.arch = "sm_100a"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Keys(*r), KeysOf({1, 3, 5, 7}));
}

TEST_F(Seeded, EvictByAge) {
  auto r = cache_->Evict({.older_than = std::chrono::hours(1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Keys(*r), KeysOf({0, 1, 2, 3}));
}

TEST_F(Seeded, AnAgeBeyondTheEpochSelectsNothingInsteadOfOverflowing) {
  // 2^62 s times 1000 overflows int64: it once wrapped to "everything".
  for (int64_t seconds : {int64_t{1} << 62, std::numeric_limits<int64_t>::max()}) {
    auto r = cache_->Evict({.older_than = std::chrono::seconds(seconds), .dry_run = true});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(Keys(*r).empty()) << seconds;
  }
  EXPECT_EQ(cache_->Evict({.older_than = std::chrono::seconds(-1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(Seeded, EvictFiltersCombineWithAnd) {
  auto r = cache_->Evict({.kernel_glob = "norm.*", .arch = "sm_90"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Keys(*r), KeysOf({4, 6}));
}

TEST_F(Seeded, EvictToMaxBytesRemovesLeastRecentlyUsedFirst) {
  ASSERT_TRUE(cache_->Lookup(KeyFor(0)).ok());  // now the most recently used
  uint64_t total = cache_->Stats()->bytes;
  uint64_t per = total / 8;
  auto r = cache_->Evict({.max_bytes = total - 2 * per});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Keys(*r), KeysOf({1, 2}));
  EXPECT_LE(r->remaining_bytes, total - 2 * per);
}

TEST_F(Seeded, DryRunReportsExactlyWhatARealRunRemoves) {
  auto dry = cache_->Evict({.kernel_glob = "moe.*", .dry_run = true});
  ASSERT_TRUE(dry.ok());
  EXPECT_TRUE(dry->dry_run);
  EXPECT_EQ(cache_->Stats()->entries, 8u) << "a dry run removes nothing";
  EXPECT_EQ(dry->remaining_entries, 4u);
  auto real = cache_->Evict({.kernel_glob = "moe.*"});
  ASSERT_TRUE(real.ok());
  EXPECT_EQ(Keys(*dry), Keys(*real));
  EXPECT_EQ(dry->evicted_bytes, real->evicted_bytes);
  EXPECT_EQ(cache_->Stats()->entries, 4u);
}

TEST_F(Seeded, EvictWithoutAnyFilterIsRefused) {
  auto r = cache_->Evict({});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("at least one filter"), std::string_view::npos);
}

TEST_F(Seeded, EvictionsAreCountedAndFilesRemoved) {
  auto r = cache_->Evict({.arch = "sm_90"});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(cache_->Flush().ok());
  EXPECT_EQ(cache_->Stats()->evictions, 4u);
  size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir_.path() / "blobs"))
    files += f.is_regular_file();
  EXPECT_EQ(files, 4u);
}

TEST(Eviction, BudgetChangedAtRunTimeTakesEffect) {
  TempDir dir;
  auto cache = OpenCache(Options(dir.path()));
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(cache->Publish(MetaFor(i), CubinFor(i, kCubin)).ok());
  ASSERT_TRUE(cache->Flush().ok());
  EXPECT_EQ(cache->Stats()->entries, 20u);
  cache->SetMaxBytes(10 * 1024);
  ASSERT_TRUE(cache->Flush().ok());
  EXPECT_LE(cache->Stats()->bytes, 10u * 1024);
}

}  // namespace
}  // namespace jitd::cache
