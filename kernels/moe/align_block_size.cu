// moe.align_block_size: group MoE routing entries by expert, each expert's
// group padded to a multiple of block_size, deterministically.
//
// For expert e in [0, num_experts): c_e entries of topk_ids equal e,
// p_e = ceil(c_e / block_size) * block_size, o_e = sum of p_e' for e' < e.
//   num_tokens_post_pad[0] = sum of p_e
//   sorted_token_ids[o_e .. o_e + c_e - 1] = the indices i with topk_ids[i] == e,
//     ascending; every other position below num_tokens_post_pad holds numel;
//     positions from there to max_pad = numel + num_experts * (block_size - 1)
//     are not written
//   expert_ids[j] = the expert whose padded range holds j * block_size, for
//     j < num_tokens_post_pad / block_size; -1 for the rest of the
//     ceil(max_pad / block_size) entries
// Entries outside [0, num_experts) are skipped.
//
// Launch: 1 to 64 blocks (grid.x; every grid gives the same outputs) of a
// power of two from 32 to 1024 threads that is at least num_experts
// (block.x; every block size gives the same outputs too), no dynamic shared
// memory; num_experts <= 1024, numel < 2^24. The clients' rule launches as
// many threads as the one-block path works with, up to 512 (512 beyond, 1024
// past 512 experts): warps a block does not need cost time even when they
// return at once.
// Up to 8 x 32 entries per working warp of one block (working_threads: fewer
// threads at small sizes), every block of the grid takes align_one_block:
// each computes the whole alignment from the ids in its registers and writes
// its own share of [0, padded total) and of expert_ids, so a grid shares out
// the writes, which bound one block, and no block waits on another.
// Other launches trap.
//
// Algorithm, beyond that: block b of G owns chunk b of [0, numel), cut into G contiguous
// chunks in index order, and cuts its chunk into S segments,
// S = min(32, 8192 / E2) with E2 = num_experts rounded up to a power of two,
// so the S x E2 per-segment counts fit in 32 KiB of shared memory. Every
// block reads the whole input: its own chunk counted per (segment, expert),
// what lies before and after it per expert. So every block knows every c_e
// and o_e without waiting for any other block (no grid-wide barrier, no
// block depends on another being scheduled). Thread e then turns its column
// into cursors: cursor[s][e] = o_e + the entries of e before the chunk + the
// entries of e in the chunk's segments before s. Warp s alone scatters
// segment s, 32 entries per step, and the warps never wait on each other
// while they do. The padding and expert_ids are shared out among the blocks.
//
// At decode sizes (tests/gpu/align_stages.py times each stage on a GPU) the
// cost is the instructions of every phase issued by every working warp of
// one SM, and the serial steps of a warp: hence the working threads of a
// one-block grid, segments no more than the chunk fills, and the padding
// written a group of experts per warp without a shared-memory read per
// expert.
//
// Determinism: the order inside an expert's range is the index order, not the
// order in which atomics happen to land. Segment s's entries of e land after
// those of every earlier segment and chunk (its cursor starts past them), a
// warp walks its segment in index order, and inside a step an entry's rank is
// the number of same-expert lanes below it. Atomics only form counts, which
// are commutative sums.
//
// Cost, on an H200 at 32768 entries and 256 experts: with one block the
// scatter dominates, bound by the SM's store path (each token index is a
// 4-byte store to its own 32-byte sector: the lanes of a step belong to
// different experts), so several blocks share it out; what each block then
// pays is its count of the whole input, 32768 shared-memory atomics.
#include "common/types.cuh"
#include "common/warp.cuh"

namespace sglang::moe {

// The most threads a block has (the arrays are sized for it); a block may
// have fewer (block_threads).
inline constexpr int kAlignThreads = 1024;
inline constexpr int kAlignWarps = kAlignThreads / kWarpSize;
inline constexpr int kAlignMaxBlocks = 64;
inline constexpr int32_t kAlignMaxExperts = 1024;
inline constexpr int64_t kAlignMaxNumel = int64_t{1} << 24;
// Segments times rounded-up experts, the size of the cursor table.
inline constexpr int kAlignCursorCells = 8192;
inline constexpr int kAlignMaxSegments = kAlignWarps;
// Id loads in flight per lane: while counting, a batch issued together; while
// scattering, how many steps ahead an id is loaded, so it has arrived when its
// step comes.
inline constexpr int kAlignCountLoads = 16;
inline constexpr int kAlignLoadsAhead = 8;
// A grid of one block works with as few threads as hold one expert each and
// about this many entries each; the other warps return at once. Every
// instruction of the count, the prefix sums and the writes is issued by
// every working warp on one SM, so at decode sizes fewer warps finish sooner.
#ifndef SGLANG_ALIGN_ENTRIES_PER_THREAD
#define SGLANG_ALIGN_ENTRIES_PER_THREAD 8
#endif
inline constexpr int kAlignEntriesPerThread = SGLANG_ALIGN_ENTRIES_PER_THREAD;

// The threads that work in each block of `block_threads`: all of them when
// several blocks share the input; for one block, a power of two from 32 to
// block_threads that is at least num_experts and numel / kAlignEntriesPerThread.
__device__ __forceinline__ int working_threads(int32_t num_experts, int64_t numel, int blocks, int block_threads) {
  if (blocks > 1) return block_threads;
  int threads = kWarpSize;
  while (threads < block_threads &&
         (threads < num_experts || static_cast<int64_t>(threads) * kAlignEntriesPerThread < numel)) {
    threads *= 2;
  }
  return threads;
}

// __syncthreads for the working threads only (barrier 1; the others have
// returned and never wait on it).
__device__ __forceinline__ void sync_working(int threads) { asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory"); }

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

// topk_ids[i], or -1 (never a valid expert) past the end of the segment.
__device__ __forceinline__ int32_t id_at(const int32_t* __restrict__ topk_ids, int32_t i, int32_t end) {
  return i < end ? topk_ids[i] : -1;
}

__device__ __forceinline__ bool is_expert(int32_t e, int32_t num_experts) {
  return static_cast<uint32_t>(e) < static_cast<uint32_t>(num_experts);
}

// The valid lanes holding the same expert id as this one (meaningful on valid
// lanes), for ids below 2^kIdBits: one ballot per bit. It is the mask
// __match_any_sync gives, but MATCH.ANY measured slower on an H200 (the kernel
// took 6% longer with 256 experts, 17% with 1024).
template <int kIdBits>
__device__ __forceinline__ unsigned same_expert_lanes(int32_t e, bool valid) {
  unsigned peers = __ballot_sync(kFullWarpMask, valid);
#pragma unroll
  for (int b = 0; b < kIdBits; ++b) {
    const unsigned bit = (static_cast<unsigned>(e) >> b) & 1u;
    peers &= ~(__ballot_sync(kFullWarpMask, bit != 0) ^ (0u - bit));
  }
  return peers;
}

// Step 4 for one warp: entries [begin, end) in index order, 32 per step, lane
// l taking entry base + l. Each expert's group leader (its lowest lane) alone
// reads and advances the cursor and hands the old value to its peers, so
// within a step no lane reads what another writes; __syncwarp orders one
// step's cursor updates before the next step's reads.
template <int kIdBits>
__device__ __forceinline__ void scatter_segment(const int32_t* __restrict__ topk_ids, int32_t begin, int32_t end,
                                                int32_t num_experts, int32_t* cursor_row,
                                                int32_t* __restrict__ sorted_token_ids) {
  const int lane = lane_id();
  const int32_t steps = (end - begin + kWarpSize - 1) / kWarpSize;
  int32_t ids[kAlignLoadsAhead];
#pragma unroll
  for (int d = 0; d < kAlignLoadsAhead; ++d) ids[d] = id_at(topk_ids, begin + d * kWarpSize + lane, end);
  for (int32_t step = 0; step < steps; step += kAlignLoadsAhead) {
#pragma unroll
    for (int d = 0; d < kAlignLoadsAhead; ++d) {
      const int32_t i = begin + (step + d) * kWarpSize + lane;
      const int32_t e = ids[d];
      // Outside the step guard, so the refill never waits on the load.
      ids[d] = id_at(topk_ids, i + kAlignLoadsAhead * kWarpSize, end);
      if (step + d < steps) {
        const bool valid = is_expert(e, num_experts);
        const unsigned peers = same_expert_lanes<kIdBits>(e, valid);
        const int leader = valid ? __ffs(peers) - 1 : lane;
        int32_t base = 0;
        if (lane == leader && valid) {
          base = cursor_row[e];
          cursor_row[e] = base + __popc(peers);
        }
        base = __shfl_sync(kFullWarpMask, base, leader);
        if (valid) sorted_token_ids[base + __popc(peers & lanes_below_mask())] = i;
        __syncwarp();
      }
    }
  }
}

// The padding of each expert e, [fill[e], the next expert's offset), by the
// `stride` warps of the grid, this one being warp `first`. A warp takes up
// to 32 experts at once (as many as leave no warp idle), lane l reading the
// range of the group's expert l, and writes the ranges that are not empty
// one after the other, 32 positions per store so that the stores coalesce;
// the ranges travel by shuffle, so no shared-memory read waits in the loop,
// and empty ranges (most experts at decode sizes) cost nothing.
__device__ __forceinline__ void pad_experts(const int32_t* offset, const int32_t* fill, int32_t num_experts,
                                            int32_t total, int first, int stride, int32_t sentinel,
                                            int32_t* __restrict__ sorted_token_ids) {
  const int lane = lane_id();
  const int group = min(kWarpSize, max(1, (num_experts + stride - 1) / stride));
  for (int base = first * group; base < num_experts; base += stride * group) {
    const int e = base + lane;
    const bool mine = lane < group && e < num_experts;
    const int32_t begin = mine ? fill[e] : 0;
    const int32_t end = !mine ? 0 : e + 1 < num_experts ? offset[e + 1] : total;
    unsigned pending = __ballot_sync(kFullWarpMask, begin < end);
    while (pending != 0) {
      const int j = __ffs(pending) - 1;
      pending &= pending - 1;
      const int32_t from = __shfl_sync(kFullWarpMask, begin, j);
      const int32_t to = __shfl_sync(kFullWarpMask, end, j);
      for (int32_t pos = from + lane; pos < to; pos += kWarpSize) sorted_token_ids[pos] = sentinel;
    }
  }
}

// expert_ids[k] for k = first, first + step, ...: the expert whose padded
// range holds k * block_size below the padded total, -1 past it, for the
// ceil(max_pad / block_size) entries.
__device__ __forceinline__ void write_expert_ids(const int32_t* offset, int32_t n, int32_t num_experts,
                                                 int32_t block_size, int32_t total, int first, int step,
                                                 int32_t* __restrict__ expert_ids) {
  // ceil(max_pad / block_size) = num_experts + ceil((numel - num_experts) /
  // block_size), in int32 and without an int64 division; for a negative
  // numerator the truncating division is the ceiling.
  const int32_t surplus = n - num_experts;
  const int32_t slots = num_experts + (surplus > 0 ? (surplus - 1) / block_size + 1 : surplus / block_size);
  const int32_t used_slots = total / block_size;
  for (int32_t k = first; k < slots; k += step) {
    expert_ids[k] = k < used_slots ? expert_at(offset, num_experts, static_cast<int64_t>(k) * block_size) : -1;
  }
}

// o_e for the calling thread e holding c_e padded to `padded`: the block's
// exclusive prefix sum of `padded` over its `threads` working threads, and
// the padded total in `*total`. warp_total holds 32 zeros on entry (the
// warps that do not work add nothing).
__device__ __forceinline__ int32_t padded_start(int32_t padded, int threads, int32_t* warp_total, int32_t* total) {
  const int lane = lane_id();
  const int warp = warp_id();
  const int32_t inclusive = warp_inclusive_sum(padded);
  if (lane == kWarpSize - 1) warp_total[warp] = inclusive;
  sync_working(threads);
  if (warp == 0) warp_total[lane] = warp_inclusive_sum(warp_total[lane]);
  sync_working(threads);
  *total = warp_total[kAlignWarps - 1];
  return inclusive - padded + (warp > 0 ? warp_total[warp - 1] : 0);
}

// Counts into hist[e] every valid id at begin + first, begin + first +
// stride, ... below end, kAlignCountLoads ids in flight per thread.
__device__ __forceinline__ void count_ids(const int32_t* __restrict__ topk_ids, int32_t begin, int32_t end,
                                          int32_t first, int32_t stride, int32_t num_experts, int32_t* hist) {
  for (int32_t i = begin + first; i < end; i += kAlignCountLoads * stride) {
    int32_t ids[kAlignCountLoads];
#pragma unroll
    for (int d = 0; d < kAlignCountLoads; ++d) ids[d] = id_at(topk_ids, i + d * stride, end);
#pragma unroll
    for (int d = 0; d < kAlignCountLoads; ++d) {
      if (is_expert(ids[d], num_experts)) atomicAdd(&hist[ids[d]], 1);
    }
  }
}

// o_e for the calling thread e holding c_e padded to `padded`, over the
// `warps` working warps of one block, and the padded total in `*total`, with
// one barrier: each warp's last lane publishes the warp's sum, and every
// warp then scans the sums itself rather than waiting for one warp to.
__device__ __forceinline__ int32_t padded_start_one_barrier(int32_t padded, int warps, int32_t* warp_total,
                                                            int32_t* total) {
  const int lane = lane_id();
  const int warp = warp_id();
  const int32_t inclusive = warp_inclusive_sum(padded);
  if (lane == kWarpSize - 1) warp_total[warp] = inclusive;
  sync_working(warps * kWarpSize);
  const int32_t sums = warp_inclusive_sum(lane < warps ? warp_total[lane] : 0);
  *total = __shfl_sync(kFullWarpMask, sums, kWarpSize - 1);
  const int32_t earlier = __shfl_sync(kFullWarpMask, sums, (warp + kWarpSize - 1) % kWarpSize);
  return inclusive - padded + (warp > 0 ? earlier : 0);
}

// expert_ids[k] = -1 for the slots past the padded total, k = first, first +
// step, ... of the ceil(max_pad / block_size) entries.
__device__ __forceinline__ void write_unused_expert_ids(int32_t n, int32_t num_experts, int32_t block_size,
                                                        int32_t total, int first, int step,
                                                        int32_t* __restrict__ expert_ids) {
  const int32_t surplus = n - num_experts;
  const int32_t slots = num_experts + (surplus > 0 ? (surplus - 1) / block_size + 1 : surplus / block_size);
  for (int32_t k = total / block_size + first; k < slots; k += step) expert_ids[k] = -1;
}

// Cells of its column thread e reads before writing any, in the one-block path.
inline constexpr int kAlignColumnLoads = 8;

// Steps of 32 entries each warp of the one-block path takes: its ids and
// their ranks stay in registers from the one load to the scatter.
inline constexpr int kAlignSmallSteps = 8;

// The whole alignment by one block whose `threads` working threads hold
// every entry in registers (at most kAlignSmallSteps * 32 per warp) and
// whose per-warp counts fit the cursor table (warps x E2 cells). Warp w
// owns a contiguous segment of the input. The ids are loaded once; each
// warp then ranks its entries in index order (per expert, how many of the
// segment's entries of that expert come before), counting into its own row,
// so no atomics and no second pass over the input. Thread e turns column e
// into the entries of e in earlier segments, the block's scan gives o_e,
// and each entry lands at o_e + its segment's earlier entries + its rank.
template <int kIdBits>
__device__ __forceinline__ void align_one_block(const int32_t* __restrict__ topk_ids, int32_t n, int32_t num_experts,
                                                int32_t block_size, int threads, int block, int blocks, int row_shift,
                                                int32_t* cursor, int32_t* offset, int32_t* warp_total,
                                                int32_t* __restrict__ sorted_token_ids,
                                                int32_t* __restrict__ expert_ids,
                                                int32_t* __restrict__ num_tokens_post_pad) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = lane_id();
  const int warp = warp_id();
  const int warps = threads / kWarpSize;
  const int32_t per_warp = ((n + warps - 1) / warps + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int32_t begin = min(warp * per_warp, n);
  const int32_t end = min(begin + per_warp, n);
  int32_t ids[kAlignSmallSteps];
#pragma unroll
  for (int k = 0; k < kAlignSmallSteps; ++k) ids[k] = id_at(topk_ids, begin + k * kWarpSize + lane, end);
  // Each warp zeroes its own row, the only row it reads or writes until the
  // ranks' barrier: __syncwarp orders that, and no block barrier is needed.
  int32_t* row = cursor + (warp << row_shift);
  for (int k = lane; k < (1 << row_shift); k += kWarpSize) row[k] = 0;
  __syncwarp();

  // 1. Ranks in index order, the warp's row counting as it goes. Every lane
  // of an expert's group reads the count; the group's lowest lane alone
  // advances it.
  int32_t rank[kAlignSmallSteps];
#pragma unroll
  for (int k = 0; k < kAlignSmallSteps; ++k) {
    rank[k] = 0;
    if (k * kWarpSize < end - begin) {
      const int32_t e = ids[k];
      const bool valid = is_expert(e, num_experts);
      const unsigned peers = same_expert_lanes<kIdBits>(e, valid);
      const unsigned peers_below = peers & lanes_below_mask();
      // Every lane of a group reads the count (one address: a broadcast);
      // after the warp has read, the group's lowest lane alone advances it.
      const int32_t before = valid ? row[e] : 0;
      rank[k] = before + __popc(peers_below);
      __syncwarp();
      if (valid && peers_below == 0) row[e] = before + __popc(peers);
      __syncwarp();
    }
  }
  sync_working(threads);

  // 2. Column e: the entries of e in earlier segments, in place; c_e; o_e.
  // The cells are read a group at a time before any is written, so their
  // loads issue back to back rather than each waiting on the last store.
  int32_t c = 0;
  if (tid < num_experts) {
    int32_t* cell = cursor + tid;
#pragma unroll
    for (int w0 = 0; w0 < kAlignWarps; w0 += kAlignColumnLoads) {
      if (w0 < warps) {
        int32_t here[kAlignColumnLoads];
#pragma unroll
        for (int d = 0; d < kAlignColumnLoads; ++d) here[d] = w0 + d < warps ? cell[(w0 + d) << row_shift] : 0;
#pragma unroll
        for (int d = 0; d < kAlignColumnLoads; ++d) {
          if (w0 + d < warps) cell[(w0 + d) << row_shift] = c;
          c += here[d];
        }
      }
    }
  }
  const int32_t padded = padded_count(c, block_size);
  int32_t total;
  const int32_t start = padded_start_one_barrier(padded, warps, warp_total, &total);
  offset[tid] = start;

  // 3. Block b of the grid writes positions [lo, hi) of [0, total), its
  // share in whole 128-byte lines: the sentinel in one coalesced sweep; then,
  // after the barrier (which orders this block's writes and publishes
  // offset), the token indices from registers that land in the share
  // overwrite theirs. No other block writes there, so no block waits on
  // another. expert_ids comes from the registers of thread e before the
  // barrier: its slots [o_e, o_e + p_e) / block_size, striped over the grid.
  const int32_t share = ((total + blocks - 1) / blocks + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int32_t lo = min(block * share, total);
  const int32_t hi = min(lo + share, total);
  for (int32_t pos = lo + tid; pos < hi; pos += threads) sorted_token_ids[pos] = n;
  if (padded > 0) {
    const int32_t first = start / block_size;
    const int32_t last = first + padded / block_size;
    int32_t k = first + (block - first % blocks + blocks) % blocks;
    for (; k < last; k += blocks) expert_ids[k] = tid;
  }
  write_unused_expert_ids(n, num_experts, block_size, total, block * threads + tid, blocks * threads, expert_ids);
  sync_working(threads);
#pragma unroll
  for (int k = 0; k < kAlignSmallSteps; ++k) {
    const int32_t e = ids[k];
    if (is_expert(e, num_experts)) {
      const int32_t pos = offset[e] + row[e] + rank[k];
      if (pos >= lo && pos < hi) sorted_token_ids[pos] = begin + k * kWarpSize + lane;
    }
  }
  if (block == 0 && tid == 0) num_tokens_post_pad[0] = total;
}

__global__ void __launch_bounds__(kAlignThreads)
    align_block_size_kernel(const int32_t* __restrict__ topk_ids, int64_t numel, int32_t num_experts,
                            int32_t block_size, int32_t* __restrict__ sorted_token_ids,
                            int32_t* __restrict__ expert_ids, int32_t* __restrict__ num_tokens_post_pad) {
  // A power of two from 32 to 1024 threads, at least one per expert.
  const int block_threads = static_cast<int>(blockDim.x);
  const bool block_ok = block_threads >= kWarpSize && block_threads <= kAlignThreads &&
                        (block_threads & (block_threads - 1)) == 0 && num_experts <= block_threads;
  if (!block_ok || blockDim.y != 1 || blockDim.z != 1 || gridDim.x > kAlignMaxBlocks || gridDim.y != 1 ||
      gridDim.z != 1 || num_experts < 0 || num_experts > kAlignMaxExperts || block_size <= 0 || numel < 0 ||
      numel >= kAlignMaxNumel) {
    __trap();
  }
  // 40 KiB of static shared memory, under the 48 KiB a block gets without
  // opting in to more.
  __shared__ int32_t cursor[kAlignCursorCells];  // [segment][expert], row stride E2: counts, then cursors
  __shared__ int32_t offset[kAlignMaxExperts];   // counts before the chunk, then o_e
  __shared__ int32_t fill[kAlignMaxExperts];     // counts after the chunk, then o_e + c_e (e's padding)
  __shared__ int32_t warp_total[kAlignWarps];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = lane_id();
  const int warp = warp_id();
  const int block = static_cast<int>(blockIdx.x);
  const int blocks = static_cast<int>(gridDim.x);
  // numel < 2^24, so every index and count below fits an int32.
  const int32_t n = static_cast<int32_t>(numel);
  const int32_t sentinel = n;

  const int row_shift = num_experts <= 1 ? 0 : 32 - __clz(num_experts - 1);  // log2(E2)
  // Where one block holds the whole input in registers, every block of the
  // grid runs the one-block path and writes its share of the outputs.
  const int small_threads = working_threads(num_experts, numel, 1, block_threads);
  const int small_warps = small_threads / kWarpSize;
  if ((small_warps << row_shift) <= kAlignCursorCells && n <= small_warps * kWarpSize * kAlignSmallSteps) {
    if (tid >= small_threads) return;
    if (row_shift <= 8) {
      align_one_block<8>(topk_ids, n, num_experts, block_size, small_threads, block, blocks, row_shift, cursor, offset,
                         warp_total, sorted_token_ids, expert_ids, num_tokens_post_pad);
    } else {
      align_one_block<10>(topk_ids, n, num_experts, block_size, small_threads, block, blocks, row_shift, cursor, offset,
                          warp_total, sorted_token_ids, expert_ids, num_tokens_post_pad);
    }
    return;
  }
  const int threads = working_threads(num_experts, numel, blocks, block_threads);
  if (tid >= threads) return;
  const int warps = threads / kWarpSize;

  const int32_t chunk_len = (n + blocks - 1) / blocks;
  const int32_t chunk_begin = min(block * chunk_len, n);
  const int32_t chunk_end = min(chunk_begin + chunk_len, n);
  // As many segments as the chunk fills with 32 entries each, up to one per
  // warp: a chunk of 8 entries is one segment, whose counts alone are zeroed,
  // summed and turned into cursors.
  int segments = min(warps, kAlignCursorCells >> row_shift);
  while (segments > 1 && (segments / 2) * kWarpSize >= chunk_len) segments /= 2;
  const int32_t segment_len = (chunk_end - chunk_begin + segments - 1) / segments;

  for (int k = tid; k < (segments << row_shift); k += threads) cursor[k] = 0;
  offset[tid] = 0;
  fill[tid] = 0;
  if (tid < kAlignWarps) warp_total[tid] = 0;  // the warps that do not work add 0
  sync_working(threads);

  // 1. Counts: per segment in the chunk, per expert before and after it.
  // segments divides the warp count (both are powers of two), so each segment
  // gets the same number of warps.
  {
    const int s = warp % segments;
    const int32_t stride = warps / segments * kWarpSize;
    const int32_t begin = min(chunk_begin + s * segment_len, chunk_end);
    const int32_t end = min(begin + segment_len, chunk_end);
    count_ids(topk_ids, begin, end, warp / segments * kWarpSize + lane, stride, num_experts, cursor + (s << row_shift));
  }
  count_ids(topk_ids, 0, chunk_begin, tid, threads, num_experts, offset);
  count_ids(topk_ids, chunk_end, n, tid, threads, num_experts, fill);
  sync_working(threads);

  // 2. o_e: exclusive prefix sum of p_e over the block's threads, thread e
  // holding expert e (0 past num_experts). Its column of counts is read once
  // into registers: a fixed trip count lets the loads issue back to back.
  int32_t column[kAlignMaxSegments];
  const int32_t before = offset[tid];
  int32_t c = before + fill[tid];
#pragma unroll
  for (int s = 0; s < kAlignMaxSegments; ++s) {
    column[s] = s < segments && tid < num_experts ? cursor[(s << row_shift) + tid] : 0;
    c += column[s];
  }
  int32_t total;
  const int32_t start = padded_start(padded_count(c, block_size), threads, warp_total, &total);
  // Thread e alone read offset[e] and fill[e], so it may overwrite them.
  offset[tid] = start;
  fill[tid] = start + c;
  if (tid < num_experts) {
    int32_t next = start + before;
#pragma unroll
    for (int s = 0; s < kAlignMaxSegments; ++s) {
      if (s < segments) cursor[(s << row_shift) + tid] = next;
      next += column[s];
    }
  }
  sync_working(threads);

  // 3. Everything that is not a token index, shared out among the blocks:
  // the padding of each expert's range and expert_ids. Positions at or past
  // the padded total are not written. None of it overlaps what step 4 writes.
  pad_experts(offset, fill, num_experts, total, block * warps + warp, blocks * warps, sentinel, sorted_token_ids);
  write_expert_ids(offset, n, num_experts, block_size, total, block * threads + tid, blocks * threads, expert_ids);
  if (block == 0 && tid == 0) num_tokens_post_pad[0] = total;

  // 4. The chunk's token indices, warp s scattering segment s.
  if (warp < segments) {
    const int32_t begin = min(chunk_begin + warp * segment_len, chunk_end);
    const int32_t end = min(begin + segment_len, chunk_end);
    int32_t* row = cursor + (warp << row_shift);
    if (row_shift <= 8) {
      scatter_segment<8>(topk_ids, begin, end, num_experts, row, sorted_token_ids);
    } else {
      scatter_segment<10>(topk_ids, begin, end, num_experts, row, sorted_token_ids);
    }
  }
}

}  // namespace sglang::moe
