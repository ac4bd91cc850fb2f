"""jitd.rmsnorm_threads, jitd.align_block_size_grid and
jitd.align_block_size_threads: the measured launch
choices the kernels leave to the caller."""

from __future__ import annotations

import re
import tomllib

import pytest

import jitd
from conftest import SHIPPED_KERNELS


def test_rmsnorm_threads_follows_the_measured_bands_from_128_to_1024():
    assert [jitd.rmsnorm_threads(d) for d in (1, 1024, 2048)] == [128] * 3
    assert [jitd.rmsnorm_threads(d) for d in (2049, 4096, 5120, 8192)] == [256] * 4
    assert [jitd.rmsnorm_threads(d) for d in (8193, 16384)] == [512] * 2
    assert [jitd.rmsnorm_threads(d) for d in (16385, 65536, 1 << 20)] == [1024] * 3


def test_every_choice_is_a_threads_value_the_shipped_manifest_compiles():
    manifest = tomllib.loads((SHIPPED_KERNELS / "kernels.toml").read_text())
    [rmsnorm] = [k for k in manifest["kernel"] if k["name"] == "norm.rmsnorm"]
    [threads] = [p for p in rmsnorm["params"] if p["name"] == "threads"]
    allowed = {int(v) for v in threads["values"]}
    assert {jitd.rmsnorm_threads(1 << n) for n in range(0, 21)} <= allowed


@pytest.mark.parametrize("dim", [0, -1, 2.5])
def test_a_dim_that_is_not_a_positive_integer_is_refused(dim):
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        jitd.rmsnorm_threads(dim)


def test_align_block_size_grid_gives_one_block_then_8_then_32():
    assert [jitd.align_block_size_grid(n) for n in (0, 1, 128)] == [1, 1, 1]
    assert [jitd.align_block_size_grid(n) for n in (129, 2048, 4096)] == [8, 8, 8]
    assert [jitd.align_block_size_grid(n) for n in (4097, 8192, 32768, (1 << 24) - 1)] == [32] * 4


def test_align_block_size_grid_gives_8_blocks_exactly_while_one_block_of_the_rules_threads_holds_the_input():
    # The one-block path holds up to ALIGN_ENTRIES_PER_THREAD entries a thread
    # of the widest block the thread rule gives at 256 experts.
    widest = jitd.align_block_size_threads(256, 1 << 20)
    holds = widest * jitd.launch_rules.ALIGN_ENTRIES_PER_THREAD
    assert jitd.align_block_size_grid(holds) == 8 and jitd.align_block_size_grid(holds + 1) == 32


def test_align_block_size_grid_stays_within_the_grids_the_kernel_allows():
    source = (SHIPPED_KERNELS / "moe" / "align_block_size.cu").read_text()
    [most] = re.findall(r"kAlignMaxBlocks = (\d+);", source)
    assert {jitd.align_block_size_grid(1 << n) for n in range(0, 25)} <= set(range(1, int(most) + 1))


@pytest.mark.parametrize("numel", [-1, 2.5])
def test_a_numel_that_is_not_a_non_negative_integer_is_refused(numel):
    with pytest.raises(ValueError, match="numel must be a non-negative integer"):
        jitd.align_block_size_grid(numel)


def test_align_block_size_threads_is_the_one_block_paths_threads_up_to_512_then_512_or_1024():
    assert [jitd.align_block_size_threads(8, n) for n in (0, 1, 256, 257)] == [32, 32, 32, 64]
    assert [jitd.align_block_size_threads(256, n) for n in (1, 128, 2048)] == [256] * 3
    assert [jitd.align_block_size_threads(256, n) for n in (2049, 4096, 4097, 1 << 20)] == [512] * 4
    assert jitd.align_block_size_threads(512, 8) == 512
    assert [jitd.align_block_size_threads(e, 8) for e in (513, 1000, 1024)] == [1024] * 3


def test_align_block_size_threads_is_a_block_the_kernel_takes_for_every_expert_count():
    # The kernel's own check: a power of two from 32 to kAlignThreads, at
    # least num_experts.
    source = (SHIPPED_KERNELS / "moe" / "align_block_size.cu").read_text()
    [most] = re.findall(r"kAlignThreads = (\d+);", source)
    assert "num_experts <= block_threads" in source
    for experts in range(0, 1025):
        for numel in (0, 8, 2048, 1 << 24):
            t = jitd.align_block_size_threads(experts, numel)
            assert 32 <= t <= int(most) and t & (t - 1) == 0 and experts <= t, (experts, numel)


def test_align_block_size_threads_counts_the_entries_the_kernels_one_block_path_gives_a_thread():
    source = (SHIPPED_KERNELS / "moe" / "align_block_size.cu").read_text()
    [per_thread] = re.findall(r"#define SGLANG_ALIGN_ENTRIES_PER_THREAD (\d+)", source)
    assert jitd.launch_rules.ALIGN_ENTRIES_PER_THREAD == int(per_thread)


@pytest.mark.parametrize("experts", [-1, 1025, 2.5])
def test_an_expert_count_the_kernel_does_not_take_is_refused(experts):
    with pytest.raises(ValueError, match="num_experts must be an integer from 0 to 1024"):
        jitd.align_block_size_threads(experts, 8)


@pytest.mark.parametrize("numel", [-1, 2.5])
def test_a_numel_the_threads_rule_cannot_take_is_refused(numel):
    with pytest.raises(ValueError, match="numel must be a non-negative integer"):
        jitd.align_block_size_threads(256, numel)
