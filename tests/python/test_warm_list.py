"""KernelSet.write_spec: a server's declared kernels as the warm list
(`[[spec]]` TOML, docs/WARM-LIST.md) that `jitd warm --manifest FILE` reads
at image build time, checked with the real `jitd warm`, a daemon serving
the cache it filled, and `jitctl warm --manifest FILE`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jitd
import pytest
from conftest import SMALL_KERNELS, jitd_binary

HEADER = ("# {n} kernel instantiations, written by jitd.KernelSet.write_spec.\n"
          "# Warm a cache with them: jitd warm --cache-dir DIR --manifest FILE (docs/WARM-LIST.md).\n\n")


def declared() -> jitd.KernelSet:
    kernels = jitd.KernelSet()
    kernels.add("small.fill", dtype="fp32")
    kernels.add_product("small.scale", clamp=["off", "on"])
    kernels.add("small.fill", "sm_80", dtype="fp64", options="-lineinfo")
    return kernels


def jitd_warm(manifest: Path, cache_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(jitd_binary()), "warm", "--manifest", str(manifest), "--cache-dir", str(cache_dir),
                           "--kernels", str(SMALL_KERNELS), "--workers", "2", *args],
                          capture_output=True, text=True, timeout=300)


def test_write_spec_writes_one_table_per_instantiation_in_declaration_order(tmp_path):
    path = declared().write_spec(str(tmp_path / "kernels.toml"))
    assert path == tmp_path / "kernels.toml"
    assert path.read_text() == HEADER.format(n=4) + (
        '[[spec]]\nkernel = "small.fill"\nparams = { dtype = "fp32" }\n\n'
        '[[spec]]\nkernel = "small.scale"\nparams = { clamp = "off" }\n\n'
        '[[spec]]\nkernel = "small.scale"\nparams = { clamp = "on" }\n\n'
        '[[spec]]\nkernel = "small.fill"\nparams = { dtype = "fp64" }\narch = "sm_80"\noptions = ["-lineinfo"]\n')
    assert list(tmp_path.iterdir()) == [path]  # the temporary file beside it is gone


def test_jitd_warm_fills_a_cache_from_the_list_and_a_strict_start_then_compiles_nothing(make_daemon, tmp_path):
    kernels = declared()
    path = kernels.write_spec(tmp_path / "kernels.toml")
    daemon = make_daemon(start=False)
    first = jitd_warm(path, daemon.cache_dir)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "jitd warm: 4 instantiations into" in first.stdout
    assert ": 4 compiled, 0 already cached, 0 failed" in first.stdout
    again = jitd_warm(path, daemon.cache_dir)
    assert again.returncode == 0 and ": 0 compiled, 4 already cached, 0 failed" in again.stdout
    # A daemon serving the warmed directory has every one, the arch and
    # options written included.
    client = daemon.start().client()
    results = kernels.require(client)
    assert len(results) == 4 and all(result.cubin[:4] == b"\x7fELF" for result in results.values())
    assert results[jitd.KernelSpec("small.fill", {"dtype": "fp64"}, "sm_80", ["-lineinfo"])].arch == "sm_80"
    assert client.stats().compiles == 0


def test_archs_write_each_spec_without_one_for_each_arch(make_daemon, tmp_path):
    kernels = jitd.KernelSet()
    kernels.add("small.fill", dtype="fp32")
    kernels.add("small.scale", "sm_90", clamp="on")  # names its own: written once
    path = kernels.write_spec(tmp_path / "kernels.toml", archs=["sm_80", "sm_100"])
    text = path.read_text()
    assert text.count("[[spec]]") == 3 and 'arch = "sm_80"' in text and 'arch = "sm_100"' in text
    one = kernels.write_spec(tmp_path / "one.toml", archs="sm_80").read_text()  # a string is one arch
    assert one.count("[[spec]]") == 2 and 'arch = "sm_80"' in one and 'arch = "sm_90"' in one
    daemon = make_daemon(start=False)
    warm = jitd_warm(path, daemon.cache_dir)
    assert warm.returncode == 0 and ": 3 compiled, 0 already cached, 0 failed" in warm.stdout
    assert {entry.arch for entry in daemon.start().client().entries()} == {"sm_80", "sm_90", "sm_100"}


def test_strings_are_escaped_as_toml_requires_and_jitd_reads_them_back_exactly(tmp_path):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    kernel = 'small."odd"\\name\té\x01'
    options = ['-DQ="1"', "-DP=\\"]
    specs = [jitd.KernelSpec(kernel, {"n": "1\n2", "plain-key_1": "ü"}, "sm_90", options),
             jitd.KernelSpec("small.scale", {"a.b": "x"}), jitd.KernelSpec("small.scale", {"clamp": 'o"n\\'})]
    path = jitd.KernelSet(specs).write_spec(tmp_path / "odd.toml")
    text = path.read_text()
    assert 'params = { "a.b" = "x" }' in text and "plain-key_1 = " in text  # keys quoted only when needed
    assert tomllib.loads(text) == {"spec": [
        {"kernel": kernel, "params": {"n": "1\n2", "plain-key_1": "ü"}, "arch": "sm_90", "options": sorted(options)},
        {"kernel": "small.scale", "params": {"a.b": "x"}}, {"kernel": "small.scale", "params": {"clamp": 'o"n\\'}}]}
    # jitd's own parser reads the same strings: its failures quote them back.
    run = jitd_warm(path, tmp_path / "cache")
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"failed: {kernel}{{n=1\n2,plain-key_1=ü}}@sm_90[" in run.stdout  # kernel{params}@arch[options]
    assert "]: unknown kernel" in run.stdout
    assert "kernel small.scale has no parameter 'a.b'" in run.stdout  # one key, not a nested table
    assert 'clamp=o"n\\ is not allowed for kernel small.scale' in run.stdout


def test_an_empty_set_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match=r"declares no instantiations.*refuses a file without \[\[spec\]\] tables"):
        jitd.KernelSet().write_spec(tmp_path / "empty.toml")
    assert not (tmp_path / "empty.toml").exists()


def test_jitctl_warm_sends_the_list_to_a_running_daemon(make_daemon, tmp_path):
    jitctl = jitd_binary().parents[1] / "client" / "jitctl"
    if not jitctl.exists():
        pytest.skip(f"no jitctl at {jitctl}")
    daemon = make_daemon()
    path = declared().write_spec(tmp_path / "kernels.toml")
    run = subprocess.run([str(jitctl), "--endpoint", daemon.endpoint, "warm", "--manifest", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "warm: 4 instantiations in" in run.stdout and "4 compiled, 0 already cached, 0 failed" in run.stdout
    assert daemon.client().stats().compiles == 4
