// How jitctl shows sizes and ages to people.
#include <gtest/gtest.h>

#include "human_format.h"

namespace jitd::jitctl {
namespace {

TEST(FormatBytes, UsesBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(10ull << 30), "10.0 GiB");
  EXPECT_EQ(FormatBytes(UINT64_MAX), "16384.0 PiB");
}

TEST(FormatSeconds, PicksTheLargestWholeUnit) {
  EXPECT_EQ(FormatSeconds(42), "42s");
  EXPECT_EQ(FormatSeconds(90), "1.5m");
  EXPECT_EQ(FormatSeconds(900), "15m");
  EXPECT_EQ(FormatSeconds(7200), "2.0h");
  EXPECT_EQ(FormatSeconds(7 * 86400), "7.0d");
  EXPECT_EQ(FormatSeconds(30 * 86400), "30d");
}

TEST(FormatAge, SaysNeverJustNowOrHowLongAgo) {
  const int64_t now = 1'700'000'000'000;
  EXPECT_EQ(FormatAge(0, now), "-");
  EXPECT_EQ(FormatAge(now - 200, now), "just now");
  EXPECT_EQ(FormatAge(now - 42'000, now), "42s ago");
  EXPECT_EQ(FormatAge(now - 3 * 3'600'000, now), "3.0h ago");
}

}  // namespace
}  // namespace jitd::jitctl
