// Reference for norm.rmsnorm, in fp64.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "check.h"
#include "jitd/reference.h"

namespace jitd::reference {

template <typename T>
std::vector<double> rmsnorm(std::span<const T> x, std::span<const T> weight, std::int64_t rows, std::int64_t dim,
                            float eps) {
  detail::require(rows >= 0 && dim > 0, "rmsnorm: rows must be >= 0 and dim > 0");
  detail::require_size(x.size(), rows * dim, "rmsnorm: x is not [rows, dim]");
  detail::require_size(weight.size(), dim, "rmsnorm: weight is not [dim]");
  std::vector<double> out(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::int64_t d = 0; d < dim; ++d) {
      const double v = to_float(x[static_cast<std::size_t>(r * dim + d)]);
      sum += v * v;
    }
    const double inv_rms = 1.0 / std::sqrt(sum / static_cast<double>(dim) + static_cast<double>(eps));
    for (std::int64_t d = 0; d < dim; ++d) {
      const std::size_t i = static_cast<std::size_t>(r * dim + d);
      out[i] = static_cast<double>(to_float(x[i])) * inv_rms *
               static_cast<double>(to_float(weight[static_cast<std::size_t>(d)]));
    }
  }
  return out;
}

template std::vector<double> rmsnorm<Bf16>(std::span<const Bf16>, std::span<const Bf16>, std::int64_t, std::int64_t,
                                           float);
template std::vector<double> rmsnorm<Fp16>(std::span<const Fp16>, std::span<const Fp16>, std::int64_t, std::int64_t,
                                           float);
template std::vector<double> rmsnorm<float>(std::span<const float>, std::span<const float>, std::int64_t, std::int64_t,
                                            float);

}  // namespace jitd::reference
