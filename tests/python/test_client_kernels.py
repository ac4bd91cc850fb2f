"""get_kernel against a real daemon: compiled, then memory; the memo; the
modes (COMPILE, CACHED_ONLY hit and miss, PREFETCH); params, options, arch;
the manifest."""

from __future__ import annotations

import asyncio

import jitd
import jitd.aio
import pytest
from conftest import poll_until

FILL = "sglang::small::fill_kernel<float>"


def test_first_get_compiles_then_a_new_client_gets_it_from_memory(daemon):
    with daemon.client() as first:
        k = first.get_kernel("small.scale", clamp="on")
    assert k.origin in ("compiled", "memory")  # another test may have asked first
    assert k.source == k.origin  # the old name, kept
    assert k.cubin[:4] == b"\x7fELF"
    assert k.kernel == "small.scale" and k.params == {"clamp": "on"} and k.arch == "sm_90"
    assert k.symbols == {"sglang::small::scale_kernel<true>": k.lowered_name()}
    assert len(k.key) == 64 and k.nvrtc_version and k.compile_ms > 0
    with daemon.client() as second:
        again = second.get_kernel("small.scale", clamp="on")
    assert again.origin == "memory"
    assert (again.key, again.cubin, again.symbols) == (k.key, k.cubin, k.symbols)


def test_a_fresh_instantiation_is_compiled_once_and_the_memo_answers_after(make_daemon):
    daemon = make_daemon()
    client = daemon.client()
    k = client.get_kernel("small.fill", dtype="fp64")
    assert k.origin == "compiled"
    assert client.get_kernel("small.fill", dtype="fp64") is k
    assert client.get_kernel("small.fill", params={"dtype": "fp64"}) is k
    assert client.counters == jitd.ClientCounters(get_kernel_rpcs=1, memo_hits=2, retries=0)
    stats = client.stats()
    assert (stats.compiles, stats.requests, stats.entries) == (1, 1, 1)


def test_a_fresh_clients_cached_kernel_comes_over_the_local_path_and_is_counted(make_daemon):
    daemon = make_daemon()
    compiled = daemon.client().get_kernel("small.fill", dtype="fp32")
    fresh = daemon.client()
    hit = fresh.get_kernel("small.fill", dtype="fp32")
    assert hit.origin == "memory"
    assert (hit.key, hit.cubin, hit.symbols) == (compiled.key, compiled.cubin, compiled.symbols)
    assert fresh.counters == jitd.ClientCounters(get_kernel_rpcs=1, memo_hits=0, retries=0, local_answers=1)
    # A miss is asked again over gRPC, and counted once.
    assert fresh.get_kernel("small.fill", dtype="fp64").origin == "compiled"
    assert fresh.counters.get_kernel_rpcs == 2 and fresh.counters.local_answers == 1
    stats = fresh.stats()
    assert (stats.requests, stats.memory_hits, stats.compiles) == (3, 1, 2)


def test_with_the_local_path_off_every_request_goes_over_grpc(make_daemon):
    daemon = make_daemon()
    daemon.client().get_kernel("small.fill", dtype="fp32")
    with jitd.Client(daemon.endpoint, local_path=False) as grpc_only:
        assert grpc_only.get_kernel("small.fill", dtype="fp32").origin == "memory"
        assert grpc_only.counters.local_answers == 0 and grpc_only.counters.get_kernel_rpcs == 1


def test_cached_only_hit_returns_the_entry_and_a_miss_is_not_found_without_compiling(make_daemon):
    daemon = make_daemon()
    warmer, strict = daemon.client(), daemon.client()
    compiled = warmer.get_kernel("small.fill", dtype="fp32")
    hit = strict.get_kernel("small.fill", dtype="fp32", mode="cached_only")
    assert hit.key == compiled.key and hit.origin == "memory"
    with pytest.raises(jitd.NotFound) as miss:
        strict.get_kernel("small.fill", dtype="fp64", mode=jitd.Mode.CACHED_ONLY)
    assert "is not in the cache" in miss.value.message
    assert "CACHED_ONLY never compiles" in miss.value.message
    stats = strict.stats()
    assert (stats.compiles, stats.cached_only_misses) == (1, 1)


def test_cached_only_answers_from_the_memo_without_an_rpc(client):
    k = client.get_kernel("small.fill", dtype="fp32")
    assert client.get_kernel("small.fill", dtype="fp32", mode="cached_only") is k
    assert client.counters.get_kernel_rpcs == 1


def test_prefetch_answers_at_once_and_the_kernel_is_ready_later(make_daemon):
    daemon = make_daemon()
    client = daemon.client()
    first = client.get_kernel("small.block_sum", threads=512, mode="prefetch")
    assert first.origin == "none" and first.cubin == b"" and not first.ready
    # Not memoized: the next request asks the daemon again.
    assert poll_until(lambda: client.get_kernel("small.block_sum", threads=512, mode="prefetch").origin != "none")
    ready = client.get_kernel("small.block_sum", threads=512, mode="cached_only")
    assert ready.cubin[:4] == b"\x7fELF"
    assert client.stats().prefetches == 1


def test_params_take_ints_bools_and_dtype_objects(client):
    class TorchLikeDtype:
        def __str__(self) -> str:
            return "torch.float32"

    by_dtype = client.get_kernel("small.fill", dtype=TorchLikeDtype())
    assert by_dtype.params == {"dtype": "fp32"}
    assert client.get_kernel("small.block_sum", threads=128).params == {"threads": "128"}
    assert jitd.KernelSpec.of("k", flag=True).params == (("flag", "true"),)
    with pytest.raises(TypeError, match="not a str, int, bool or dtype"):
        client.get_kernel("small.fill", dtype=1.5)


def test_an_allowed_option_is_a_different_instantiation(client):
    plain = client.get_kernel("small.fill", dtype="fp32")
    with_lineinfo = client.get_kernel("small.fill", dtype="fp32", options=["-lineinfo"])
    assert with_lineinfo.key != plain.key
    assert with_lineinfo.options == ("-lineinfo",)
    assert client.get_kernel("small.fill", dtype="fp32", options=["-lineinfo", "-lineinfo"]) is with_lineinfo


def test_an_explicit_arch_is_compiled_for_and_memoized_apart(client):
    sm80 = client.get_kernel("small.fill", "sm_80", dtype="fp32")
    sm90 = client.get_kernel("small.fill", dtype="fp32")
    assert (sm80.arch, sm90.arch) == ("sm_80", "sm_90")
    assert sm80.key != sm90.key


def test_a_client_wide_arch_applies_to_requests_that_name_none(daemon):
    with daemon.client(arch="sm_100") as client:
        assert client.get_kernel("small.fill", dtype="fp32").arch == "sm_100"


def test_lowered_name_by_expression_and_its_errors(client):
    k = client.get_kernel("small.fill", dtype="fp32")
    assert k.lowered_name(FILL) == k.lowered_name() == k.symbols[FILL]
    assert k.lowered_name().startswith("_Z")
    with pytest.raises(KeyError, match="its entry points: sglang::small::fill_kernel<float>"):
        k.lowered_name("fill_kernel")


def test_the_cubin_writes_to_a_file(client, tmp_path):
    k = client.get_kernel("small.fill", dtype="fp32")
    assert k.write(tmp_path / "k.cubin").read_bytes() == k.cubin
    assert f"{len(k.cubin)} bytes, origin=" in repr(k) and "…" in repr(k)  # never the bytes themselves
    assert repr(k).startswith("KernelResult(small.fill{dtype=fp32}@sm_90, ")


def test_kernels_lists_the_manifest(client):
    manifest = client.kernels()
    assert manifest.names == ["small.fill", "small.scale", "small.broken", "small.block_sum"]
    assert manifest.default_arch == "sm_90" and "sm_100" in manifest.supported_archs
    scale = manifest["small.scale"]
    assert scale.params == [jitd.KernelParam("clamp", "enum", ["off", "on"], "off")]
    assert scale.instantiations == 2 and scale.description
    assert (scale.signature, scale.launch) == ("", "")  # not declared for it
    block_sum = manifest["small.block_sum"]
    assert block_sum.signature == "(const float* in, float* out)"
    assert block_sum.launch.startswith("block (threads,1,1)")
    assert [k.name for k in client.kernels("small.f*")] == ["small.fill"]
    with pytest.raises(KeyError):
        manifest["small.nope"]


def test_specs_are_canonical_like_the_cpp_clients():
    spec = jitd.KernelSpec("k.x", {"b": "2", "a": "1"}, "sm_90", ("-lineinfo", "-DX=1", "-lineinfo"))
    assert spec.params == (("a", "1"), ("b", "2"))
    assert spec.options == ("-DX=1", "-lineinfo")
    assert spec.canonical() == "k.x{a=1,b=2}@sm_90[-DX%3D1,-lineinfo]"
    assert jitd.KernelSpec("k", {"v": "a,b"}).canonical() == "k{v=a%2Cb}@"
    assert hash(spec) == hash(jitd.KernelSpec("k.x", [("a", 1), ("b", 2)], "sm_90", ("-lineinfo", "-DX=1")))
    # The one spelling of an instantiation, in messages and reprs too.
    # str(): the same spelling unescaped, as the daemon's messages write it.
    assert str(spec) == "k.x{a=1,b=2}@sm_90[-DX=1,-lineinfo]" and repr(spec) == f"KernelSpec({spec})"
    assert str(jitd.KernelSpec("small.scale")) == "small.scale{}"


def test_several_archs_come_as_one_fatbin_and_the_fleet_set_by_name(make_daemon):
    daemon = make_daemon(args=["--fleet-archs", "sm_90,sm_100"])
    client = daemon.client()
    fat = client.get_kernel("small.fill", archs=["sm_80", 100, "compute_80"], dtype="fp32")
    assert fat.fatbin_archs == ("sm_80", "sm_100", "compute_80")
    assert fat.arch == "sm_80+sm_100+compute_80" and fat.origin == "compiled"
    assert fat.cubin[:4] == b"\x50\xed\x55\xba"  # the fatbin magic, little-endian
    assert fat.symbols == {FILL: fat.lowered_name()}
    ptx = client.get_kernel("small.fill", "compute_80", dtype="fp32")
    assert ptx.cubin.endswith(b"\0") and b".target sm_80" in ptx.cubin and ptx.fatbin_archs == ()
    fleet = client.get_kernel("small.fill", fleet=True, dtype="fp32")
    assert fleet.fatbin_archs == ("sm_90", "sm_100", "compute_90")
    spec = jitd.KernelSpec.of("small.fill", archs=["sm_80", "compute_80"], dtype="fp32")
    assert spec.canonical() == "small.fill{dtype=fp32}@%sm_80,compute_80"
    assert jitd.KernelSpec.of("small.fill", fleet=True).canonical() == "small.fill{}@%%fleet"
    assert str(spec) == "small.fill{dtype=fp32}@sm_80+compute_80"
    with pytest.raises(ValueError, match="not both"):
        jitd.KernelSpec.of("small.fill", "sm_90", archs=["sm_80"])
    with pytest.raises(ValueError, match="fleet set"):
        jitd.KernelSpec.of("small.fill", "sm_90", fleet=True)
    assert client.stats().fleet_targets == ("sm_90", "sm_100", "compute_90")


def write_generated_tree(directory, kernels: int) -> None:
    """A kernel tree of ``kernels`` kernels without params, one source."""
    directory.mkdir(parents=True)
    (directory / "k.cu").write_text("namespace sglang { template <int N> __global__ void k() {} }\n")
    (directory / "kernels.toml").write_text("schema = 1\n" + "".join(
        f'[[kernel]]\nname = "gen.k{k}"\nsource = "k.cu"\nname_expressions = ["sglang::k<{k}>"]\n'
        for k in range(kernels)))


def test_kernels_follows_every_page_of_a_listing_longer_than_one(make_daemon, tmp_path):
    # 4200 kernels: the daemon answers 4096 at a time, the client asks on.
    write_generated_tree(tmp_path / "a", 2100)
    write_generated_tree(tmp_path / "b", 2100)
    daemon = make_daemon(kernels=f"a={tmp_path / 'a'}", args=["--kernels", f"b={tmp_path / 'b'}"])
    with daemon.client() as client:
        manifest = client.kernels()
        assert len(manifest.kernels) == 4200
        assert len({k.name for k in manifest}) == 4200
        assert manifest.kernels[-1].name == "b/gen.k2099"
        assert [k.name for k in client.kernels("b/gen.k209?")] == [f"b/gen.k{n}" for n in range(2090, 2100)]

    async def listed() -> int:
        async with jitd.aio.Client(daemon.endpoint) as aio_client:
            return len((await aio_client.kernels()).kernels)

    assert asyncio.run(listed()) == 4200
