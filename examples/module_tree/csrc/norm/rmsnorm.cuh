// norm.rmsnorm: root-mean-square layer norm, on CUB's BlockReduce.
//
//   out[r,d] = R( x[r,d] * rsqrt( mean_d(x[r,:]^2) + eps ) * weight[d] )
//
// Export: rmsnorm(out, x, weight, eps); x, out: [rows, dim]; weight: [dim];
// bf16, fp16 or fp32; eps a Python float (rounded to fp32, as the formula's
// arithmetic is fp32). One block per row, grid-stride over rows. The sum of
// squares accumulates in fp32 (each thread's strided share, then
// BlockReduce's fixed tree, so the result does not depend on timing); rsqrt
// is the correctly rounded __frsqrt_rn and the two products are IEEE fp32 in
// the formula's order, (x * rsqrt) * weight, rounded once.
//
// The block size is a template argument of the kernel (BlockReduce is sized
// for it). The NVRTC tree makes it a request param; a module compiles the four
// sizes and picks one per call from dim, by the same rule as
// jitd.rmsnorm_threads: about four 16-byte packs per thread, 128 to 1024.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "common/dtype.cuh"
#include "common/launch.cuh"
#include "common/tensor.cuh"
#include "common/vec.cuh"

namespace sglang::norm {

template <typename T, int kThreads>
__device__ float sum_of_squares(const T* __restrict__ x, int64_t dim, bool packed) {
  float sum = 0.0f;
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    for (int64_t p = threadIdx.x; p < dim / kSize; p += kThreads) {
      const Pack<T> v = load_pack(x + p * kSize);
#pragma unroll
      for (int k = 0; k < kSize; ++k) {
        const float f = to_float(v.elem[k]);
        sum = __fmaf_rn(f, f, sum);
      }
    }
  } else {
    for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
      const float f = to_float(x[d]);
      sum = __fmaf_rn(f, f, sum);
    }
  }
  return sum;
}

template <typename T>
__device__ __forceinline__ T normalize(T x, float inv_rms, T weight) {
  return round_to<T>(__fmul_rn(__fmul_rn(to_float(x), inv_rms), to_float(weight)));
}

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_kernel(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ weight, int64_t rows,
                   int64_t dim, float eps) {
  static_assert(kThreads % 32 == 0 && kThreads >= 32 && kThreads <= 1024,
                "kThreads must be a multiple of 32 up to 1024");
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ float inv_rms_shared;

  // BlockReduce is specialised for exactly kThreads threads; any other block
  // shape would read uninitialised partial sums. The launcher below always
  // matches, so this only guards against a future caller that does not.
  if (blockDim.x != kThreads || blockDim.y != 1 || blockDim.z != 1) __trap();
  if (dim <= 0) return;

  constexpr int kSize = Pack<T>::kSize;
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, x, weight);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x_row = x + r * dim;
    T* out_row = out + r * dim;

    const float total = BlockReduce(reduce_storage).Sum(sum_of_squares<T, kThreads>(x_row, dim, packed));
    if (threadIdx.x == 0) {
      const float mean = __fdiv_rn(total, static_cast<float>(dim));
      inv_rms_shared = __frsqrt_rn(__fadd_rn(mean, eps));
    }
    __syncthreads();
    const float inv_rms = inv_rms_shared;

    if (packed) {
      for (int64_t p = threadIdx.x; p < dim / kSize; p += kThreads) {
        const Pack<T> xv = load_pack(x_row + p * kSize);
        const Pack<T> wv = load_pack(weight + p * kSize);
        Pack<T> ov;
#pragma unroll
        for (int k = 0; k < kSize; ++k) ov.elem[k] = normalize(xv.elem[k], inv_rms, wv.elem[k]);
        store_pack(out_row + p * kSize, ov);
      }
    } else {
      for (int64_t d = threadIdx.x; d < dim; d += kThreads) out_row[d] = normalize(x_row[d], inv_rms, weight[d]);
    }
    // The next row reuses reduce_storage and inv_rms_shared.
    __syncthreads();
  }
}

// 128 threads up to dim 4096, 256 up to 8192, 512 up to 16384, then 1024.
inline int rmsnorm_threads(int64_t dim) {
  int threads = 128;
  while (threads < 1024 && int64_t{threads} * 32 < dim) threads *= 2;
  return threads;
}

// Rows beyond this many blocks are walked by the kernel's grid-stride loop.
inline constexpr int64_t kRmsnormMaxBlocks = 65535;

template <typename T, int kThreads>
void launch_rmsnorm(dim3 grid, DLDevice device, T* out, const T* x, const T* weight, int64_t rows, int64_t dim,
                    float eps) {
  launch("rmsnorm", rmsnorm_kernel<T, kThreads>, grid, dim3(kThreads), device, out, x, weight, rows, dim, eps);
}

template <typename T>
void rmsnorm(tvm::ffi::TensorView out, tvm::ffi::TensorView x, tvm::ffi::TensorView weight, double eps) {
  constexpr const char* kOp = "rmsnorm";
  check_tensor<T>(kOp, "out", out, 2);
  check_tensor<T>(kOp, "x", x, 2);
  check_tensor<T>(kOp, "weight", weight, 1);
  check_same_device(kOp, "x", x, "out", out);
  check_same_device(kOp, "weight", weight, "out", out);
  const int64_t rows = x.size(0), dim = x.size(1);
  check_shape(kOp, "out", out, {rows, dim});
  check_shape(kOp, "weight", weight, {dim});
  if (rows * dim == 0) return;
  const dim3 grid(static_cast<unsigned>(std::min(rows, kRmsnormMaxBlocks)));
  const int threads = rmsnorm_threads(dim);
  const auto launch_for = threads == 128   ? launch_rmsnorm<T, 128>
                          : threads == 256 ? launch_rmsnorm<T, 256>
                          : threads == 512 ? launch_rmsnorm<T, 512>
                                           : launch_rmsnorm<T, 1024>;
  launch_for(grid, out.device(), data_of<T>(out), data_of<const T>(x), data_of<const T>(weight), rows, dim,
             static_cast<float>(eps));
}

}  // namespace sglang::norm
