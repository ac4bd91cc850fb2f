"""jitd.rmsnorm_threads: the measured choice of norm.rmsnorm's threads."""

from __future__ import annotations

import tomllib

import pytest

import jitd
from conftest import SHIPPED_KERNELS


def test_rmsnorm_threads_keeps_about_four_packs_per_thread_from_128_to_1024():
    assert [jitd.rmsnorm_threads(d) for d in (1, 2048, 3072, 4096)] == [128] * 4
    assert [jitd.rmsnorm_threads(d) for d in (4097, 5120, 8192)] == [256] * 3
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
