"""jitd.aio.Client against real daemons: the same results, memo, errors and
messages as jitd.Client, as coroutines; one shared RPC for concurrent
first calls, cancelled when all of its callers are; warm-up as an async
iterator; the CacheAdmin calls; a client used from two event loops.
(asyncio.run in each test: pytest-asyncio is not a dependency.)"""

from __future__ import annotations

import asyncio
import pickle

import grpc
import jitd
import jitd.aio
import pytest


async def poll_until_async(condition, timeout: float = 30.0, interval: float = 0.02) -> bool:
    """Whether ``await condition()`` became true within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await condition():
            return True
        await asyncio.sleep(interval)
    return bool(await condition())


def test_get_kernel_answers_what_the_sync_client_does_and_remembers_it(make_daemon):
    daemon = make_daemon()

    async def main() -> jitd.KernelResult:
        async with jitd.aio.Client(daemon.endpoint) as client:
            await client.wait_until_serving(timeout=10)
            assert await client.health() == "SERVING"
            k = await client.get_kernel("small.fill", dtype="fp32")
            assert isinstance(k, jitd.KernelResult) and k.origin == "compiled" and k.cubin[:4] == b"\x7fELF"
            assert await client.get_kernel("small.fill", params={"dtype": "fp32"}) is k
            assert await client.get(jitd.KernelSpec("small.fill", {"dtype": "fp32"}), mode="cached_only") is k
            assert client.counters == jitd.ClientCounters(get_kernel_rpcs=1, memo_hits=2, retries=0)
            with pytest.raises(jitd.NotFound, match="CACHED_ONLY never compiles"):
                await client.get_kernel("small.fill", dtype="fp64", mode="cached_only")
            early = await client.get_kernel("small.block_sum", threads=128, mode="prefetch")
            assert early.origin == "none" and not early.ready  # not remembered:
            assert (await client.get_kernel("small.block_sum", threads=128)).ready
            return k

    k = asyncio.run(main())
    with daemon.client() as sync:
        same = sync.get_kernel("small.fill", dtype="fp32")
    assert (same.key, same.cubin, same.symbols, same.arch) == (k.key, k.cubin, k.symbols, k.arch)


def test_concurrent_first_calls_share_one_rpc(make_daemon):
    daemon = make_daemon()

    async def main() -> None:
        client = jitd.aio.Client(daemon.endpoint)
        results = await asyncio.gather(*[client.get_kernel("small.block_sum", threads=256) for _ in range(6)])
        assert all(result is results[0] for result in results)
        assert client.counters == jitd.ClientCounters(get_kernel_rpcs=1, memo_hits=5, retries=0)
        assert (await client.stats()).compiles == 1
        await client.close()

    asyncio.run(main())


def test_a_shared_rpc_is_cancelled_only_when_every_caller_was(make_daemon):
    daemon = make_daemon()

    async def main() -> None:
        client = jitd.aio.Client(daemon.endpoint)
        callers = [asyncio.ensure_future(client.get_kernel("small.block_sum", threads=1024)) for _ in range(2)]
        assert await poll_until_async(lambda: _in_flight(client, 1))
        callers[0].cancel()  # one caller leaves: the other still waits for the same RPC
        with pytest.raises(asyncio.CancelledError):
            await callers[0]
        result = await callers[1]
        assert result.ready and client.counters.get_kernel_rpcs == 1
        # Both callers of a new instantiation leave: the daemon learns nobody waits.
        callers = [asyncio.ensure_future(client.get_kernel("small.block_sum", threads=512)) for _ in range(2)]
        assert await poll_until_async(lambda: _in_flight(client, 1))
        for caller in callers:
            caller.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
        assert await poll_until_async(lambda: _abandoned(client, 1))
        await client.close()

    asyncio.run(main())


async def _in_flight(client: jitd.aio.Client, count: int) -> bool:
    return (await client.stats()).compiles_in_flight == count


async def _abandoned(client: jitd.aio.Client, count: int) -> bool:
    stats = await client.stats()
    return stats.abandoned == count and stats.compiles_in_flight == 0


def test_errors_are_the_sync_clients_classes_and_messages(make_daemon, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    daemon = make_daemon(args=["--admin-token-file", str(token)])
    sync = daemon.client()
    nobody = f"unix:{tmp_path}/nobody.sock"

    async def main() -> None:
        client = jitd.aio.Client(daemon.endpoint)
        for call, sync_call, kind in [
            (lambda: client.get_kernel("small.fil", dtype="fp32"), lambda: sync.get_kernel("small.fil", dtype="fp32"),
             jitd.NotFound),
            (lambda: client.get_kernel("small.fill", dtype="bf16"), lambda: sync.get_kernel("small.fill", dtype="bf16"),
             jitd.InvalidArgument),
            (lambda: client.evict(kernel_glob="*"), lambda: sync.evict(kernel_glob="*"), jitd.PermissionDenied),
            (lambda: jitd.aio.Client(nobody, retries=0).stats(), lambda: jitd.Client(nobody, retries=0).stats(),
             jitd.Unavailable),
        ]:
            with pytest.raises(kind) as error:
                await call()
            with pytest.raises(kind) as sync_error:
                sync_call()
            assert (error.value.code, error.value.message) == (sync_error.value.code, sync_error.value.message)
        with pytest.raises(jitd.CompileError) as error:
            await client.get_kernel("small.broken")
        assert "undeclared_in_broken_kernel" in error.value.log
        with pytest.raises(jitd.CompileError) as sync_error:  # the daemon remembers the failure, saying so
            sync.get_kernel("small.broken")
        assert sync_error.value.message.endswith(error.value.message)
        assert "debug_error_string" not in str(error.value)
        with pytest.raises(jitd.DeadlineExceeded) as late:
            await client.get_kernel("small.block_sum", threads=128, timeout=0.3)
        assert "small.block_sum" in late.value.message and "Deadline Exceeded" not in late.value.message
        admin = jitd.aio.Client(daemon.endpoint, admin_token_file=token)
        assert (await admin.evict(kernel_glob="small.nothing*")).evicted_entries == 0
        assert (await admin.verify(repair=True)).corrupt == 0

    asyncio.run(main())


def test_unavailable_is_retried_with_backoff_then_raised(tmp_path):
    async def main() -> jitd.aio.Client:
        client = jitd.aio.Client(f"unix:{tmp_path}/nobody.sock")
        with pytest.raises(jitd.Unavailable, match="no socket at"):
            await client.stats()
        with pytest.raises(jitd.DeadlineExceeded, match="was not serving within 0.2 s; last: cannot reach jitd"):
            await client.wait_until_serving(timeout=0.2)
        return client

    assert asyncio.run(main()).counters.retries == 4  # 5 attempts, as jitd.Client


def test_warm_streams_progress_and_the_admin_calls_answer_typed_results(make_daemon):
    daemon = make_daemon()

    async def main() -> None:
        client = jitd.aio.Client(daemon.endpoint)
        seen: list[jitd.WarmProgress] = []

        async def record(progress: jitd.WarmProgress) -> None:  # a coroutine callback is awaited
            seen.append(progress)

        result = await client.warm([("small.fill", {"dtype": "fp32"}), "small.scale", "small.broken"],
                                   on_progress=record)
        assert isinstance(result, jitd.WarmResult)
        assert (result.total, result.compiled, result.failed) == (3, 2, 1) and result.items == seen
        assert [p.done for p in seen] == [1, 2, 3]
        assert [f.spec.kernel for f in result.failures] == ["small.broken"]
        iterated = [p async for p in client.warm_iter([("small.fill", {"dtype": "fp32"})], archs="sm_80")]
        assert [(str(p.spec), p.outcome) for p in iterated] == [("small.fill{dtype=fp32}@sm_80", "compiled")]
        stats = await client.stats()
        assert isinstance(stats, jitd.Stats) and (stats.entries, stats.compiles) == (3, 4)  # broken counts
        entries = await client.entries("small.fill")
        assert isinstance(entries, jitd.Entries) and entries.total == 2
        assert {entry.arch for entry in entries} == {"sm_80", "sm_90"}
        manifest = await client.kernels("small.*")
        assert isinstance(manifest, jitd.Manifest) and "small.block_sum" in manifest
        dry = await client.evict(kernel_glob="small.fill", include_pinned=True, dry_run=True)
        assert isinstance(dry, jitd.EvictResult) and dry.dry_run and dry.evicted_entries == 2
        with pytest.raises(jitd.InvalidArgument, match="pass None or 'all'"):
            await client.warm("small.fill")

    asyncio.run(main())


def test_a_client_follows_the_event_loop_and_pickles_to_its_settings(daemon):
    client = jitd.aio.Client(daemon.endpoint, timeout=30, retries=2, arch="sm_90")
    first = asyncio.run(client.get_kernel("small.fill", dtype="fp32"))
    # A second asyncio.run is another loop: a connection of its own, the memo kept.
    assert asyncio.run(client.get_kernel("small.fill", dtype="fp32")) is first
    assert asyncio.run(client.health()) == "SERVING"
    assert client.counters.get_kernel_rpcs == 1
    copy = pickle.loads(pickle.dumps(client))
    assert type(copy) is jitd.aio.Client and copy._settings == client._settings
    assert repr(copy) == f"jitd.aio.Client({daemon.endpoint!r})"
    assert asyncio.run(copy.get_kernel("small.fill", dtype="fp32")).key == first.key


def test_aio_errors_are_grpc_aio_errors_mapped(tmp_path):
    # grpc.aio raises AioRpcError, a grpc.RpcError: mapped by the same code.
    error = grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                 details="failed to connect to all addresses; last error: UNKNOWN: "
                                         "ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused",
                                 debug_error_string="{created_time:...}")
    mapped = jitd.errors.from_rpc_error(error, "127.0.0.1:1")
    assert isinstance(mapped, jitd.Unavailable)
    assert mapped.message.startswith("cannot reach jitd at 127.0.0.1:1: connection refused: nothing accepts ")
    assert "created_time" not in str(mapped)


def test_a_cached_kernel_comes_over_the_local_path_and_a_miss_over_grpc(make_daemon):
    daemon = make_daemon()
    with daemon.client(local_path=False) as sync:
        compiled = sync.get_kernel("small.fill", dtype="fp32")

    async def main() -> None:
        async with jitd.aio.Client(daemon.endpoint) as client:
            hit = await client.get_kernel("small.fill", dtype="fp32")
            assert hit.origin == "memory"
            assert (hit.key, hit.cubin, hit.symbols) == (compiled.key, compiled.cubin, compiled.symbols)
            assert client.counters == jitd.ClientCounters(get_kernel_rpcs=1, memo_hits=0, retries=0,
                                                          local_answers=1)
            assert (await client.get_kernel("small.fill", dtype="fp64")).origin == "compiled"
            assert client.counters.get_kernel_rpcs == 2 and client.counters.local_answers == 1
        async with jitd.aio.Client(daemon.endpoint, local_path=False) as grpc_only:
            assert (await grpc_only.get_kernel("small.fill", dtype="fp32")).origin == "memory"
            assert grpc_only.counters.local_answers == 0 and grpc_only.counters.get_kernel_rpcs == 1

    asyncio.run(main())
    with daemon.client() as sync:
        stats = sync.stats()
    assert (stats.memory_hits, stats.compiles) == (2, 2)


def test_calls_cancelled_on_the_local_path_never_hand_their_answer_to_another(make_daemon):
    daemon = make_daemon()
    with daemon.client(local_path=False) as sync:
        want = {dtype: sync.get_kernel("small.fill", dtype=dtype).key for dtype in ("fp32", "fp64")}

    async def main() -> None:
        client = jitd.aio.Client(daemon.endpoint)
        for i in range(40):
            # One call cancelled at a different moment each time (before its
            # frame, between frame and answer, after), then concurrent calls
            # for both kernels: each gets its own, whatever was left unread.
            client.clear_memo()
            doomed = asyncio.ensure_future(client.get_kernel("small.fill", dtype="fp64"))
            for _ in range(i % 8):
                await asyncio.sleep(0)
            doomed.cancel()
            client.clear_memo()
            got = await asyncio.gather(*[client.get_kernel("small.fill", dtype=d) for d in ("fp32", "fp64", "fp32")])
            assert [k.key for k in got] == [want["fp32"], want["fp64"], want["fp32"]]
        assert client.counters.local_answers > 0
        await client.close()

    asyncio.run(main())
