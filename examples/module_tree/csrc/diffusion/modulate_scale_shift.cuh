// diffusion.modulate_scale_shift: adaLN modulation.
//
//   out[b,l,d] = R( R( x[b,l,d] * R(1 + scale[b,d]) ) + shift[b,d] )
//
// Export: modulate_scale_shift(out, x, scale, shift); x, out: [batch, seq,
// dim]; scale, shift: [batch, dim], broadcast over seq; bf16 or fp16.
// Bit-exact with eager `x * (1 + scale[:, None]) + shift[:, None]`: each eager
// op computes in fp32 and rounds to T, which is what the three R's are.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <cstdint>

#include "common/dtype.cuh"
#include "common/launch.cuh"
#include "common/tensor.cuh"
#include "common/vec.cuh"

namespace sglang::diffusion {

template <typename T>
__device__ __forceinline__ T modulate_one(T x, T scale, T shift) {
  const float one_plus_scale = round_via<T>(__fadd_rn(1.0f, to_float(scale)));
  const float scaled = round_via<T>(__fmul_rn(to_float(x), one_plus_scale));
  return round_to<T>(__fadd_rn(scaled, to_float(shift)));
}

// Element i of x sits at (b, l, d) = (i / (seq * dim), ., i % dim); its scale
// and shift at b * dim + d.
template <typename T, typename Index>
__device__ void modulate_all(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ scale,
                             const T* __restrict__ shift, int64_t total, int64_t seq, int64_t dim, bool packed) {
  const Index batch_elems = static_cast<Index>(seq * dim);
  const Index row = static_cast<Index>(dim);
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs = total / kSize;
    for (int64_t p = grid_thread_index(); p < packs; p += grid_thread_count()) {
      const Index i = static_cast<Index>(p * kSize);
      const Index bd = i / batch_elems * row + i % row;
      const Pack<T> xv = load_pack(x + i);
      const Pack<T> sv = load_pack(scale + bd);
      const Pack<T> hv = load_pack(shift + bd);
      Pack<T> ov;
#pragma unroll
      for (int k = 0; k < kSize; ++k) ov.elem[k] = modulate_one(xv.elem[k], sv.elem[k], hv.elem[k]);
      store_pack(out + i, ov);
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index i = static_cast<Index>(e);
      const Index bd = i / batch_elems * row + i % row;
      out[i] = modulate_one(x[i], scale[bd], shift[bd]);
    }
  }
}

template <typename T>
__global__ void modulate_scale_shift_kernel(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ scale,
                                            const T* __restrict__ shift, int64_t batch, int64_t seq, int64_t dim) {
  if (batch <= 0 || seq <= 0 || dim <= 0) return;
  const int64_t total = batch * seq * dim;
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, x, scale, shift);
  if (total <= kMaxIndex32) {
    modulate_all<T, uint32_t>(out, x, scale, shift, total, seq, dim, packed);
  } else {
    modulate_all<T, uint64_t>(out, x, scale, shift, total, seq, dim, packed);
  }
}

template <typename T>
void modulate_scale_shift(tvm::ffi::TensorView out, tvm::ffi::TensorView x, tvm::ffi::TensorView scale,
                          tvm::ffi::TensorView shift) {
  constexpr const char* kOp = "modulate_scale_shift";
  check_tensor<T>(kOp, "out", out, 3);
  check_tensor<T>(kOp, "x", x, 3);
  check_tensor<T>(kOp, "scale", scale, 2);
  check_tensor<T>(kOp, "shift", shift, 2);
  check_same_device(kOp, "x", x, "out", out);
  check_same_device(kOp, "scale", scale, "out", out);
  check_same_device(kOp, "shift", shift, "out", out);
  const int64_t batch = x.size(0), seq = x.size(1), dim = x.size(2);
  check_shape(kOp, "out", out, {batch, seq, dim});
  check_shape(kOp, "scale", scale, {batch, dim});
  check_shape(kOp, "shift", shift, {batch, dim});
  const int64_t total = batch * seq * dim;
  if (total == 0) return;
  launch(kOp, modulate_scale_shift_kernel<T>, dim3(elementwise_blocks(total)), dim3(kElementwiseThreads), out.device(),
         data_of<T>(out), data_of<const T>(x), data_of<const T>(scale), data_of<const T>(shift), batch, seq, dim);
}

}  // namespace sglang::diffusion
