// moe.align_single_token: align_block_size for one token (the decode path).
//
// topk_ids holds topk <= 32 distinct expert ids. The outputs equal
// align_block_size's for the same ids with numel = topk, cut to
// topk * block_size entries of sorted_token_ids and topk of expert_ids:
//   expert_ids[rank(k)] = topk_ids[k], the ids in ascending order
//   sorted_token_ids[rank(k) * block_size] = k, topk everywhere else below
//     num_tokens_post_pad (positions past it are not written)
//   num_tokens_post_pad[0] = topk * block_size
// where rank(k) counts the ids below topk_ids[k]. Negative ids are skipped, as
// align_block_size skips ids outside [0, num_experts): with m ids left, the
// expert_ids past m hold -1 and num_tokens_post_pad is m * block_size. (There
// is no num_experts here, so ids are not checked from above.)
//
// Launch: one warp (threads past the first warp and blocks past the first do
// nothing); topk > 32 or block_size <= 0 traps.
#include "common/types.cuh"
#include "common/warp.cuh"

namespace sglang::moe {

__global__ void align_single_token_kernel(const int32_t* __restrict__ topk_ids, int32_t topk, int32_t block_size,
                                          int32_t* __restrict__ sorted_token_ids, int32_t* __restrict__ expert_ids,
                                          int32_t* __restrict__ num_tokens_post_pad) {
  if (blockIdx.x != 0 || blockIdx.y != 0 || blockIdx.z != 0 || threadIdx.y != 0 || threadIdx.z != 0 ||
      threadIdx.x >= kWarpSize) {
    return;
  }
  if (blockDim.x < kWarpSize || topk > kWarpSize || block_size <= 0) __trap();
  const int lane = lane_id();
  const int32_t n = topk < 0 ? 0 : topk;

  const int32_t id = lane < n ? topk_ids[lane] : -1;
  const bool valid = lane < n && id >= 0;
  const unsigned valid_lanes = __ballot_sync(kFullWarpMask, valid);
  const int32_t used = __popc(valid_lanes);

  int32_t rank = 0;
  for (int k = 0; k < kWarpSize; ++k) {
    const int32_t other = __shfl_sync(kFullWarpMask, id, k);
    if (((valid_lanes >> k) & 1u) != 0 && other < id) ++rank;
  }

  // Token k sits at rank(k) * block_size, the padding after it; positions at
  // or past num_tokens_post_pad are not written. Each position is written
  // once, by a loop without divisions (a 64-bit division per position made
  // this one-warp kernel latency-bound).
  for (int32_t slot = 0; slot < used; ++slot) {
    int32_t* padding = sorted_token_ids + static_cast<int64_t>(slot) * block_size;
    for (int32_t at = lane + 1; at < block_size; at += kWarpSize) padding[at] = n;
  }
  if (valid) {
    sorted_token_ids[static_cast<int64_t>(rank) * block_size] = lane;
    expert_ids[rank] = id;
  }
  if (lane >= used && lane < n) expert_ids[lane] = -1;
  if (lane == 0) num_tokens_post_pad[0] = used * block_size;
}

}  // namespace sglang::moe
