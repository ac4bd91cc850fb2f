// Element types, their DLPack codes, and the one rounding step of KERNELS.md,
// R(v).
//
// The manifest's dtype values name the aliases below (bf16 -> bf16_t, ...), so
// an export expression such as `activation::silu_and_mul<bf16_t>` reads the
// same whatever the CUDA spelling of the type is.
//
// Kernels load T, widen it to fp32 (exact), do their arithmetic in fp32 and
// round back to T exactly where the formula says R, round-to-nearest-even, as
// PyTorch's eager ops do. The fp32 steps between two R's use __fadd_rn /
// __fmul_rn / __fdiv_rn rather than + * /: nvcc contracts `a * b + c` into
// one FMA by default (--fmad=true), which rounds once where the formula rounds
// twice; the intrinsics are never contracted, so bit-exactness does not hang
// on a compile option.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <dlpack/dlpack.h>

#include <cstdint>

namespace sglang {

using bf16_t = __nv_bfloat16;
using fp16_t = __half;
using fp32_t = float;

// What a tensor of element type T must carry in its DLDataType; the launchers
// compare against it before they reinterpret the data pointer as T*.
template <typename T>
struct DTypeInfo;

template <>
struct DTypeInfo<bf16_t> {
  static constexpr uint8_t kCode = kDLBfloat;
  static constexpr uint8_t kBits = 16;
  static constexpr const char* kName = "bfloat16";
};

template <>
struct DTypeInfo<fp16_t> {
  static constexpr uint8_t kCode = kDLFloat;
  static constexpr uint8_t kBits = 16;
  static constexpr const char* kName = "float16";
};

template <>
struct DTypeInfo<fp32_t> {
  static constexpr uint8_t kCode = kDLFloat;
  static constexpr uint8_t kBits = 32;
  static constexpr const char* kName = "float32";
};

// Widening to fp32 is exact for all three types.
__device__ __forceinline__ float to_float(fp32_t v) { return v; }
__device__ __forceinline__ float to_float(bf16_t v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(fp16_t v) { return __half2float(v); }

// R(v): fp32 -> T, round-to-nearest-even, keeping subnormals, overflowing to
// +-inf. Identity for T = float.
template <typename T>
__device__ __forceinline__ T round_to(float v);

template <>
__device__ __forceinline__ fp32_t round_to<fp32_t>(float v) {
  return v;
}

template <>
__device__ __forceinline__ bf16_t round_to<bf16_t>(float v) {
  return __float2bfloat16_rn(v);
}

template <>
__device__ __forceinline__ fp16_t round_to<fp16_t>(float v) {
  return __float2half_rn(v);
}

// R(v) widened back to fp32: the value the next fp32 step of a formula sees.
template <typename T>
__device__ __forceinline__ float round_via(float v) {
  return to_float(round_to<T>(v));
}

}  // namespace sglang
