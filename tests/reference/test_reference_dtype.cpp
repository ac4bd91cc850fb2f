// The host bf16/fp16 conversions every bit-exact comparison stands on.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "jitd/reference.h"

namespace jitd::reference {
namespace {

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

std::uint16_t bf16(float v) { return bf16_from_float(v).bits; }
std::uint16_t fp16(float v) { return fp16_from_float(v).bits; }

TEST(ReferenceBf16, ExactValuesConvertUnchanged) {
  EXPECT_EQ(bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16(0.0f), 0x0000);
  EXPECT_EQ(bf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

TEST(ReferenceBf16, TiesRoundToEven) {
  EXPECT_EQ(bf16(from_bits(0x3f808000)), 0x3f80);  // 1 + 2^-8: tie, 0x3f80 even
  EXPECT_EQ(bf16(from_bits(0x3f818000)), 0x3f82);  // tie between 0x3f81 and 0x3f82
  EXPECT_EQ(bf16(from_bits(0x3f808001)), 0x3f81);  // just above the tie
  EXPECT_EQ(bf16(from_bits(0x3f807fff)), 0x3f80);  // just below it
  EXPECT_EQ(bf16(from_bits(0xbf818000)), 0xbf82);  // negative ties too
}

TEST(ReferenceBf16, OverflowRoundsToInfinity) {
  EXPECT_EQ(bf16(from_bits(0x7f7f7fff)), 0x7f7f);  // below the tie: largest finite
  EXPECT_EQ(bf16(from_bits(0x7f7f8000)), 0x7f80);  // tie, 0x7f7f odd: up to inf
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16(-std::numeric_limits<float>::max()), 0xff80);
}

TEST(ReferenceBf16, SubnormalsAreRoundedNotFlushed) {
  EXPECT_EQ(bf16(from_bits(0x00010000)), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(bf16(from_bits(0x00008000)), 0x0000);  // half of it: tie to even 0
  EXPECT_EQ(bf16(from_bits(0x00008001)), 0x0001);
  EXPECT_EQ(bf16(from_bits(0x00018000)), 0x0002);  // 1.5 units: tie to even 2
  EXPECT_EQ(bf16(from_bits(0x007fffff)), 0x0080);  // carries into the smallest normal
  EXPECT_EQ(to_float(Bf16{0x0001}), std::ldexp(1.0f, -133));
}

TEST(ReferenceBf16, EveryNanBecomesTheCanonicalNan) {
  EXPECT_EQ(bf16(std::numeric_limits<float>::quiet_NaN()), kCanonicalNanBits);
  EXPECT_EQ(bf16(from_bits(0xffc00001)), kCanonicalNanBits);  // negative, payload
  // A signalling NaN whose payload is all in the dropped half: naive rounding
  // by carry would turn it into inf.
  EXPECT_EQ(bf16(from_bits(0x7f800001)), kCanonicalNanBits);
  EXPECT_TRUE(std::isnan(to_float(Bf16{kCanonicalNanBits})));
}

TEST(ReferenceFp16, ExactValuesConvertUnchanged) {
  EXPECT_EQ(fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp16(std::numeric_limits<float>::infinity()), 0x7c00);
}

TEST(ReferenceFp16, TiesRoundToEven) {
  EXPECT_EQ(fp16(from_bits(0x3f801000)), 0x3c00);  // 1 + 2^-11: tie to 0x3c00
  EXPECT_EQ(fp16(from_bits(0x3f803000)), 0x3c02);  // 1 + 3 * 2^-11: tie to 0x3c02
  EXPECT_EQ(fp16(from_bits(0x3f801001)), 0x3c01);
  EXPECT_EQ(fp16(1.5f + 1.5f * std::ldexp(1.0f, -10)), 0x3e02);
}

TEST(ReferenceFp16, OverflowRoundsToInfinityFrom65520) {
  EXPECT_EQ(fp16(65519.996f), 0x7bff);
  EXPECT_EQ(fp16(65520.0f), 0x7c00);  // the tie above 65504 (odd) goes up to inf
  EXPECT_EQ(fp16(-65520.0f), 0xfc00);
  EXPECT_EQ(fp16(1.0e6f), 0x7c00);
}

TEST(ReferenceFp16, SubnormalsAreRoundedNotFlushed) {
  const float unit = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  EXPECT_EQ(fp16(unit), 0x0001);
  EXPECT_EQ(fp16(0.5f * unit), 0x0000);            // tie to even 0
  EXPECT_EQ(fp16(from_bits(0x33000001)), 0x0001);  // just above half a unit
  EXPECT_EQ(fp16(-0.5f * unit), 0x8000);           // keeps the sign
  EXPECT_EQ(fp16(1.5f * unit), 0x0002);            // tie to even 2
  EXPECT_EQ(fp16(2.5f * unit), 0x0002);            // tie to even 2
  EXPECT_EQ(fp16(1023.0f * unit), 0x03ff);         // largest subnormal
  EXPECT_EQ(fp16(1023.5f * unit), 0x0400);         // tie, 1023 odd: smallest normal
  EXPECT_EQ(fp16(1.0e-10f), 0x0000);
  EXPECT_EQ(to_float(Fp16{0x0001}), unit);
  EXPECT_EQ(to_float(Fp16{0x83ff}), -1023.0f * unit);
}

TEST(ReferenceFp16, EveryNanBecomesTheCanonicalNan) {
  EXPECT_EQ(fp16(std::numeric_limits<float>::quiet_NaN()), kCanonicalNanBits);
  EXPECT_EQ(fp16(from_bits(0xffc00001)), kCanonicalNanBits);
  EXPECT_EQ(fp16(from_bits(0x7f800001)), kCanonicalNanBits);
  EXPECT_TRUE(std::isnan(to_float(Fp16{0x7e00})));
  EXPECT_TRUE(std::isinf(to_float(Fp16{0xfc00})));
}

// Exhaustive over all 65536 patterns: widening is exact (round trip), and
// between two neighbours the exact midpoint (representable in fp32) rounds to
// the even one while the fp32 values just beside it round to the near side.
template <typename T>
void expect_round_trip_and_midpoints(std::uint16_t exponent_mask) {
  int checked = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const T v{static_cast<std::uint16_t>(bits)};
    const bool nan = (bits & exponent_mask) == exponent_mask && (bits & (0x7fffu ^ exponent_mask)) != 0;
    if (nan) continue;
    ASSERT_EQ(round_to<T>(to_float(v)).bits, v.bits) << std::hex << bits;
    const std::uint16_t magnitude = v.bits & 0x7fff;
    if (magnitude >= exponent_mask - 1) continue;          // next is inf or past it
    const T next{static_cast<std::uint16_t>(v.bits + 1)};  // one step away from 0
    // The midpoint is exact in fp64 and again in fp32 (fp32 has 13+ more bits).
    const auto mid = static_cast<float>((static_cast<double>(to_float(v)) + to_float(next)) / 2);
    const T even = (v.bits & 1) == 0 ? v : next;
    ASSERT_EQ(round_to<T>(mid).bits, even.bits) << std::hex << bits;
    ASSERT_EQ(round_to<T>(std::nextafter(mid, 0.0f)).bits, v.bits) << std::hex << bits;
    ASSERT_EQ(round_to<T>(std::nextafter(mid, to_float(next) * 2)).bits, next.bits) << std::hex << bits;
    ++checked;
  }
  EXPECT_GT(checked, 60000);
}

TEST(ReferenceBf16, AllPatternsRoundTripAndAllMidpointsTieToEven) { expect_round_trip_and_midpoints<Bf16>(0x7f80); }

TEST(ReferenceFp16, AllPatternsRoundTripAndAllMidpointsTieToEven) { expect_round_trip_and_midpoints<Fp16>(0x7c00); }

TEST(ReferenceUlp, DistanceCountsRepresentableSteps) {
  EXPECT_EQ(ulp_distance(Bf16{0x3f80}, Bf16{0x3f81}), 1u);
  EXPECT_EQ(ulp_distance(Bf16{0x0000}, Bf16{0x8000}), 0u);  // +0, -0
  EXPECT_EQ(ulp_distance(Fp16{0x0001}, Fp16{0x8001}), 2u);  // across zero
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1u);
  EXPECT_EQ(ulp_distance(Fp16{0x7e00}, Fp16{0x3c00}), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(ulp_distance(Fp16{0x7e00}, Fp16{0x7fff}), 0u);  // both NaN
}

TEST(ReferenceUlp, DistanceToFp64IsInUnitsOfTheTypesSpacing) {
  EXPECT_DOUBLE_EQ(ulp_distance(Bf16{0x3f80}, 1.0 + 2.0 / 128), 2.0);       // bf16 spacing 2^-7
  EXPECT_DOUBLE_EQ(ulp_distance(Fp16{0x3c00}, 1.0 + 0.5 / 1024), 0.5);      // fp16 spacing 2^-10
  EXPECT_DOUBLE_EQ(ulp_distance(1.0f, 1.0 + std::ldexp(3.0, -23)), 3.0);    // fp32 spacing 2^-23
  EXPECT_DOUBLE_EQ(ulp_distance(Fp16{0x0000}, std::ldexp(1.0, -24)), 1.0);  // subnormal spacing
  EXPECT_TRUE(std::isinf(ulp_distance(Fp16{0x7e00}, 1.0)));
}

}  // namespace
}  // namespace jitd::reference
