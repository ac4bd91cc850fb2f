// moe.align_block_size: group MoE routing entries by expert, each expert's
// group padded to a multiple of block_size, deterministically.
//
// For expert e in [0, num_experts): c_e entries of topk_ids equal e,
// p_e = ceil(c_e / block_size) * block_size, o_e = sum of p_e' for e' < e.
//   num_tokens_post_pad[0] = sum of p_e
//   sorted_token_ids[o_e .. o_e + c_e - 1] = the indices i with topk_ids[i] == e,
//     ascending; every other position below max_pad = numel +
//     num_experts * (block_size - 1) holds numel
//   expert_ids[j] = the expert whose padded range holds j * block_size, for
//     j < num_tokens_post_pad / block_size; -1 for the rest of the
//     ceil(max_pad / block_size) entries
// Entries outside [0, num_experts) are skipped.
//
// Launch: one block of 1024 threads, no dynamic shared memory;
// num_experts <= 1024, numel < 2^24. Other launches trap.
//
// Determinism: the order inside an expert's range is the index order, not the
// order in which atomics happen to land. The input is scattered in chunks of
// 1024 entries, one per thread, in index order; an entry's rank inside its
// expert is the expert's running cursor (entries of earlier chunks) + the
// same-expert entries of earlier warps in the chunk (per-warp counts in shared
// memory) + the same-expert lanes below it in its warp (__match_any_sync).
// Counts and cursors use atomics only as commutative sums.
#include "common/types.cuh"
#include "common/warp.cuh"

namespace sglang::moe {

inline constexpr int kAlignThreads = 1024;
inline constexpr int kAlignWarps = kAlignThreads / kWarpSize;
inline constexpr int32_t kAlignMaxExperts = 1024;
inline constexpr int64_t kAlignMaxNumel = int64_t{1} << 24;

// p_e for a count c, without forming c + block_size - 1 (which could overflow).
__device__ __forceinline__ int32_t padded_count(int32_t count, int32_t block_size) {
  return count == 0 ? 0 : ((count - 1) / block_size + 1) * block_size;
}

// The largest e with offsets[e] <= pos. For pos below the padded total this is
// the expert whose padded range holds pos: empty experts share the offset of
// the next one, so the largest such e is never empty.
__device__ __forceinline__ int32_t expert_at(const int32_t* offsets, int32_t num_experts, int64_t pos) {
  int32_t lo = 0;
  int32_t hi = num_experts - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= pos) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

__global__ void __launch_bounds__(kAlignThreads)
    align_block_size_kernel(const int32_t* __restrict__ topk_ids, int64_t numel, int32_t num_experts,
                            int32_t block_size, int32_t* __restrict__ sorted_token_ids,
                            int32_t* __restrict__ expert_ids, int32_t* __restrict__ num_tokens_post_pad) {
  if (blockDim.x != kAlignThreads || blockDim.y != 1 || blockDim.z != 1 || gridDim.x != 1 || gridDim.y != 1 ||
      gridDim.z != 1 || num_experts < 0 || num_experts > kAlignMaxExperts || block_size <= 0 || numel < 0 ||
      numel >= kAlignMaxNumel) {
    __trap();
  }
  // 40 KiB of static shared memory, under the 48 KiB a block gets without
  // opting in to more.
  __shared__ int32_t count[kAlignMaxExperts];                    // c_e, then the scatter cursor
  __shared__ int32_t offset[kAlignMaxExperts];                   // o_e
  __shared__ uint8_t warp_count[kAlignWarps][kAlignMaxExperts];  // per chunk, <= 32
  __shared__ int32_t warp_total[kAlignWarps];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = lane_id();
  const int warp = warp_id();
  const int32_t sentinel = static_cast<int32_t>(numel);

  count[tid] = 0;
  for (int w = 0; w < kAlignWarps; ++w) warp_count[w][tid] = 0;
  __syncthreads();

  // 1. c_e.
  for (int64_t i = tid; i < numel; i += kAlignThreads) {
    const int32_t e = topk_ids[i];
    if (e >= 0 && e < num_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();

  // 2. o_e: exclusive prefix sum of p_e over the 1024 threads, thread e
  // holding expert e (0 past num_experts).
  const int32_t c = tid < num_experts ? count[tid] : 0;
  const int32_t padded = padded_count(c, block_size);
  const int32_t inclusive = warp_inclusive_sum(padded);
  if (lane == kWarpSize - 1) warp_total[warp] = inclusive;
  __syncthreads();
  if (warp == 0) warp_total[lane] = warp_inclusive_sum(warp_total[lane]);
  __syncthreads();
  const int32_t start = inclusive - padded + (warp > 0 ? warp_total[warp - 1] : 0);
  const int32_t total = warp_total[kAlignWarps - 1];
  offset[tid] = start;
  count[tid] = 0;  // from here on: how many of expert tid's entries are placed
  __syncthreads();

  // 3. Everything that is not a token index: the padding of each expert's
  // range, the tail past the padded total, and expert_ids.
  for (int32_t pos = start + c; pos < start + padded; ++pos) sorted_token_ids[pos] = sentinel;
  const int64_t max_pad = numel + static_cast<int64_t>(num_experts) * (block_size - 1);
  for (int64_t pos = total + tid; pos < max_pad; pos += kAlignThreads) {
    sorted_token_ids[pos] = sentinel;
  }
  const int64_t blocks = (max_pad + block_size - 1) / block_size;
  const int64_t used_blocks = total / block_size;
  for (int64_t j = tid; j < blocks; j += kAlignThreads) {
    expert_ids[j] = j < used_blocks ? expert_at(offset, num_experts, j * block_size) : -1;
  }
  if (tid == 0) num_tokens_post_pad[0] = total;

  // 4. The token indices, chunk by chunk in index order. The next chunk's id
  // is loaded before this chunk's barriers, so its latency overlaps them.
  int32_t next_id = tid < numel ? topk_ids[tid] : -1;
  for (int64_t chunk = 0; chunk < numel; chunk += kAlignThreads) {
    const int64_t i = chunk + tid;
    const int32_t e = next_id;
    next_id = i + kAlignThreads < numel ? topk_ids[i + kAlignThreads] : -1;
    const bool valid = i < numel && e >= 0 && e < num_experts;
    const unsigned peers = __match_any_sync(kFullWarpMask, valid ? e : -1);
    const int32_t rank_in_warp = __popc(peers & lanes_below_mask());
    const bool leader = rank_in_warp == 0;
    if (valid && leader) warp_count[warp][e] = static_cast<uint8_t>(__popc(peers));
    __syncthreads();
    if (valid) {
      int32_t rank = count[e] + rank_in_warp;
      // A fixed trip count lets the 32 independent loads issue back to back.
#pragma unroll
      for (int w = 0; w < kAlignWarps; ++w) {
        if (w < warp) rank += warp_count[w][e];
      }
      sorted_token_ids[offset[e] + rank] = static_cast<int32_t>(i);
    }
    __syncthreads();
    if (valid && leader) {
      atomicAdd(&count[e], __popc(peers));
      warp_count[warp][e] = 0;
    }
    __syncthreads();
  }
}

}  // namespace sglang::moe
