"""KernelSet: declaring a server's kernels, warming them in one call, and the
strict start (CACHED_ONLY, crash on miss)."""

from __future__ import annotations

import jitd
import pytest


def declared() -> jitd.KernelSet:
    kernels = jitd.KernelSet()
    kernels.add("small.fill", dtype="fp32")
    kernels.add_product("small.scale", clamp=["off", "on"])
    return kernels


def test_declaring_by_add_by_product_and_by_decorator():
    kernels = jitd.KernelSet()
    spec = kernels.add("small.fill", dtype="fp32")
    assert spec == jitd.KernelSpec("small.fill", {"dtype": "fp32"})
    assert kernels.add("small.fill", params={"dtype": "fp32"}) == spec  # a set: declared once
    combos = kernels.add_product("small.block_sum", threads=[128, 256], options=["-lineinfo"])
    assert [s.param_dict for s in combos] == [{"threads": "128"}, {"threads": "256"}]

    @kernels.kernel("small.scale", clamp=("off", "on"))
    def scale(out, x, factor):
        return "launched"

    assert scale(None, None, 2.0) == "launched"
    assert [str(s) for s in scale.jitd_specs] == ["small.scale{clamp=off}", "small.scale{clamp=on}"]
    assert len(kernels) == 5 and spec in kernels
    with pytest.raises(TypeError, match="add_product"):
        kernels.add("small.fill", dtype=["fp32", "fp64"])


def test_the_module_level_decorator_declares_into_the_default_set():
    @jitd.kernel("small.fill", dtype="fp64")
    def fill(out, value):
        pass

    assert jitd.KernelSpec("small.fill", {"dtype": "fp64"}) in jitd.default_kernel_set()


def test_warm_compiles_what_is_missing_with_a_progress_line_each(make_daemon, capsys):
    client = make_daemon().client()
    result = declared().warm(client, progress=True)
    assert (result.total, result.compiled, result.cached) == (3, 3, 0)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(line.startswith("jitd: [") and "compiled" in line for line in lines)
    seen: list = []
    assert declared().warm(client, progress=seen.append).cached == 3
    assert [p.done for p in seen] == [1, 2, 3]


def test_warm_for_several_archs_warms_each_spec_for_each(make_daemon):
    client = make_daemon().client()
    result = declared().warm(client, archs=["sm_80", "sm_90"])
    assert result.total == 6
    assert {p.spec.arch for p in result.items} == {"sm_80", "sm_90"}


def test_warm_raises_warm_failed_naming_what_did_not_compile(client):
    kernels = declared()
    kernels.add("small.broken")
    with pytest.raises(jitd.WarmFailed) as error:
        kernels.warm(client)
    assert "1 of 4 kernel instantiations failed to compile" in error.value.message
    assert "small.broken" in error.value.message
    assert [f.spec.kernel for f in error.value.failures] == ["small.broken"]
    assert "undeclared_in_broken_kernel" in error.value.log
    assert isinstance(error.value, jitd.CompileError)


def test_strict_start_compiles_nothing_and_names_every_missing_instantiation(make_daemon):
    daemon = make_daemon()
    client = daemon.client()
    client.get_kernel("small.scale", clamp="on")  # one of three is cached
    with pytest.raises(jitd.KernelsMissing) as error:
        declared().warm(client, strict=True)
    assert sorted(str(s) for s in error.value.missing) == ["small.fill{dtype=fp32}", "small.scale{clamp=off}"]
    assert "2 of 3 kernel instantiations are not in jitd's cache" in error.value.message
    # It says how to warm the image from the same declarations.
    assert ("write this set's warm list with KernelSet.write_spec(FILE), then run "
            "`jitd warm --cache-dir DIR --manifest FILE`") in error.value.message
    assert isinstance(error.value, jitd.NotFound)
    assert client.stats().compiles == 1  # only the one this test asked for


def test_strict_start_after_a_warm_up_fetches_everything_into_the_memo(make_daemon):
    daemon = make_daemon()
    declared().warm(daemon.client())
    client = daemon.client()
    results = declared().require(client)
    assert len(results) == 3 and all(r.cubin[:4] == b"\x7fELF" for r in results.values())
    rpcs = client.counters.get_kernel_rpcs
    assert client.get_kernel("small.scale", clamp="off") is results[jitd.KernelSpec("small.scale", {"clamp": "off"})]
    assert client.counters.get_kernel_rpcs == rpcs  # the first real request is free
    summary = declared().warm(client, strict=True)
    assert (summary.total, summary.cached, summary.compiled) == (3, 3, 0)


def test_jitd_strict_in_the_environment_makes_warm_strict(make_daemon, monkeypatch):
    client = make_daemon().client()
    monkeypatch.setenv("JITD_STRICT", "1")
    with pytest.raises(jitd.KernelsMissing):
        declared().warm(client)
    assert declared().warm(client, strict=False).compiled == 3  # an explicit argument wins
    assert declared().warm(client).cached == 3


def test_strict_start_raises_an_unknown_kernel_as_itself(client):
    kernels = jitd.KernelSet()
    kernels.add("small.fil", dtype="fp32")
    with pytest.raises(jitd.NotFound, match="did you mean small.fill") as error:
        kernels.require(client)
    assert not isinstance(error.value, jitd.KernelsMissing)
