// norm.rmsnorm: root-mean-square layer norm, on CUB's BlockReduce.
//
//   out[r,d] = R( x[r,d] * rsqrt( mean_d(x[r,:]^2) + eps ) * weight[d] )
//
// x, out: [rows, dim]; weight: [dim]. One block of kThreads threads per row,
// grid-stride over rows. The sum of squares accumulates in fp32 (each thread's
// strided share, then BlockReduce's fixed tree, so the result does not depend
// on timing); rsqrt is the correctly rounded __frsqrt_rn and the two products
// are IEEE fp32 in the formula's order, (x * rsqrt) * weight, rounded once.
//
// <cub/cub.cuh> does not compile under NVRTC 13 (it pulls in host-only device
// algorithms); the block-level header does, with -I<cuda>/include/cccl ahead
// of -I<cuda>/include.
#include <cub/block/block_reduce.cuh>

#include "common/dtype.cuh"
#include "common/types.cuh"
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
  // shape would read uninitialised partial sums. Fail loudly instead.
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
      for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
        out_row[d] = normalize(x_row[d], inv_rms, weight[d]);
      }
    }
    // The next row reuses reduce_storage and inv_rms_shared.
    __syncthreads();
  }
}

}  // namespace sglang::norm
