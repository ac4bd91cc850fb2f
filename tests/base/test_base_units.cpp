// ParseByteSize and ParseDuration: what users may type, and what is refused.
#include <gtest/gtest.h>

#include "jitd/base/units.h"

namespace jitd {
namespace {

TEST(ParseByteSize, AcceptsPlainBytesAndBinarySuffixes) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  for (const Case& c :
       {Case{"0", 0}, Case{"1048576", 1048576}, Case{"512K", 512ull << 10}, Case{"512M", 512ull << 20},
        Case{"10G", 10ull << 30}, Case{"1T", 1ull << 40}, Case{"10g", 10ull << 30}, Case{"10GB", 10ull << 30},
        Case{"10GiB", 10ull << 30}, Case{"1.5G", 3ull << 29}, Case{" 7B ", 7}, Case{"2 M", 2ull << 20}}) {
    absl::StatusOr<uint64_t> parsed = ParseByteSize(c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(*parsed, c.bytes) << c.text;
  }
}

TEST(ParseByteSize, RejectsGarbageUnknownUnitsAndOverflow) {
  for (const char* text :
       {"", "G", "ten", "10X", "10GG", "-5", "1.2.3", ".", "10Gi B", "18446744073709551616", "20000000000G", "16E"}) {
    EXPECT_EQ(ParseByteSize(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ParseByteSize, TheLargestValueFits) {
  EXPECT_EQ(*ParseByteSize("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(*ParseByteSize("16383P"), 16383ull << 50);
}

TEST(ParseDuration, AcceptsSecondsMinutesHoursDays) {
  struct Case {
    const char* text;
    int64_t seconds;
  };
  for (const Case& c : {Case{"90", 90}, Case{"30s", 30}, Case{"15m", 900}, Case{"2h", 7200}, Case{"7d", 604800},
                        Case{"0s", 0}, Case{"2H", 7200}}) {
    absl::StatusOr<std::chrono::seconds> parsed = ParseDuration(c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(parsed->count(), c.seconds) << c.text;
  }
}

TEST(ParseDuration, RejectsFractionsUnknownUnitsAndOverflow) {
  for (const char* text : {"", "s", "1.5h", "3w", "10ms", "-1s", "forever", "999999999999999999d"}) {
    EXPECT_EQ(ParseDuration(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

}  // namespace
}  // namespace jitd
