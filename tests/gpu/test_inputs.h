// Reproducible inputs for the GPU tests: a fixed-seed generator (the same
// numbers on every host and compiler, unlike std:: distributions), values
// spread over many binades, and the special values element-wise kernels must
// get right.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "jitd/reference.h"

namespace jitd::gpu {

// SplitMix64: tiny, fast, and fully specified, so a failing case can be
// regenerated anywhere from its seed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  std::uint64_t Below(std::uint64_t n) { return Next() % n; }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// A seed per test case, from its parameters, so cases do not share inputs.
inline std::uint64_t CaseSeed(std::initializer_list<std::int64_t> parts) {
  std::uint64_t h = 20261130;  // the project's fixed seed
  for (std::int64_t p : parts) h = (h ^ static_cast<std::uint64_t>(p)) * 0x100000001b3ULL + 0x9e37;
  return h;
}

// ±m * 2^e with m uniform in [1, 2) and e uniform in [min_exp, max_exp]:
// every binade of the range about equally often, both signs.
inline float SpreadValue(Rng& rng, int min_exp, int max_exp) {
  const double m = 1.0 + rng.Unit();
  const int e = min_exp + static_cast<int>(rng.Below(static_cast<std::uint64_t>(max_exp - min_exp + 1)));
  const double v = std::ldexp(m, e);
  return static_cast<float>((rng.Next() & 1) != 0 ? -v : v);
}

// The values of T that element-wise kernels get wrong first: signed zeros,
// subnormals (smallest, largest, in between), the smallest normal, ±1 (which
// makes modulate's 1 + scale exactly 0), and large values whose products
// overflow to infinity. No infinities or NaNs as inputs: the kernels'
// formulas never make a NaN from finite inputs, so outputs stay comparable
// with PyTorch's bit for bit (its NaN is not the GPU's canonical one).
template <typename T>
std::vector<T> SpecialValues();

template <>
inline std::vector<reference::Bf16> SpecialValues<reference::Bf16>() {
  std::vector<reference::Bf16> v;
  for (std::uint16_t bits : {0x0000, 0x0001, 0x0040, 0x007f, 0x0080, 0x3f80, 0x7f7f, 0x7e00, 0x7a00}) {
    v.push_back({bits});
    v.push_back({static_cast<std::uint16_t>(bits | 0x8000)});
  }
  return v;
}

template <>
inline std::vector<reference::Fp16> SpecialValues<reference::Fp16>() {
  std::vector<reference::Fp16> v;
  for (std::uint16_t bits : {0x0000, 0x0001, 0x0200, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7800, 0x7000}) {
    v.push_back({bits});
    v.push_back({static_cast<std::uint16_t>(bits | 0x8000)});
  }
  return v;
}

template <>
inline std::vector<float> SpecialValues<float>() {
  std::vector<float> v;
  for (std::uint32_t bits : {0x00000000u, 0x00000001u, 0x00400000u, 0x007fffffu, 0x00800000u, 0x3f800000u, 0x7f7fffffu,
                             0x7e800000u, 0x70000000u}) {
    v.push_back(std::bit_cast<float>(bits));
    v.push_back(std::bit_cast<float>(bits | 0x80000000u));
  }
  return v;
}

// How an input array is filled.
struct ValueMix {
  int min_exp = -4;  // SpreadValue's binades
  int max_exp = 3;
  // One element in `special_every` (on average) is a SpecialValues<T>()
  // entry; 0 = none.
  int special_every = 64;
};

// n values of T: SpreadValue rounded to T (R), with special values mixed in.
template <typename T>
std::vector<T> RandomArray(std::size_t n, Rng& rng, ValueMix mix = {}) {
  const std::vector<T> special = SpecialValues<T>();
  std::vector<T> out(n);
  for (T& x : out) {
    if (mix.special_every > 0 && rng.Below(static_cast<std::uint64_t>(mix.special_every)) == 0) {
      x = special[rng.Below(special.size())];
    } else {
      x = reference::round_to<T>(SpreadValue(rng, mix.min_exp, mix.max_exp));
    }
  }
  return out;
}

// `count` distinct values from [0, n), in random order (count <= n).
inline std::vector<std::int32_t> DistinctBelow(std::int32_t n, std::int32_t count, Rng& rng) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  for (std::int32_t i = 0; i < count; ++i) {  // partial Fisher-Yates
    const auto j = static_cast<std::size_t>(i) + rng.Below(static_cast<std::uint64_t>(n - i));
    std::swap(all[static_cast<std::size_t>(i)], all[j]);
  }
  all.resize(static_cast<std::size_t>(count));
  return all;
}

}  // namespace jitd::gpu
