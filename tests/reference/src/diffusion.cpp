// References for diffusion.modulate_scale_shift and diffusion.residual_gate_add.
#include <cstdint>
#include <span>
#include <vector>

#include "check.h"
#include "jitd/reference.h"

namespace jitd::reference {

template <typename T>
std::vector<T> modulate_scale_shift(std::span<const T> x, std::span<const T> scale, std::span<const T> shift,
                                    std::int64_t batch, std::int64_t seq, std::int64_t dim) {
  detail::require(batch >= 0 && seq >= 0 && dim >= 0, "modulate_scale_shift: negative shape");
  detail::require_size(x.size(), batch * seq * dim, "modulate_scale_shift: x is not [batch, seq, dim]");
  detail::require_size(scale.size(), batch * dim, "modulate_scale_shift: scale is not [batch, dim]");
  detail::require_size(shift.size(), batch * dim, "modulate_scale_shift: shift is not [batch, dim]");
  std::vector<T> out(x.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t l = 0; l < seq; ++l) {
      for (std::int64_t d = 0; d < dim; ++d) {
        const std::size_t i = static_cast<std::size_t>((b * seq + l) * dim + d);
        const std::size_t p = static_cast<std::size_t>(b * dim + d);
        const float one_plus_scale = to_float(round_to<T>(1.0f + to_float(scale[p])));
        const float scaled = to_float(round_to<T>(to_float(x[i]) * one_plus_scale));
        out[i] = round_to<T>(scaled + to_float(shift[p]));
      }
    }
  }
  return out;
}

template <typename T>
std::vector<T> residual_gate_add(std::span<const T> residual, std::span<const T> update, std::span<const T> gate,
                                 std::int64_t rows, std::int64_t dim, bool broadcast) {
  detail::require(rows >= 0 && dim >= 0, "residual_gate_add: negative shape");
  detail::require_size(residual.size(), rows * dim, "residual_gate_add: residual is not [rows, dim]");
  detail::require_size(update.size(), rows * dim, "residual_gate_add: update is not [rows, dim]");
  detail::require_size(gate.size(), broadcast ? dim : rows * dim,
                       "residual_gate_add: gate is not [rows, dim] (full) or [dim] (broadcast)");
  std::vector<T> out(residual.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t d = 0; d < dim; ++d) {
      const std::size_t i = static_cast<std::size_t>(r * dim + d);
      const T g = gate[broadcast ? static_cast<std::size_t>(d) : i];
      const float gated = to_float(round_to<T>(to_float(update[i]) * to_float(g)));
      out[i] = round_to<T>(to_float(residual[i]) + gated);
    }
  }
  return out;
}

#define JITD_REFERENCE_DIFFUSION(T)                                                                           \
  template std::vector<T> modulate_scale_shift<T>(std::span<const T>, std::span<const T>, std::span<const T>, \
                                                  std::int64_t, std::int64_t, std::int64_t);                  \
  template std::vector<T> residual_gate_add<T>(std::span<const T>, std::span<const T>, std::span<const T>,    \
                                               std::int64_t, std::int64_t, bool);
JITD_REFERENCE_DIFFUSION(Bf16)
JITD_REFERENCE_DIFFUSION(Fp16)
JITD_REFERENCE_DIFFUSION(float)
#undef JITD_REFERENCE_DIFFUSION

}  // namespace jitd::reference
