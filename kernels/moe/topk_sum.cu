// moe.topk_sum: reduce the top-k expert outputs of each token.
//
//   out[m,k] = R( in[m,0,k] + in[m,1,k] + ... + in[m,topk-1,k] )
//
// in: [rows, topk, dim], out: [rows, dim]. The sum is fp32, left to right in
// ascending j, starting from in[m,0,k] itself (so a lone -0.0 stays -0.0);
// topk <= 0 gives +0.
#include "common/dtype.cuh"
#include "common/grid.cuh"
#include "common/types.cuh"
#include "common/vec.cuh"

namespace sglang::moe {

template <typename T, typename Index>
__device__ void topk_sum_all(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int32_t topk, int64_t dim,
                             bool packed) {
  const int64_t total = rows * dim;
  const Index row = static_cast<Index>(dim);
  const Index in_row = static_cast<Index>(dim * topk);
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs = total / kSize;
    for (int64_t p = grid_thread_index(); p < packs; p += grid_thread_count()) {
      const Index o = static_cast<Index>(p * kSize);
      const T* src = in + (o / row * in_row + o % row);
      float acc[kSize];
      const Pack<T> first = load_pack(src);
#pragma unroll
      for (int k = 0; k < kSize; ++k) acc[k] = to_float(first.elem[k]);
      for (int32_t j = 1; j < topk; ++j) {
        const Pack<T> next = load_pack(src + static_cast<Index>(j) * row);
#pragma unroll
        for (int k = 0; k < kSize; ++k) acc[k] = __fadd_rn(acc[k], to_float(next.elem[k]));
      }
      Pack<T> ov;
#pragma unroll
      for (int k = 0; k < kSize; ++k) ov.elem[k] = round_to<T>(acc[k]);
      store_pack(out + o, ov);
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index o = static_cast<Index>(e);
      const T* src = in + (o / row * in_row + o % row);
      float acc = to_float(src[0]);
      for (int32_t j = 1; j < topk; ++j) acc = __fadd_rn(acc, to_float(src[static_cast<Index>(j) * row]));
      out[o] = round_to<T>(acc);
    }
  }
}

template <typename T>
__global__ void topk_sum_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int32_t topk,
                                int64_t dim) {
  if (rows <= 0 || dim <= 0) return;
  if (topk <= 0) {
    for (int64_t e = grid_thread_index(); e < rows * dim; e += grid_thread_count()) {
      out[e] = round_to<T>(0.0f);
    }
    return;
  }
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, in);
  // The largest index touched is in's last element, rows * topk * dim - 1.
  if (rows * topk * dim <= kMaxIndex32) {
    topk_sum_all<T, uint32_t>(out, in, rows, topk, dim, packed);
  } else {
    topk_sum_all<T, uint64_t>(out, in, rows, topk, dim, packed);
  }
}

}  // namespace sglang::moe
