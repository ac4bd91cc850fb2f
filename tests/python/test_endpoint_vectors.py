"""The Python client's endpoint rule against tests/vectors/endpoints.tsv, the
cases the C++ rule (jitd/base/endpoint.h) is tested against in
tests/base/test_base_endpoint.cpp: the two must judge every line alike."""

from __future__ import annotations

from pathlib import Path

import pytest

import jitd
from jitd import _endpoint

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "endpoints.tsv"


def read_vectors() -> list[tuple[int, str, str]]:
    cases = []
    for n, line in enumerate(VECTORS.read_text().split("\n"), start=1):
        if not line or line.startswith("#"):
            continue
        use, verdict, text = line.split("\t", 2)
        if use == "connect":  # the client only connects
            cases.append((n, verdict, text))
    return cases


CASES = read_vectors()


def test_the_shared_file_is_read():
    assert len(CASES) >= 25, VECTORS


@pytest.mark.parametrize("line,verdict,text", CASES, ids=[f"line{n}" for n, _, _ in CASES])
def test_every_connect_case_is_judged_as_the_file_says(line, verdict, text):
    if verdict == "ok":
        _endpoint.validate_endpoint(text)
        return
    assert verdict.startswith("bad:"), f"endpoints.tsv:{line}: verdict {verdict}"
    with pytest.raises(jitd.InvalidArgument) as caught:
        _endpoint.validate_endpoint(text)
    assert verdict[4:] in str(caught.value), f"endpoints.tsv:{line} {text!r}: {caught.value}"
