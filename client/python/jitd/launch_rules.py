"""Launch choices the kernels leave to the caller, made as measured.

``rmsnorm_threads(dim)`` is the ``threads`` param of ``norm.rmsnorm`` for rows
of ``dim`` elements: a power of two near ``dim / 32``, from 128 to 1024, so
that each thread reads about four 16-byte packs of a bf16/fp16 row
(``tests/gpu/kernel_bench.py``, bf16; docs/KERNELS.md, norm.rmsnorm, has
every figure). Dims 2048 to 8192 were measured on an H200 and an H100 (8192
rows), the 512 and 1024 bands (dims 16384 and 32768, 4096 rows) on the H100
only; at dim 8192 the H100 runs 512 threads faster (85% of the peak copy
against 74%) and the H200 256, which the rule keeps.

``align_block_size_grid(numel)`` is the grid (``gridDim.x``) to launch
``moe.align_block_size`` with for ``numel`` routing entries: one block up to
ALIGN_ONE_BLOCK_UP_TO entries, ALIGN_SHARED_BLOCKS up to ALIGN_SHARED_UP_TO
(while one block holds the input, up to 4096 entries in the rule's blocks,
every block runs the kernel's one-block path and writes its share of the
outputs), then ALIGN_CHUNK_BLOCKS (each block scatters its own chunk; 32
were the fastest or within 2% of it at every size measured on an H100 with
the rule's blocks). Every grid from 1 to 64 gives the same outputs.

``align_block_size_threads(num_experts, numel)`` is the block
(``blockDim.x``) to launch it with: as many threads as the kernel's
one-block path works with (a power of two from 32, at least one per expert
and one per 8 entries) while that is at most 512, else 512 up to 512
experts, else 1024. Every power of two from 32 to 1024 that is at least
``num_experts`` gives the same outputs; the threads a block has beyond
those that work cost time even though they return at once (on an H100, 256
experts: docs/KERNELS.md, moe.align_block_size).
"""

from __future__ import annotations

__all__ = ["rmsnorm_threads", "align_block_size_grid", "align_block_size_threads"]

ALIGN_ONE_BLOCK_UP_TO = 128  # entries (16 tokens x top-8) one block takes within 6% of 8 blocks
ALIGN_SHARED_UP_TO = 4096  # entries up to which every block of the rule's threads holds the whole input
ALIGN_SHARED_BLOCKS = 8
ALIGN_CHUNK_BLOCKS = 32  # beyond; the kernel allows 64
ALIGN_NARROW_THREADS = 512  # the most threads a block has up to this many experts
ALIGN_ENTRIES_PER_THREAD = 8  # the kernel's one-block path (kAlignEntriesPerThread)
ALIGN_MAX_EXPERTS = 1024


def rmsnorm_threads(dim: int) -> int:
    """The ``threads`` value to request ``norm.rmsnorm`` with for rows of
    ``dim`` elements (any dtype): 128 up to dim 2048, 256 up to 8192, 512 up
    to 16384, then 1024 (docs/KERNELS.md says what each band measured, and
    on which GPU).
    ValueError for a dim below 1."""
    if int(dim) != dim or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    for most, threads in ((2048, 128), (8192, 256), (16384, 512)):
        if dim <= most:
            return threads
    return 1024


def align_block_size_grid(numel: int) -> int:
    """The ``gridDim.x`` to launch ``moe.align_block_size`` with
    for ``numel`` routing entries: 1 up to 128 entries, 8 up to 4096, then
    32 (jitd::AlignBlockSizeGrid is the same rule).
    ValueError for a negative numel."""
    if int(numel) != numel or numel < 0:
        raise ValueError(f"numel must be a non-negative integer, got {numel!r}")
    if numel <= ALIGN_ONE_BLOCK_UP_TO:
        return 1
    if numel <= ALIGN_SHARED_UP_TO:
        return ALIGN_SHARED_BLOCKS
    return ALIGN_CHUNK_BLOCKS


def align_block_size_threads(num_experts: int, numel: int) -> int:
    """The ``blockDim.x`` to launch ``moe.align_block_size`` with for
    ``numel`` routing entries of ``num_experts`` experts: the smallest power
    of two from 32 that is at least num_experts and numel / 8, up to 512;
    1024 past 512 experts (jitd::AlignBlockSizeThreads is the same rule).
    ValueError outside 0 to 1024 experts, which the kernel does not take,
    or for a negative numel."""
    if int(num_experts) != num_experts or not 0 <= num_experts <= ALIGN_MAX_EXPERTS:
        raise ValueError(f"num_experts must be an integer from 0 to {ALIGN_MAX_EXPERTS}, got {num_experts!r}")
    if int(numel) != numel or numel < 0:
        raise ValueError(f"numel must be a non-negative integer, got {numel!r}")
    if num_experts > ALIGN_NARROW_THREADS:
        return 1024
    threads = 32
    while threads < ALIGN_NARROW_THREADS and (threads < num_experts or threads * ALIGN_ENTRIES_PER_THREAD < numel):
        threads *= 2
    return threads
