// moe.topk_sum: reduce the top-k expert outputs of each token.
//
//   out[m,d] = R( in[m,0,d] + in[m,1,d] + ... + in[m,topk-1,d] )
//
// Export: topk_sum(out, in); in: [rows, topk, dim], out: [rows, dim]; bf16,
// fp16 or fp32. The sum is fp32, left to right in ascending j, starting from
// in[m,0,d] itself (so a lone -0.0 stays -0.0); topk = 0 gives +0.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <limits>

#include "common/dtype.cuh"
#include "common/launch.cuh"
#include "common/tensor.cuh"
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
    for (int64_t e = grid_thread_index(); e < rows * dim; e += grid_thread_count()) out[e] = round_to<T>(0.0f);
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

template <typename T>
void topk_sum(tvm::ffi::TensorView out, tvm::ffi::TensorView in) {
  constexpr const char* kOp = "topk_sum";
  check_tensor<T>(kOp, "out", out, 2);
  check_tensor<T>(kOp, "in", in, 3);
  check_same_device(kOp, "in", in, "out", out);
  const int64_t rows = in.size(0), topk = in.size(1), dim = in.size(2);
  // The kernel counts experts in int32: the routing never comes near it, but
  // a wrong tensor passed as `in` might.
  if (topk > std::numeric_limits<int32_t>::max()) {
    TVM_FFI_THROW(ValueError) << kOp << ": `in`'s topk dimension " << topk << " does not fit int32";
  }
  check_shape(kOp, "out", out, {rows, dim});
  if (rows * dim == 0) return;
  launch(kOp, topk_sum_kernel<T>, dim3(elementwise_blocks(rows * dim)), dim3(kElementwiseThreads), out.device(),
         data_of<T>(out), data_of<const T>(in), rows, static_cast<int32_t>(topk), dim);
}

}  // namespace sglang::moe
