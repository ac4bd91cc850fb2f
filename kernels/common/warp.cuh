// Warp-level helpers for the MoE alignment kernels.
#pragma once

#include "common/types.cuh"

namespace sglang {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) % kWarpSize; }

__device__ __forceinline__ int warp_id() { return static_cast<int>(threadIdx.x) / kWarpSize; }

// Bit l set for every lane l below the calling lane.
__device__ __forceinline__ unsigned lanes_below_mask() { return (1u << lane_id()) - 1u; }

// Inclusive prefix sum across the full warp (every lane must call it).
__device__ __forceinline__ int32_t warp_inclusive_sum(int32_t v) {
#pragma unroll
  for (int offset = 1; offset < kWarpSize; offset *= 2) {
    const int32_t other = __shfl_up_sync(kFullWarpMask, v, offset);
    if (lane_id() >= offset) v += other;
  }
  return v;
}

}  // namespace sglang
