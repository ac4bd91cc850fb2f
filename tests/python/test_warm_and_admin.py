"""warm with progress (callback and iterator), and the CacheAdmin calls:
stats, entries, evict, verify."""

from __future__ import annotations

import dataclasses

import jitd
import pytest
from jitd._proto.jitd.v1 import cache_admin_pb2


def test_warm_reports_each_instantiation_in_order_with_running_totals(make_daemon):
    client = make_daemon().client()
    client.get_kernel("small.fill", dtype="fp32")  # cached before the warm-up
    seen: list[jitd.WarmProgress] = []
    result = client.warm([jitd.KernelSpec("small.fill", {"dtype": "fp32"}), ("small.fill", {"dtype": "fp64"}),
                          "small.scale"], on_progress=seen.append)
    assert [p.done for p in seen] == [1, 2, 3] and {p.total for p in seen} == {3}
    assert result.items == seen
    assert (result.total, result.compiled, result.cached, result.failed) == (3, 2, 1, 0)
    by_kernel = {str(p.spec): p for p in seen}
    assert by_kernel["small.fill{dtype=fp32}@sm_90"].outcome == "cached"
    assert by_kernel["small.fill{dtype=fp64}@sm_90"].outcome == "compiled"
    assert by_kernel["small.fill{dtype=fp64}@sm_90"].compile_ms > 0
    assert by_kernel["small.scale{}@sm_90"].outcome == "compiled"  # the spec as asked (clamp defaults to off)
    assert all(len(p.key) == 64 for p in seen)
    assert result.ok and "3 instantiations: 2 compiled, 1 cached, 0 failed" in str(result)
    # Warm again: everything cached now.
    assert client.warm([("small.fill", {"dtype": "fp64"})]).cached == 1


def test_warm_all_reports_a_failed_compile_without_raising(make_daemon):
    client = make_daemon().client()
    result = client.warm(None, archs=["sm_90"])
    assert result.total == 9  # fill 2, scale 2, broken 1, block_sum 4
    assert result.failed == 1 and not result.ok
    [failure] = result.failures
    assert failure.spec.kernel == "small.broken" and failure.outcome == "failed"
    assert "undeclared_in_broken_kernel" in failure.error
    assert "failed   small.broken{}@sm_90: FAILED_PRECONDITION" in str(failure)
    assert client.stats().entries == 8


def test_warm_iter_yields_progress_and_leaving_early_cancels_the_rest(make_daemon):
    client = make_daemon().client()
    specs = [("small.fill", {"dtype": "fp32"})] + [("small.block_sum", {"threads": t}) for t in (128, 256, 512, 1024)]
    iterator = client.warm_iter(specs, concurrency=1)
    first = next(iterator)
    assert first.done == 1 and first.total == 5
    iterator.close()  # the caller is gone: the daemon stops warming
    stats = client.stats()
    assert stats.entries < 5


def test_warm_of_an_unknown_kernel_reports_it_failed(client):
    result = client.warm([("small.nope", {})])
    assert result.failed == 1
    assert "unknown kernel 'small.nope'" in result.failures[0].error


def test_warm_rejects_a_bare_string_that_is_not_all(client):
    with pytest.raises(jitd.InvalidArgument, match="pass None or 'all'"):
        client.warm("small.fill")


def test_stats_count_requests_hits_and_compiles(make_daemon):
    client = make_daemon().client()
    before = client.stats()
    assert before.entries == 0 and before.workers == 2 and before.kernels == 4
    assert before.nvrtc_version and len(before.kernels_fingerprint) == 64 and before.cache_dir.endswith("cache")
    assert [(t["name"], t["serving"], t["kernels"]) for t in before.trees] == [("", True, 4)]
    client.get_kernel("small.fill", dtype="fp32")
    client.clear_memo()
    client.get_kernel("small.fill", dtype="fp32")
    after = client.stats()
    assert (after.requests, after.compiles, after.memory_hits, after.entries) == (2, 1, 1, 1)
    assert after.bytes > 0 and after.as_dict()["entries"] == 1


def test_stats_has_a_field_for_every_field_of_the_proto():
    names = [f.name for f in cache_admin_pb2.StatsResponse.DESCRIPTOR.fields]
    assert [f.name for f in dataclasses.fields(jitd.Stats)] == names


def test_entries_filter_by_glob_and_arch_and_limit(make_daemon):
    client = make_daemon().client()
    fill = client.get_kernel("small.fill", dtype="fp32")
    client.get_kernel("small.fill", "sm_80", dtype="fp32")
    client.get_kernel("small.scale")
    everything = client.entries()
    assert everything.total == 3 and len(everything) == 3
    fills = client.entries("small.fill")
    assert {e.arch for e in fills} == {"sm_80", "sm_90"}
    [entry] = client.entries("small.fill", arch="sm_90")
    assert (entry.key, entry.kernel, entry.params, entry.pinned) == (fill.key, "small.fill", "dtype=fp32", False)
    assert entry.size_bytes > len(fill.cubin) and entry.created_unix_ms > 0 and entry.nvrtc_version
    limited = client.entries(limit=1)
    assert len(limited) == 1 and limited.total == 3
    assert entry.options == ()


def test_entries_that_differ_only_in_options_say_which_options(make_daemon):
    client = make_daemon().client()
    client.get_kernel("small.fill", dtype="fp32")
    client.get_kernel("small.fill", dtype="fp32", options="-DTILE=4")
    assert sorted(e.options for e in client.entries("small.fill")) == [(), ("-DTILE=4",)]


def test_an_entry_has_a_field_for_every_field_of_the_proto():
    names = [f.name for f in cache_admin_pb2.EntryInfo.DESCRIPTOR.fields]
    assert sorted(f.name for f in dataclasses.fields(jitd.Entry)) == sorted(names)


def test_evict_dry_run_reports_and_a_real_run_removes(make_daemon):
    # The daemon's own user may evict: the client reads the token the daemon
    # wrote beside its socket.
    daemon = make_daemon()
    client = daemon.client()
    fill = client.get_kernel("small.fill", dtype="fp32")
    client.get_kernel("small.fill", dtype="fp64")
    client.get_kernel("small.scale")
    dry = client.evict(kernel_glob="small.fill", dry_run=True)
    assert dry.dry_run and dry.evicted_entries == 2 and dry.remaining_entries == 1  # what a real run leaves
    assert client.stats().entries == 3
    by_key = client.evict(keys=[fill.key])
    assert [e.key for e in by_key.evicted] == [fill.key] and by_key.remaining_entries == 2
    everything = client.evict(max_bytes=0)
    assert everything.evicted_entries == 2 and everything.remaining_bytes == 0
    assert client.entries().total == 0


def test_evict_needs_a_filter_and_parses_sizes_and_durations(client):
    with pytest.raises(jitd.InvalidArgument):
        client.evict()
    assert client.evict(older_than="7d", dry_run=True).dry_run
    assert client.evict(max_bytes="10G", dry_run=True).evicted_entries == 0
    with pytest.raises(jitd.InvalidArgument, match="not a byte size"):
        client.evict(max_bytes="10 parsecs")
    with pytest.raises(jitd.InvalidArgument, match="not a duration"):
        client.evict(older_than="soon")


def test_verify_checks_every_entry(make_daemon):
    client = make_daemon().client()
    client.get_kernel("small.fill", dtype="fp32")
    report = client.verify()
    assert (report.checked, report.ok, report.corrupt, report.problems) == (1, 1, 0, [])
    assert report.index_integrity == "ok"
    assert client.verify(repair=True).repaired == 0


def test_health_says_serving(client):
    assert client.health() == "SERVING"
    assert client.health("jitd.v1.Compiler") == "SERVING"
    with pytest.raises(jitd.NotFound):
        client.health("no.such.Service")
