// Launch choices the shipped kernels (kernels/, docs/KERNELS.md) leave to
// the caller, made as measured: rules of those kernels, not of the client,
// so they are here and not in jitd/client.h. The Python client has the same
// rules (jitd.rmsnorm_threads, jitd.align_block_size_grid,
// jitd.align_block_size_threads).
#pragma once

#include <cstdint>

namespace jitd {

// The `threads` param of norm.rmsnorm for rows of `dim` elements: 128 up to
// dim 2048, 256 up to 8192, 512 up to 16384, then 1024. Measured on an H100
// and an H200 at 8192 rows of bf16 (docs/KERNELS.md, norm.rmsnorm): at dim
// 4096, 256 threads took 51 us on the H100 where 128 took 65, and 43 us on
// the H200 where 128 took 41; every other band was the fastest or within
// 16% of it on both. The Python client's jitd.rmsnorm_threads is the same rule.
constexpr int RmsnormThreads(int64_t dim) {
  if (dim <= 2048) return 128;
  if (dim <= 8192) return 256;
  if (dim <= 16384) return 512;
  return 1024;
}

// The grid (gridDim.x; block AlignBlockSizeThreads) to launch moe.align_block_size with for
// `numel` routing entries: one block up to 128 entries (16 tokens x top-8),
// 8 blocks up to 8192, then a block per 1024 entries, up to 32. Up to 8192
// entries (256 experts or fewer) every block runs the kernel's one-block
// path, which keeps the ids in registers, and writes its eighth of the
// outputs: one block alone spends most of its time on those writes.
// Beyond, each block scatters its own chunk and counts the whole input.
// On an H100 (docs/gpu-runs/2026-12-06-align-shared-f46104f-h100,
// align_grids.out) 8 blocks took 5.48 us at 256 tokens x top-8 against 7.42
// for one; at 1 and 16 tokens one block took 3.96 and 4.23 us, 8 blocks 3.91
// and 3.99.
// Every grid from 1 to 64 gives the same outputs (docs/KERNELS.md,
// moe.align_block_size, says what each grid measured). The Python client's
// jitd.align_block_size_grid is the same rule.
constexpr int AlignBlockSizeGrid(int64_t numel) {
  constexpr int64_t kOneBlockUpTo = 128;
  constexpr int64_t kSharedUpTo = 8192;
  constexpr int kSharedBlocks = 8;
  constexpr int64_t kEntriesPerBlock = 1024;
  constexpr int64_t kMostBlocks = 32;
  if (numel <= kOneBlockUpTo) return 1;
  if (numel <= kSharedUpTo) return kSharedBlocks;
  const int64_t blocks = (numel - 1) / kEntriesPerBlock + 1;
  return static_cast<int>(blocks < kMostBlocks ? blocks : kMostBlocks);
}

// The block (blockDim.x) to launch moe.align_block_size with for
// `num_experts` experts: 512 threads up to 512 experts, else 1024. Every
// power of two from 32 to 1024 that is at least num_experts gives the same
// outputs (docs/KERNELS.md); at 256 experts a block of 512 was faster than
// one of 1024 at every size measured on an H100, since the warps a block
// does not need cost time even when they return at once. The Python
// client's jitd.align_block_size_threads is the same rule.
constexpr int AlignBlockSizeThreads(int64_t num_experts) { return num_experts <= 512 ? 512 : 1024; }

}  // namespace jitd
