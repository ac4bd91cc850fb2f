// diffusion.residual_gate_add: gated residual connection.
//
//   out[r,d] = R( residual[r,d] + R( update[r,d] * g ) )
//   g = gate[r,d] (kBroadcast = false) or gate[d] (kBroadcast = true)
//
// residual, update, out: [rows, dim]; gate: [rows, dim] or [dim]. Bit-exact
// with eager `residual + update * gate`.
#include "common/dtype.cuh"
#include "common/grid.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"

namespace sglang::residual_gate_add {

template <typename T>
__device__ __forceinline__ T gate_add(T residual, T update, T gate) {
  const float gated = round_via<T>(__fmul_rn(to_float(update), to_float(gate)));
  return round_to<T>(__fadd_rn(to_float(residual), gated));
}

template <typename T, bool kBroadcast, typename Index>
__device__ void gate_add_all(T* __restrict__ out, const T* __restrict__ residual, const T* __restrict__ update,
                             const T* __restrict__ gate, int64_t total, int64_t dim, bool packed) {
  const Index row = static_cast<Index>(dim);
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs = total / kSize;
    for (int64_t p = grid_thread_index(); p < packs; p += grid_thread_count()) {
      const Index i = static_cast<Index>(p * kSize);
      const Index g = kBroadcast ? i % row : i;
      const Pack<T> rv = load_pack(residual + i);
      const Pack<T> uv = load_pack(update + i);
      const Pack<T> gv = load_pack(gate + g);
      Pack<T> ov;
#pragma unroll
      for (int k = 0; k < kSize; ++k) ov.elem[k] = gate_add(rv.elem[k], uv.elem[k], gv.elem[k]);
      store_pack(out + i, ov);
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index i = static_cast<Index>(e);
      const Index g = kBroadcast ? i % row : i;
      out[i] = gate_add(residual[i], update[i], gate[g]);
    }
  }
}

template <typename T, bool kBroadcast>
__global__ void residual_gate_add_kernel(T* __restrict__ out, const T* __restrict__ residual,
                                         const T* __restrict__ update, const T* __restrict__ gate, int64_t rows,
                                         int64_t dim) {
  if (rows <= 0 || dim <= 0) return;
  const int64_t total = rows * dim;
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, residual, update, gate);
  if (total <= kMaxIndex32) {
    gate_add_all<T, kBroadcast, uint32_t>(out, residual, update, gate, total, dim, packed);
  } else {
    gate_add_all<T, kBroadcast, uint64_t>(out, residual, update, gate, total, dim, packed);
  }
}

}  // namespace sglang::residual_gate_add
