// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed in fp32
// and rounded to T once.
#include <cuda/std/cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace example::act {

using int64_t = ::cuda::std::int64_t;

__device__ __forceinline__ float load(float v) { return v; }
__device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float load(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T store(float v);
template <>
__device__ __forceinline__ float store<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half store<__half>(float v) { return __float2half_rn(v); }

template <typename T>
__global__ void gelu_tanh_kernel(T* out, const T* x, int64_t n) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = load(x[i]);
    out[i] = store<T>(0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v))));
  }
}

}  // namespace example::act
