// diffusion.residual_gate_add: gated residual connection.
//
//   out[r,d] = R( residual[r,d] + R( update[r,d] * g ) )
//   g = gate[r,d] (full) or gate[d] (broadcast)
//
// Export: residual_gate_add(out, residual, update, gate); residual, update,
// out: [rows, dim]; gate: [rows, dim] (full) or [dim] (broadcast); bf16 or
// fp16. Bit-exact with eager `residual + update * gate`.
//
// The NVRTC tree makes full/broadcast a compile-time param; a module picks
// it from gate's ndim at call time instead, so one export serves both shapes
// (both kernel instantiations live in the module).
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdint>

#include "common/dtype.cuh"
#include "common/launch.cuh"
#include "common/tensor.cuh"
#include "common/vec.cuh"

namespace sglang::diffusion {

template <typename T>
__device__ __forceinline__ T gate_add_one(T residual, T update, T gate) {
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
      for (int k = 0; k < kSize; ++k) ov.elem[k] = gate_add_one(rv.elem[k], uv.elem[k], gv.elem[k]);
      store_pack(out + i, ov);
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index i = static_cast<Index>(e);
      const Index g = kBroadcast ? i % row : i;
      out[i] = gate_add_one(residual[i], update[i], gate[g]);
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

template <typename T>
void residual_gate_add(tvm::ffi::TensorView out, tvm::ffi::TensorView residual, tvm::ffi::TensorView update,
                       tvm::ffi::TensorView gate) {
  constexpr const char* kOp = "residual_gate_add";
  check_tensor<T>(kOp, "out", out, 2);
  check_tensor<T>(kOp, "residual", residual, 2);
  check_tensor<T>(kOp, "update", update, 2);
  const bool broadcast = gate.ndim() == 1;
  check_tensor<T>(kOp, "gate", gate, broadcast ? 1 : 2);
  check_same_device(kOp, "residual", residual, "out", out);
  check_same_device(kOp, "update", update, "out", out);
  check_same_device(kOp, "gate", gate, "out", out);
  const int64_t rows = residual.size(0), dim = residual.size(1);
  check_shape(kOp, "out", out, {rows, dim});
  check_shape(kOp, "update", update, {rows, dim});
  if (broadcast) {
    check_shape(kOp, "gate", gate, {dim});
  } else {
    check_shape(kOp, "gate", gate, {rows, dim});
  }
  if (rows * dim == 0) return;
  const dim3 grid(elementwise_blocks(rows * dim)), block(kElementwiseThreads);
  const auto kernel = broadcast ? residual_gate_add_kernel<T, true> : residual_gate_add_kernel<T, false>;
  launch(kOp, kernel, grid, block, out.device(), data_of<T>(out), data_of<const T>(residual), data_of<const T>(update),
         data_of<const T>(gate), rows, dim);
}

}  // namespace sglang::diffusion
