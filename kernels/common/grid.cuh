// Grid-stride loop indices. Every element-wise kernel walks its index space
// with these, so any gridDim.x >= 1 and any blockDim.x gives the same result.
// Indices are 64-bit: a [2, 4608, 3072] tensor is 2^24.7 elements, and a
// flattened [rows, 2 * dim] input passes 2^31 well before memory runs out.
#pragma once

#include "common/types.cuh"

namespace sglang {

__device__ __forceinline__ int64_t grid_thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t grid_thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace sglang

namespace sglang {

// Kernels that split a flat index into (row, column) run their loop body with
// `Index` = uint32_t when the whole index space fits: 32-bit division is a few
// instructions, 64-bit division a subroutine that costs more than the memory
// traffic of the packs it indexes.
inline constexpr int64_t kMaxIndex32 = 0xffffffffLL;

}  // namespace sglang
