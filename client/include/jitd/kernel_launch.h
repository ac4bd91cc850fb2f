// Launch choices the shipped kernels (kernels/, docs/KERNELS.md) leave to
// the caller, made as measured: rules of those kernels, not of the client,
// so they are here and not in jitd/client.h. The Python client has the same
// rules (jitd.rmsnorm_threads, jitd.align_block_size_grid,
// jitd.align_block_size_threads).
#pragma once

#include <cstdint>

namespace jitd {

// The `threads` param of norm.rmsnorm for rows of `dim` elements: 128 up to
// dim 2048, 256 up to 8192, 512 up to 16384, then 1024. Dims 2048 to 8192
// measured on an H100 and an H200 at 8192 rows of bf16, the 512 and 1024
// bands (dims 16384 and 32768, 4096 rows) on the H100 only (docs/KERNELS.md,
// norm.rmsnorm): at dim 4096, 256 threads took 51 us on the H100 where 128
// took 65, and 43 us on the H200 where 128 took 41; at dim 8192 the H100's
// fastest is 512 (16% faster than 256), the H200's 256; the 512 and 1024
// bands were the fastest on the H100. The Python client's
// jitd.rmsnorm_threads is the same rule.
constexpr int RmsnormThreads(int64_t dim) {
  if (dim <= 2048) return 128;
  if (dim <= 8192) return 256;
  if (dim <= 16384) return 512;
  return 1024;
}

// The grid (gridDim.x; block AlignBlockSizeThreads) to launch
// moe.align_block_size with for `numel` routing entries: one block up to 128
// entries (16 tokens x top-8), 8 blocks up to 4096, then 32. While one block
// holds the input (8 entries a thread: up to 4096 entries in the rule's
// blocks of at most 512 threads; 256 experts or fewer) every block runs the
// kernel's one-block path, which keeps the ids in registers, and writes its
// eighth of the outputs: one block alone spends most of its time on those
// writes. Beyond, each block scatters its own chunk and counts the whole
// input, and 32 blocks were the fastest or within 2% of it at every size
// measured with blocks of 512, within 3% with 1024 (H100, 256 experts,
// docs/gpu-runs/2026-12-07-run-97132a3-h100, align_grids.out: at 8192
// entries 7.27 us against 8.04 with 8 blocks; at 16384, 8.29 against 8.73
// with 16, the rule before, which gave a block per 1024 entries).
// On an H100 (docs/gpu-runs/2026-12-06-align-shared-f46104f-h100,
// align_grids.out) 8 blocks took 5.48 us at 256 tokens x top-8 against 7.42
// for one; at 1 and 16 tokens one block took 3.96 and 4.23 us, 8 blocks 3.91
// and 3.99.
// Every grid from 1 to 64 gives the same outputs (docs/KERNELS.md,
// moe.align_block_size, says what each grid measured). The Python client's
// jitd.align_block_size_grid is the same rule.
constexpr int AlignBlockSizeGrid(int64_t numel) {
  constexpr int64_t kOneBlockUpTo = 128;
  constexpr int64_t kSharedUpTo = 4096;
  constexpr int kSharedBlocks = 8;
  constexpr int kChunkBlocks = 32;
  if (numel <= kOneBlockUpTo) return 1;
  if (numel <= kSharedUpTo) return kSharedBlocks;
  return kChunkBlocks;
}

// The block (blockDim.x) to launch moe.align_block_size with for `numel`
// routing entries of `num_experts` experts: the smallest power of two from
// 32 that is at least num_experts and numel / 8 (the threads the kernel's
// one-block path works with), up to 512; 1024 past 512 experts. Every power
// of two from 32 to 1024 that is at least num_experts gives the same
// outputs (docs/KERNELS.md). The threads a block has beyond those that work
// cost time even though they return at once: on an H100 at 256 experts
// (docs/gpu-runs/2026-12-07-run-0d0a8e7-h100, align_threads.out) 256
// tokens x top-8 took 4.89 us with 256 threads, 5.05 with 512 and 5.31
// with 1024; past 4096 entries 512 threads were the fastest (10.36 us at
// 4096 tokens, 11.65 with 256, 12.69 with 1024). The Python client's
// jitd.align_block_size_threads is the same rule.
constexpr int AlignBlockSizeThreads(int64_t num_experts, int64_t numel) {
  constexpr int kMostNarrow = 512;
  constexpr int64_t kEntriesPerThread = 8;
  if (num_experts > kMostNarrow) return 1024;
  int threads = 32;
  while (threads < kMostNarrow && (threads < num_experts || threads * kEntriesPerThread < numel)) threads *= 2;
  return threads;
}

}  // namespace jitd
