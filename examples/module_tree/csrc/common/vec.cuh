// Device-side indexing and 16-byte vector access for the element-wise kernels.
//
// Grid-stride loops make any gridDim.x >= 1 and any blockDim.x give the same
// result, so the launchers are free to size the grid for speed alone. Indices
// are 64-bit: a [2, 4608, 3072] tensor is 2^24.7 elements and a [rows, 2*dim]
// input passes 2^31 well before memory runs out.
//
// A Pack<T> is 16 bytes of T (8 bf16/fp16 or 4 fp32), moved with one 128-bit
// instruction. Kernels take the pack path only when every pointer is 16-byte
// aligned and the row length is a multiple of Pack<T>::kSize (so no pack
// straddles two rows); otherwise they run the scalar loop, which computes the
// same formula element for element and is right for any pointer and size.
#pragma once

#include <cstdint>

namespace sglang {

__device__ __forceinline__ int64_t grid_thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t grid_thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Kernels that split a flat index into (row, column) run their loop body with
// Index = uint32_t when the whole index space fits: 32-bit division is a few
// instructions, 64-bit division a subroutine that costs more than the memory
// traffic of the packs it indexes.
inline constexpr int64_t kMaxIndex32 = 0xffffffffLL;

inline constexpr int kPackBytes = 16;

template <typename T>
struct alignas(kPackBytes) Pack {
  static constexpr int kSize = kPackBytes / static_cast<int>(sizeof(T));
  static_assert(kSize * sizeof(T) == kPackBytes, "T must divide 16 bytes");
  T elem[kSize];
};

__device__ __forceinline__ bool is_pack_aligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) % kPackBytes) == 0;
}

template <typename... Ptrs>
__device__ __forceinline__ bool all_pack_aligned(const Ptrs*... ptrs) {
  return (is_pack_aligned(ptrs) && ...);
}

template <typename T>
__device__ __forceinline__ bool row_fits_packs(int64_t row_len) {
  return row_len % Pack<T>::kSize == 0;
}

// `p` must be 16-byte aligned.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}

// `p` must be 16-byte aligned.
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<Pack<T>*>(p) = v;
}

}  // namespace sglang
