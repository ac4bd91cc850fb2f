// TierStack's two rules with the real memory and disk tiers (a cache
// directory with its SQLite index): a hit records a use below and fills
// above; a removal below is forgotten above.
#include <gtest/gtest.h>

#include "serving/tier.h"
#include "testing.h"

namespace jitd::serving {
namespace {

using cache::testing::CubinFor;
using cache::testing::KeyFor;
using cache::testing::MetaFor;
using cache::testing::TempDir;

class TierStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache::CacheOptions o = cache::testing::Options(dir_.path());
    o.background = false;
    cache_ = cache::testing::OpenCache(o);
    ASSERT_NE(cache_, nullptr);
    disk_ = std::make_unique<cache::DiskStorage>(cache_.get());
    stack_ = std::make_unique<TierStack>(std::vector<cache::Storage*>{&memory_, disk_.get()});
  }

  std::shared_ptr<const cache::Entry> Compiled(uint64_t n) {
    auto e = std::make_shared<cache::Entry>();
    e->meta = MetaFor(n);
    e->cubin = CubinFor(n);
    return e;
  }

  cache::EntryInfo Info(uint64_t n) {
    auto listed = cache_->List({});
    for (const auto& e : *listed) {
      if (e.key == KeyFor(n)) return e;
    }
    ADD_FAILURE() << "no entry " << n;
    return {};
  }

  TempDir dir_;
  std::unique_ptr<cache::Cache> cache_;
  MemoryTier memory_{1 << 20};
  std::unique_ptr<cache::DiskStorage> disk_;
  std::unique_ptr<TierStack> stack_;
};

TEST_F(TierStackTest, AFillGoesToEveryTierAndTheTopHoldsTheDisksCopy) {
  auto top = stack_->Fill(Compiled(1), 0, 2);
  EXPECT_FALSE(top->blob_path.empty()) << "memory holds what the disk sealed, with its path";
  auto stored = cache_->Lookup(KeyFor(1), cache::LookupCounting::kUncounted);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(top->blob_path, stored->blob_path);
  EXPECT_EQ(top->checksum, stored->checksum) << "the seal of the write is the blob's";
  EXPECT_EQ(top->cubin, stored->cubin);
  auto hit = stack_->Lookup(KeyFor(1), 0, 2);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->origin, Origin::kMemory);
  EXPECT_EQ(hit->entry->cubin, CubinFor(1));
}

TEST_F(TierStackTest, AMemoryHitIsAUseOnDisk) {
  stack_->Fill(Compiled(1), 0, 2);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(stack_->Lookup(KeyFor(1), 0, 2)->origin, Origin::kMemory);
  EXPECT_EQ(Info(1).hits, 5u);
  EXPECT_EQ(cache_->Stats()->hits, 5u);
}

TEST_F(TierStackTest, ADiskHitFillsMemory) {
  ASSERT_TRUE(cache_->Publish(MetaFor(2), CubinFor(2)).ok());
  EXPECT_EQ(stack_->Lookup(KeyFor(2), 0, 2)->origin, Origin::kDisk);
  EXPECT_EQ(stack_->Lookup(KeyFor(2), 0, 2)->origin, Origin::kMemory);
}

TEST_F(TierStackTest, EveryLevelCountsItsHitsMissesAndFillsTheSameWay) {
  ASSERT_TRUE(cache_->Publish(MetaFor(2), CubinFor(2)).ok());
  EXPECT_EQ(stack_->Lookup(KeyFor(2), 0, 2)->origin, Origin::kDisk);    // memory misses, disk hits
  EXPECT_EQ(stack_->Lookup(KeyFor(2), 0, 2)->origin, Origin::kMemory);  // memory hits
  EXPECT_FALSE(stack_->Lookup(KeyFor(3), 0, 2).has_value());            // both miss
  stack_->Fill(Compiled(4), 0, 2);
  const cache::StorageStats memory = memory_.stats();
  const cache::StorageStats disk = disk_->stats();
  EXPECT_EQ(memory.hits, 1u);
  EXPECT_EQ(memory.misses, 2u);
  EXPECT_EQ(memory.fills, 2u) << "the disk hit, then the compiled entry";
  EXPECT_EQ(disk.hits, 1u);
  EXPECT_EQ(disk.misses, 1u);
  EXPECT_EQ(disk.fills, 1u);
  EXPECT_EQ(disk.fill_failures, 0u);
  EXPECT_STREQ(cache::LevelName(disk_->level()), "disk");
  EXPECT_EQ(OriginOf(memory_.level()), Origin::kMemory);
}

TEST_F(TierStackTest, WhatTheDiskEvictsOrRepairsAwayIsForgottenInMemory) {
  stack_->Fill(Compiled(1), 0, 2);
  stack_->Fill(Compiled(2), 0, 2);
  ASSERT_TRUE(cache_->Evict({.keys = {KeyFor(1)}}).ok());
  EXPECT_FALSE(stack_->Lookup(KeyFor(1), 0, 2).has_value());

  cache::testing::FlipBytes(stack_->Lookup(KeyFor(2), 0, 2)->entry->blob_path, 100);
  auto report = cache_->Verify(/*repair=*/true);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->corrupt, 1u);
  EXPECT_FALSE(stack_->Lookup(KeyFor(2), 0, 2).has_value());
}

TEST_F(TierStackTest, AfterTheStackIsGoneTheDiskNoLongerCallsIt) {
  stack_->Fill(Compiled(1), 0, 2);
  stack_.reset();
  EXPECT_TRUE(cache_->Evict({.keys = {KeyFor(1)}}).ok());  // would call a destroyed stack
}

}  // namespace
}  // namespace jitd::serving
