// 16-byte vector access: the fast path of the element-wise kernels.
//
// A Pack<T> is 16 bytes of T (8 bf16/fp16 or 4 fp32) and is loaded or stored
// with one 128-bit instruction. The fast path is taken only when every pointer
// the kernel touches is 16-byte aligned and the row length is a multiple of
// Pack<T>::kSize, so that every pack a thread touches starts at an aligned
// address inside one row. Otherwise a kernel runs its scalar loop, which is
// the reference semantics: both paths compute element for element the same
// formula, and the scalar one is correct for any pointers and sizes.
#pragma once

#include "common/types.cuh"

namespace sglang {

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

// True when all pointers are 16-byte aligned.
template <typename... Ptrs>
__device__ __forceinline__ bool all_pack_aligned(const Ptrs*... ptrs) {
  return (is_pack_aligned(ptrs) && ...);
}

// True when rows of `row_len` T's can be walked pack by pack: each row's start
// stays 16-byte aligned and no pack straddles two rows.
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
