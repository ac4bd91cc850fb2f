// Reference for activation.silu_and_mul.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "check.h"
#include "jitd/reference.h"

namespace jitd::reference {

float silu(float a) {
  const double x = a;
  return static_cast<float>(x / (1.0 + std::exp(-x)));
}

template <typename T>
std::vector<T> silu_and_mul(std::span<const T> in, std::int64_t rows, std::int64_t dim) {
  detail::require(rows >= 0 && dim >= 0, "silu_and_mul: negative shape");
  detail::require_size(in.size(), rows * 2 * dim, "silu_and_mul: in is not [rows, 2 * dim]");
  std::vector<T> out(static_cast<std::size_t>(rows * dim));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t d = 0; d < dim; ++d) {
      const float a = to_float(in[static_cast<std::size_t>(r * 2 * dim + d)]);
      const float b = to_float(in[static_cast<std::size_t>(r * 2 * dim + dim + d)]);
      out[static_cast<std::size_t>(r * dim + d)] = round_to<T>(to_float(round_to<T>(silu(a))) * b);
    }
  }
  return out;
}

template std::vector<Bf16> silu_and_mul<Bf16>(std::span<const Bf16>, std::int64_t, std::int64_t);
template std::vector<Fp16> silu_and_mul<Fp16>(std::span<const Fp16>, std::int64_t, std::int64_t);
template std::vector<float> silu_and_mul<float>(std::span<const float>, std::int64_t, std::int64_t);

}  // namespace jitd::reference
