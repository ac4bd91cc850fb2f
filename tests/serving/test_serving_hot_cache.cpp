// The hot cache: byte-bounded, least recently used out first.
#include <gtest/gtest.h>

#include "serving/hot_cache.h"

namespace jitd::serving {
namespace {

std::shared_ptr<const cache::Entry> EntryOf(size_t bytes) {
  auto e = std::make_shared<cache::Entry>();
  e->cubin.assign(bytes, 'x');
  return e;
}

TEST(HotCache, EvictsLeastRecentlyUsedToStayWithinBytes) {
  HotCache hot(3 * (1000 + 256));
  hot.Put("a", EntryOf(1000));
  hot.Put("b", EntryOf(1000));
  hot.Put("c", EntryOf(1000));
  ASSERT_NE(hot.Get("a"), nullptr);  // a is now the most recent
  hot.Put("d", EntryOf(1000));       // b goes
  EXPECT_EQ(hot.Get("b"), nullptr);
  EXPECT_NE(hot.Get("a"), nullptr);
  EXPECT_NE(hot.Get("c"), nullptr);
  EXPECT_NE(hot.Get("d"), nullptr);
  auto s = hot.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_LE(s.bytes, s.max_bytes);
  EXPECT_EQ(s.evictions, 1u);
}

TEST(HotCache, AnEntryLargerThanTheBudgetIsNotKept) {
  HotCache hot(1000);
  hot.Put("big", EntryOf(5000));
  EXPECT_EQ(hot.Get("big"), nullptr);
  EXPECT_EQ(hot.stats().bytes, 0u);
}

TEST(HotCache, ReplacingAKeyAccountsItsBytesOnce) {
  HotCache hot(10000);
  hot.Put("a", EntryOf(1000));
  hot.Put("a", EntryOf(2000));
  EXPECT_EQ(hot.stats().entries, 1u);
  EXPECT_EQ(hot.stats().bytes, 2000u + 256u);
  hot.Erase("a");
  EXPECT_EQ(hot.stats().bytes, 0u);
}

}  // namespace
}  // namespace jitd::serving
