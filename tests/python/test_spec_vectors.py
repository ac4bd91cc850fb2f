"""The Python client's KernelSpec.canonical() against
tests/vectors/canonical_specs.tsv, the cases the C++ client's CanonicalSpec
is tested against in tests/client/test_client_kernel_spec.cpp: both must
give every line's canonical text."""

from __future__ import annotations

from pathlib import Path

import pytest

import jitd

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "canonical_specs.tsv"


def read_vectors() -> list[tuple[int, list[str]]]:
    cases = []
    for n, line in enumerate(VECTORS.read_text().split("\n"), start=1):
        if not line or line.startswith("#"):
            continue
        cols = line.split("\t")
        assert len(cols) >= 4 and len(cols) % 2 == 0, f"canonical_specs.tsv:{n}: {line!r}"
        cases.append((n, cols))
    return cases


CASES = read_vectors()


def test_the_shared_file_is_read():
    assert len(CASES) >= 15, VECTORS


@pytest.mark.parametrize("line,cols", CASES, ids=[f"line{n}" for n, _ in CASES])
def test_every_case_has_the_canonical_text_the_file_says(line, cols):
    canonical, kernel, arch, options = cols[:4]
    params = list(zip(cols[4::2], cols[5::2]))
    spec = jitd.KernelSpec(kernel, params, arch, options.split())
    assert spec.canonical() == canonical, f"canonical_specs.tsv:{line}"
