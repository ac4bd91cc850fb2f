// activation.silu_and_mul: the gated activation of SwiGLU MLPs.
//
//   a = in[r,d], b = in[r,dim+d]
//   out[r,d] = R( R( a / (1 + exp(-a)) ) * b )
//
// Export: silu_and_mul(out, in), in: [rows, 2*dim], out: [rows, dim], both
// bf16, fp16 or fp32 (the export's dtype), contiguous, on one CUDA device.
//
// KERNELS.md asks for 1 ulp of T everywhere and equality with the formula on
// >= 99.9% of elements. Both are met by making the fp32 value of silu(a) the
// correctly rounded one: a plain fp32 a / (1 + expf(-a)) is up to 3 fp32 ulps
// off and underflows to -0 below a = -88.7, and such an error flips the inner
// R now and then. So silu is evaluated in fp64 wherever that could matter:
// always for fp32 output, and for bf16/fp16 only when the fast fp32 value is
// zero, subnormal or non-finite, or lies within kGuardUlps fp32 ulps of a
// rounding boundary of T. Everywhere else the fast value rounds to the same T
// as the exact one. This is the same evaluation as kernels/activation/ of the
// NVRTC tree, so both trees produce the same bits.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <cstdint>

#include "common/dtype.cuh"
#include "common/launch.cuh"
#include "common/tensor.cuh"
#include "common/vec.cuh"

namespace sglang::activation {

// a / (1 + exp(-a)) in fp64, rounded once to fp32: fp64 exp does not overflow
// before the result is 0 in fp32.
__device__ __forceinline__ float silu_fp64(float a) {
  const double x = a;
  return __double2float_rn(__ddiv_rn(x, __dadd_rn(1.0, exp(-x))));
}

// The fast fp32 evaluation with a documented error bound: expf (at most 2
// ulps; never __expf), an IEEE add, the reciprocal rcp.approx (1 ulp) refined
// by one Newton step, an IEEE multiply. Under 8 ulps of the result's binade,
// which is what kGuardUlps covers. The reciprocal replaces the IEEE divide's
// multi-instruction sequence on the hot path.
__device__ __forceinline__ float rcp_approx(float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return r;
}

__device__ __forceinline__ float silu_fast(float a) {
  const float d = __fadd_rn(1.0f, expf(-a));
  const float r0 = rcp_approx(d);
  const float r1 = __fmaf_rn(r0, __fmaf_rn(-d, r0, 1.0f), r0);
  return __fmul_rn(a, r1);
}

// Distance, in fp32 ulps, the fast value must keep from a rounding boundary
// of T. silu's value depends on a alone and bf16/fp16 have 2^16 inputs each,
// so the bound was proven exhaustively (every finite input gives the fp64
// evaluation's output with 8; with 4, two fp16 inputs do not).
inline constexpr int kGuardUlps = 8;

// Whether R(v) to T is the same for every fp32 within kGuardUlps of v. The
// rounding boundaries of bf16 are the fp32 bit patterns whose low 16 bits are
// 0x8000; those of fp16 (normal range) the patterns whose low 13 bits are
// 0x1000. Both lie evenly in bit-pattern order, which is ulp order.
template <typename T>
__device__ __forceinline__ bool rounds_the_same_nearby(float v);

template <>
__device__ __forceinline__ bool rounds_the_same_nearby<fp32_t>(float) {
  return false;  // fp32 output keeps every bit: always take the fp64 path
}

template <>
__device__ __forceinline__ bool rounds_the_same_nearby<bf16_t>(float v) {
  const uint32_t bits = __float_as_uint(v) & 0x7fffffffu;
  if (bits < 0x00800000u) return false;   // zero or subnormal: fp32 silu may have underflowed
  if (bits >= 0x7f800000u) return false;  // inf / NaN: also where 1 + exp(-a) overflowed
  const int low = static_cast<int>(bits & 0xffffu) - 0x8000;
  return low > kGuardUlps || low < -kGuardUlps;
}

template <>
__device__ __forceinline__ bool rounds_the_same_nearby<fp16_t>(float v) {
  const uint32_t bits = __float_as_uint(v) & 0x7fffffffu;
  if (bits < 0x38800000u) return false;  // below fp16's normal range (2^-14)
  if (bits >= 0x7f800000u) return false;
  const int low = static_cast<int>(bits & 0x1fffu) - 0x1000;
  return low > kGuardUlps || low < -kGuardUlps;
}

template <typename T>
__device__ __forceinline__ float silu(float a) {
  const float fast = silu_fast(a);
  return rounds_the_same_nearby<T>(fast) ? fast : silu_fp64(a);
}

template <typename T>
__device__ __forceinline__ T silu_and_mul_one(T a, T b) {
  return round_to<T>(__fmul_rn(round_via<T>(silu<T>(to_float(a))), to_float(b)));
}

// A pack's outputs: the fast values first, then, only in a pack where one of
// them is near a rounding boundary, the fp64 values there (each fp64 fallback
// costs its whole warp, so it is taken per value, not per pack).
template <typename T>
__device__ __forceinline__ Pack<T> silu_and_mul_pack(const Pack<T>& av, const Pack<T>& bv) {
  constexpr int kSize = Pack<T>::kSize;
  Pack<T> ov;
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int k = 0; k < kSize; ++k) ov.elem[k] = silu_and_mul_one(av.elem[k], bv.elem[k]);
  } else {
    float s[kSize];
    bool all_fast = true;
#pragma unroll
    for (int k = 0; k < kSize; ++k) {
      s[k] = silu_fast(to_float(av.elem[k]));
      all_fast &= rounds_the_same_nearby<T>(s[k]);
    }
    if (!all_fast) {
#pragma unroll
      for (int k = 0; k < kSize; ++k) {
        if (!rounds_the_same_nearby<T>(s[k])) s[k] = silu_fp64(to_float(av.elem[k]));
      }
    }
#pragma unroll
    for (int k = 0; k < kSize; ++k) ov.elem[k] = round_to<T>(__fmul_rn(round_via<T>(s[k]), to_float(bv.elem[k])));
  }
  return ov;
}

// Output element o = (r, d) reads a at r * 2 * dim + d and b dim further.
template <typename T, typename Index>
__device__ void silu_and_mul_all(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int64_t dim,
                                 bool packed) {
  const int64_t total = rows * dim;
  const Index row = static_cast<Index>(dim);
  if (packed) {
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs = total / kSize;
    for (int64_t p = grid_thread_index(); p < packs; p += grid_thread_count()) {
      const Index o = static_cast<Index>(p * kSize);
      const Index a_at = o + o / row * row;
      store_pack(out + o, silu_and_mul_pack(load_pack(in + a_at), load_pack(in + a_at + row)));
    }
  } else {
    for (int64_t e = grid_thread_index(); e < total; e += grid_thread_count()) {
      const Index o = static_cast<Index>(e);
      const Index a_at = o + o / row * row;
      out[o] = silu_and_mul_one(in[a_at], in[a_at + row]);
    }
  }
}

template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0) return;
  const bool packed = row_fits_packs<T>(dim) && all_pack_aligned(out, in);
  // The largest index touched is in's last element, rows * 2 * dim - 1.
  if (rows * 2 * dim <= kMaxIndex32) {
    silu_and_mul_all<T, uint32_t>(out, in, rows, dim, packed);
  } else {
    silu_and_mul_all<T, uint64_t>(out, in, rows, dim, packed);
  }
}

template <typename T>
void silu_and_mul(tvm::ffi::TensorView out, tvm::ffi::TensorView in) {
  constexpr const char* kOp = "silu_and_mul";
  check_tensor<T>(kOp, "out", out, 2);
  check_tensor<T>(kOp, "in", in, 2);
  check_same_device(kOp, "in", in, "out", out);
  const int64_t rows = in.size(0);
  if (in.size(1) % 2 != 0) {
    TVM_FFI_THROW(ValueError) << kOp << ": `in`'s last dimension must be even (2 * dim), got " << in.size(1);
  }
  const int64_t dim = in.size(1) / 2;
  check_shape(kOp, "out", out, {rows, dim});
  if (rows * dim == 0) return;  // a grid of 0 blocks is a launch error, and there is nothing to do
  launch(kOp, silu_and_mul_kernel<T>, dim3(elementwise_blocks(rows * dim)), dim3(kElementwiseThreads), out.device(),
         data_of<T>(out), data_of<const T>(in), rows, dim);
}

}  // namespace sglang::activation
