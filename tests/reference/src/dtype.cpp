// Bit-level fp32 <-> bf16 / fp16 conversions and ulp distances.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "jitd/reference.h"

namespace jitd::reference {
namespace {

constexpr std::uint32_t kF32AbsMask = 0x7fffffffu;
constexpr std::uint32_t kF32Inf = 0x7f800000u;

// Round `value >> shift` to nearest, ties to even.
std::uint32_t shift_right_rne(std::uint32_t value, int shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rest = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u) != 0)) ? 1u : 0u);
}

// Position of a value on the number line, one step per representable value,
// with +0 and -0 at the same place.
std::int64_t ordinal(std::uint32_t bits, std::uint32_t sign_bit) {
  const std::int64_t magnitude = bits & (sign_bit - 1u);
  return (bits & sign_bit) != 0 ? -magnitude : magnitude;
}

std::uint64_t ordinal_distance(std::uint32_t a, std::uint32_t b, std::uint32_t sign_bit, bool a_nan, bool b_nan) {
  if (a_nan || b_nan) return a_nan && b_nan ? 0 : std::numeric_limits<std::uint64_t>::max();
  const std::int64_t d = ordinal(a, sign_bit) - ordinal(b, sign_bit);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

bool is_nan16(std::uint16_t bits, std::uint16_t exponent_mask) {
  return (bits & exponent_mask) == exponent_mask && (bits & (exponent_mask ^ 0x7fffu)) != 0;
}

// |got - want| / spacing of a type with `digits` significand bits (hidden bit
// included) and smallest normal exponent `min_exp` (value 2^min_exp).
double ulp_distance_to(double got, double want, int digits, int min_exp) {
  if (std::isnan(got) || std::isnan(want)) return std::numeric_limits<double>::infinity();
  if (std::isinf(got) || std::isinf(want)) {
    return got == want ? 0.0 : std::numeric_limits<double>::infinity();
  }
  int exp = 0;
  std::frexp(want, &exp);  // |want| in [2^(exp-1), 2^exp)
  const int binade = want == 0.0 ? min_exp : std::max(exp - 1, min_exp);
  return std::fabs(got - want) / std::ldexp(1.0, binade - (digits - 1));
}

}  // namespace

Bf16 bf16_from_float(float v) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(v);
  if ((f & kF32AbsMask) > kF32Inf) return Bf16{kCanonicalNanBits};
  // Adding 0x7fff (+1 when the kept part is odd) carries into the kept bits
  // exactly when the dropped half is above (or at, for odd) the midpoint; a
  // carry out of the largest finite value lands on inf, as RNE requires.
  const std::uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return Bf16{static_cast<std::uint16_t>((f + rounding) >> 16)};
}

Fp16 fp16_from_float(float v) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(v);
  const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  const std::uint32_t abs = f & kF32AbsMask;
  if (abs > kF32Inf) return Fp16{kCanonicalNanBits};
  // 65520 = 0x477ff000 is the midpoint between 65504 (the largest fp16) and
  // 65536; 65504's last bit is odd, so the tie rounds up, to inf.
  if (abs >= 0x477ff000u) return Fp16{static_cast<std::uint16_t>(sign | 0x7c00u)};
  if (abs >= 0x38800000u) {  // >= 2^-14: an fp16 normal (or rounds up to one)
    // Rebias the exponent (127 -> 15) and round off 13 significand bits; a
    // carry out of the significand correctly bumps the exponent.
    return Fp16{static_cast<std::uint16_t>(sign | shift_right_rne(abs - 0x38000000u, 13))};
  }
  // Below 2^-14: an fp16 subnormal, in units of 2^-24. 2^-25 (0x33000000) is
  // the midpoint between 0 and the smallest subnormal and rounds to even, 0.
  if (abs <= 0x33000000u) return Fp16{sign};
  const int exponent = static_cast<int>(abs >> 23);  // 102 .. 112
  const std::uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  // value = significand * 2^(exponent - 150) = units * 2^-24
  return Fp16{static_cast<std::uint16_t>(sign | shift_right_rne(significand, 126 - exponent))};
}

float to_float(Bf16 v) { return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16); }

float to_float(Fp16 v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (v.bits >> 10) & 0x1fu;
  const std::uint32_t significand = v.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | kF32Inf | (significand << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (significand << 13));
  }
  // Subnormal or zero: significand * 2^-24, exact in fp32.
  const float magnitude = std::ldexp(static_cast<float>(significand), -24);
  return sign != 0 ? -magnitude : magnitude;
}

bool same_bits(Bf16 a, Bf16 b) { return a.bits == b.bits; }
bool same_bits(Fp16 a, Fp16 b) { return a.bits == b.bits; }
bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

std::uint64_t ulp_distance(Bf16 a, Bf16 b) {
  return ordinal_distance(a.bits, b.bits, 0x8000u, is_nan16(a.bits, 0x7f80u), is_nan16(b.bits, 0x7f80u));
}
std::uint64_t ulp_distance(Fp16 a, Fp16 b) {
  return ordinal_distance(a.bits, b.bits, 0x8000u, is_nan16(a.bits, 0x7c00u), is_nan16(b.bits, 0x7c00u));
}
std::uint64_t ulp_distance(float a, float b) {
  return ordinal_distance(std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(b), 0x80000000u, std::isnan(a),
                          std::isnan(b));
}

double ulp_distance(Bf16 got, double want) { return ulp_distance_to(to_float(got), want, 8, -126); }
double ulp_distance(Fp16 got, double want) { return ulp_distance_to(to_float(got), want, 11, -14); }
double ulp_distance(float got, double want) { return ulp_distance_to(got, want, 24, -126); }

}  // namespace jitd::reference
