// Element types and the one rounding step of KERNELS.md, R(v).
//
// T is __nv_bfloat16, __half or float. Kernels load T, widen it to fp32
// (exact), do their arithmetic in fp32 and round back to T exactly where the
// formula says R, round-to-nearest-even, as PyTorch's eager ops do. The
// conversions are the explicit `_rn` intrinsics: `cvt.rn.bf16.f32` and
// `cvt.rn.f16.f32` round to nearest even, keep subnormals, overflow to +-inf
// and turn every NaN into the canonical NaN 0x7fff (the CPU references in
// tests/reference produce the same bits).
//
// The fp32 steps between two R's use `__fadd_rn` / `__fmul_rn` / `__fdiv_rn`
// rather than `+ * /`: NVRTC contracts `a * b + c` into one FMA by default
// (-fmad=true), which rounds once where the formula rounds twice. The
// intrinsics are never contracted, so bit-exactness does not hang on a
// compile option; -fmad stays at its default so that libdevice's math (expf)
// is the same code PyTorch's nvcc build runs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace sglang {

// Widening to fp32 is exact for all three types.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// R(v): fp32 -> T, round-to-nearest-even. Identity for T = float.
template <typename T>
__device__ __forceinline__ T round_to(float v);

template <>
__device__ __forceinline__ float round_to<float>(float v) {
  return v;
}

template <>
__device__ __forceinline__ __nv_bfloat16 round_to<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <>
__device__ __forceinline__ __half round_to<__half>(float v) {
  return __float2half_rn(v);
}

// R(v) widened back to fp32: the value the next fp32 step of a formula sees.
template <typename T>
__device__ __forceinline__ float round_via(float v) {
  return to_float(round_to<T>(v));
}

}  // namespace sglang
