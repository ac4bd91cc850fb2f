"""jitd.aio.Client: :class:`jitd.Client` for asyncio, on ``grpc.aio``.

::

    import jitd.aio
    async with jitd.aio.Client() as client:
        k = await client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
        async for progress in client.warm_iter(specs):
            print(progress)

The same methods, arguments, results (:class:`jitd.KernelResult`,
:class:`jitd.Stats`, ...) and errors (:class:`jitd.Unavailable`,
:class:`jitd.NotFound`, ...) as :class:`jitd.Client`, each a coroutine
(``warm_iter`` an async iterator); requests and answers are built and read
by the same code. Retries wait with ``asyncio.sleep``, never blocking the
loop.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import os
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, List, Optional, Sequence, TypeVar, Union

import grpc
import grpc.aio

from . import _calls, _health, _local, modules
from ._calls import KernelsLike
from ._memo import SingleFlightMemo, deadline_after
from ._proto.jitd.v1 import cache_admin_pb2_grpc, compiler_pb2_grpc
from .errors import DeadlineExceeded, JitdError, from_rpc_error
from .types import (Entries, EvictResult, KernelResult, KernelSpec, Manifest, Mode, ParamsLike, ParamValue, Stats,
                    VerifyResult, WarmProgress, WarmResult)

T = TypeVar("T")

__all__ = ["Client"]


@dataclass
class _Connection:
    """A channel and its stubs, for the event loop and process that made them."""

    loop: asyncio.AbstractEventLoop
    pid: int
    channel: grpc.aio.Channel
    compiler: compiler_pb2_grpc.CompilerStub
    admin: cache_admin_pb2_grpc.CacheAdminStub
    health: Callable[..., Any]


class _Flight:
    """One GetKernel in the air, shared by the callers of its instantiation
    on one loop; cancelled when the last of them leaves."""

    __slots__ = ("task", "waiters", "abandoned")

    def __init__(self, task: asyncio.Task) -> None:
        self.task = task
        self.waiters = 0
        # Cancelled by its last caller: a task's cancellation lands at its
        # next step, and a caller arriving before that must not join it.
        self.abandoned = False


class Client(_calls.Settings):
    """A connection to a jitd daemon for asyncio code: :class:`jitd.Client`'s
    methods as coroutines, with its constructor's arguments (endpoint,
    timeouts, retries, admin token, arch, TLS) and their meanings.

    The memo: as :class:`jitd.Client`'s, one RPC per instantiation for the
    life of the client; concurrent first calls share one RPC, and it is
    cancelled only when every caller waiting for it was.

    The local path: as :class:`jitd.Client`'s (``local_path``), a cached
    kernel from a ``unix:`` daemon comes over one connection of jitd's own
    framing, without a gRPC channel; the calls of one loop take turns on it.

    Event loops: the connection belongs to the loop of the call that made
    it; a call on another loop (a second ``asyncio.run``) makes its own, the
    memo stays. Use one loop at a time. A client pickles to its settings.
    """

    def _init_client(self) -> None:
        self._connection: Optional[_Connection] = None
        self._local: Optional[_local.AsyncLocalChannel] = None
        self._local_next_try = 0.0
        self._memo: SingleFlightMemo[KernelResult] = SingleFlightMemo()
        self._flights: dict[str, _Flight] = {}

    # --- Life ------------------------------------------------------------------

    async def close(self) -> None:
        """Closes the connection. Later calls reconnect."""
        local, self._local = self._local, None
        if local is not None and local.loop is asyncio.get_running_loop() and local.pid == os.getpid():
            local.close()
        connection, self._connection = self._connection, None
        if connection is not None and connection.loop is asyncio.get_running_loop() and connection.pid == os.getpid():
            await connection.channel.close()

    def clear_memo(self) -> None:
        """Forgets every remembered kernel: the next get_kernel asks again."""
        self._memo.clear()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __reduce__(self) -> Any:
        return (_client_from_settings, (self._settings,))

    def __repr__(self) -> str:
        return f"jitd.aio.Client({self._endpoint!r})"

    def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        connection = self._connection
        if connection is not None and connection.loop is loop and connection.pid == os.getpid():
            return connection
        channel = self._new_channel(grpc.aio)
        connection = _Connection(loop, os.getpid(), channel, compiler_pb2_grpc.CompilerStub(channel),
                                 cache_admin_pb2_grpc.CacheAdminStub(channel), _health.check_method(channel))
        self._connection = connection
        return connection

    async def _call(self, what: str, invoke: Callable[[_Connection, Optional[float]], Awaitable[T]],
                    timeout: Optional[float]) -> T:
        """``await invoke(connection, seconds_left)`` under the retry policy,
        with gRPC errors turned into JitdError."""
        deadline = deadline_after(timeout)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await invoke(self._connect(), _calls.attempt_timeout(deadline))
            except grpc.RpcError as rpc_error:  # grpc.aio.AioRpcError is one
                error = self._call_error(rpc_error, what, timeout)
            await asyncio.sleep(self._before_retry(error, attempt, deadline, what))

    # --- Kernels -----------------------------------------------------------------

    async def get_kernel(self, kernel: str, arch: Optional[str] = None, *, params: Optional[ParamsLike] = None,
                         mode: Union[Mode, str] = Mode.COMPILE, options: Sequence[str] = (),
                         timeout: Optional[float] = None, archs: Sequence[Any] = (), fleet: bool = False,
                   **more_params: ParamValue) -> KernelResult:
        """:meth:`jitd.Client.get_kernel`: the cubin of one instantiation,
        compiled by the daemon on a miss (``mode="compile"``, the default)."""
        spec = KernelSpec.of(kernel, arch, options=options, params=params, archs=archs, fleet=fleet, **more_params)
        return await self.get(spec, mode=mode, timeout=timeout)

    async def get(self, spec: KernelSpec, *, mode: Union[Mode, str] = Mode.COMPILE,
                  timeout: Optional[float] = None) -> KernelResult:
        """:meth:`get_kernel` for a :class:`jitd.KernelSpec`."""
        mode = Mode.of(mode)
        timeout = self._default_timeout(timeout, self._timeout)
        spec = self._with_default_arch(spec)
        key = spec.canonical()
        found = self._memo.find(key)
        if found is not None:
            self._count("memo_hits")
            return found
        if mode is Mode.COMPILE:
            return await self._shared_fetch(key, spec, timeout)
        # CACHED_ONLY and PREFETCH use remembered answers but never wait for
        # another caller's compile.
        result, keep = await self._fetch(spec, mode, timeout)
        if keep:
            self._memo.remember(key, result)
        return result

    async def _shared_fetch(self, key: str, spec: KernelSpec, timeout: Optional[float]) -> KernelResult:
        """The COMPILE answer for ``key``: this call's RPC, or the one another
        caller on this loop already made (waited for at most ``timeout``)."""
        loop = asyncio.get_running_loop()
        flight = self._flights.get(key)
        leader = flight is None or flight.abandoned or flight.task.get_loop() is not loop
        if leader:
            flight = _Flight(loop.create_task(self._fetch(spec, Mode.COMPILE, timeout)))
            self._flights[key] = flight
            flight.task.add_done_callback(lambda task: self._landed(key, flight, task))
        assert flight is not None
        flight.waiters += 1
        try:
            if leader:
                result, _ = await asyncio.shield(flight.task)
                return result
            self._count("memo_hits")
            try:
                result, _ = await asyncio.wait_for(asyncio.shield(flight.task), timeout)
            except JitdError as error:  # the leader's: a copy for each other caller, so tracebacks do not mix
                raise _copied(error) from None
            except asyncio.TimeoutError:
                raise DeadlineExceeded(f"{spec}: no answer within {timeout} s (waited for the same request "
                                       "another task of this process made)", endpoint=self._endpoint) from None
            return result
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.abandoned = True
                flight.task.cancel()  # everyone left: the daemon may stop compiling

    def _landed(self, key: str, flight: _Flight, task: asyncio.Task) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not task.cancelled() and task.exception() is None:
            result, keep = task.result()
            if keep:
                self._memo.remember(key, result)

    async def _fetch(self, spec: KernelSpec, mode: Mode, timeout: Optional[float]) -> tuple[KernelResult, bool]:
        if self._local_path:
            hit = await self._fetch_local(spec)
            if hit is not None:
                return hit
        request = _calls.get_kernel_request(spec, mode)
        return _calls.kernel_result(spec, await self._call(f"GetKernel {spec}", self._get_kernel_invoke(request),
                                                           timeout))

    async def _fetch_local(self, spec: KernelSpec) -> Optional[tuple[KernelResult, bool]]:
        """:meth:`jitd.Client._fetch_local` on this loop: a cache hit over
        the local path, or None (the request then goes over gRPC)."""
        request = _calls.get_kernel_request(spec, Mode.CACHED_ONLY)
        local = self._local
        if local is None or local.broken or local.loop is not asyncio.get_running_loop() or local.pid != os.getpid():
            if time.monotonic() < self._local_next_try:
                return None
            try:
                opened = await _local.AsyncLocalChannel.open(self._endpoint[len("unix:"):])
            except _local.LocalError:
                self._local_next_try = time.monotonic() + _local.RETRY_AFTER_S
                return None
            local = self._local
            if local is None or local.broken or local.loop is not opened.loop or local.pid != opened.pid:
                self._local = local = opened
            else:
                opened.close()  # another task of this loop opened one meanwhile: one connection is enough
        try:
            answer = await local.ask(request)
        except _local.LocalError:
            if self._local is local:
                self._local = None  # broken: the next request opens a new one
            return None
        return self._local_hit(spec, answer)

    async def load_module(self, kernel: str, arch: Optional[str] = None, *, timeout: Optional[float] = None,
                          **params: ParamValue) -> Any:
        """:meth:`jitd.Client.load_module` for asyncio: the kernel is awaited
        (memo and single flight as :meth:`get_kernel`); writing, checking and
        loading its shared object (file I/O and the dynamic loader) run in
        the loop's default executor. The same errors, and the same module
        object per content key in the process, whichever client loaded it.
        """
        result = await self.get_kernel(kernel, arch, params=params, timeout=timeout)
        return await asyncio.get_running_loop().run_in_executor(None, modules.load, result)

    async def kernels(self, glob: str = "", *, timeout: Optional[float] = None) -> Manifest:
        """:meth:`jitd.Client.kernels`: the daemon's manifest."""
        pages: List[Any] = []
        request: Optional[Any] = _calls.list_kernels_request(glob)
        while request is not None:  # every page (the daemon answers 4096 kernels at a time)
            pages.append(await self._call(
                "ListKernels", lambda c, left, asked=request: c.compiler.ListKernels(asked, timeout=left),
                self._default_timeout(timeout, self._timeout)))
            request = _calls.next_list_kernels_request(glob, pages, self._endpoint)
        return _calls.manifest(pages)

    # --- Warm-up -----------------------------------------------------------------

    async def warm(self, kernels: KernelsLike = None, *, archs: Sequence[str] = (), concurrency: int = 0,
                   on_progress: Optional[Callable[[WarmProgress], Any]] = None,
                   timeout: Optional[float] = None) -> WarmResult:
        """:meth:`jitd.Client.warm`; ``on_progress`` may also be a coroutine
        function (awaited for each instantiation, in order)."""
        items: list[WarmProgress] = []
        async for progress in self.warm_iter(kernels, archs=archs, concurrency=concurrency, timeout=timeout):
            items.append(progress)
            if on_progress is not None:
                answer = on_progress(progress)
                if inspect.isawaitable(answer):
                    await answer
        return _calls.warm_result(items)

    async def warm_iter(self, kernels: KernelsLike = None, *, archs: Sequence[str] = (), concurrency: int = 0,
                        timeout: Optional[float] = None) -> AsyncIterator[WarmProgress]:
        """:meth:`jitd.Client.warm_iter` as an async iterator. Leaving the
        loop early cancels the warm-up once the iterator is closed
        (``contextlib.aclosing``, or when it is collected)."""
        request = _calls.warm_request(kernels, archs, concurrency)
        timeout = self._default_timeout(timeout, self._warm_timeout)
        deadline = deadline_after(timeout)
        attempt = 0
        while True:
            attempt += 1
            call = self._connect().compiler.Warm(request, timeout=_calls.attempt_timeout(deadline))
            received = False
            try:
                async for message in call:
                    received = True
                    yield _calls.warm_progress(message)
                return
            except grpc.RpcError as rpc_error:
                error = self._call_error(rpc_error, "Warm", timeout)
            finally:
                call.cancel()  # no-op when finished; stops the daemon's work when the caller left early
            if received:
                raise error
            await asyncio.sleep(self._before_retry(error, attempt, deadline, "Warm"))

    # --- The cache (CacheAdmin) --------------------------------------------------

    async def stats(self, *, timeout: Optional[float] = None) -> Stats:
        """:meth:`jitd.Client.stats`: the daemon's counters."""
        return _calls.stats(await self._call(
            "Stats", lambda c, left: c.admin.Stats(_calls.stats_request(), timeout=left),
            self._default_timeout(timeout, self._timeout)))

    async def entries(self, kernel_glob: str = "", *, arch: str = "", limit: int = 0,
                      timeout: Optional[float] = None) -> Entries:
        """:meth:`jitd.Client.entries`: the cache's entries, most recently used first."""
        request = _calls.entries_request(kernel_glob, arch, limit)
        return _calls.entries(await self._call(
            "ListEntries", lambda c, left: c.admin.ListEntries(request, timeout=left),
            self._default_timeout(timeout, self._timeout)))

    async def evict(self, *, keys: Sequence[str] = (), kernel_glob: str = "", arch: str = "",
                    older_than: Union[int, float, str, Any, None] = None, max_bytes: Union[int, str, None] = None,
                    dry_run: bool = False, include_pinned: bool = False,
                    timeout: Optional[float] = None) -> EvictResult:
        """:meth:`jitd.Client.evict`: removes matching cache entries (admin token)."""
        request = _calls.evict_request(keys, kernel_glob, arch, older_than, max_bytes, dry_run, include_pinned)
        return _calls.evict_result(await self._call("Evict", lambda c, left: c.admin.Evict(
            request, timeout=left, metadata=self._admin_metadata()), self._default_timeout(timeout, self._timeout)))

    async def verify(self, *, repair: bool = False, timeout: Optional[float] = None) -> VerifyResult:
        """:meth:`jitd.Client.verify`: every entry against its checksum."""
        request = _calls.verify_request(repair)
        return _calls.verify_result(await self._call("Verify", lambda c, left: c.admin.Verify(
            request, timeout=left, metadata=self._admin_metadata()), self._default_timeout(timeout, self._timeout)))

    # --- Health --------------------------------------------------------------------

    async def health(self, service: str = "", *, timeout: float = 2.0) -> str:
        """:meth:`jitd.Client.health`: "SERVING", "NOT_SERVING" or
        "SERVICE_UNKNOWN"; not retried."""
        try:
            return await self._connect().health(service, timeout=timeout)
        except grpc.RpcError as rpc_error:
            raise from_rpc_error(rpc_error, self._endpoint) from None

    async def wait_until_serving(self, timeout: float = 30.0) -> None:
        """:meth:`jitd.Client.wait_until_serving`: returns once the daemon
        answers SERVING, :class:`jitd.DeadlineExceeded` after ``timeout``."""
        deadline = time.monotonic() + timeout
        last = "not asked yet"
        while True:
            poll_timeout = self._health_poll_timeout(deadline, timeout, last)
            try:
                status = await self._connect().health("", timeout=poll_timeout, wait_for_ready=True)
            except grpc.RpcError as rpc_error:
                last = self._health_failure(rpc_error)
                continue
            if status == "SERVING":
                return
            last = f"the daemon answers {status}"
            await asyncio.sleep(_calls.NOT_SERVING_PAUSE_S)


def _copied(error: JitdError) -> JitdError:
    try:
        return copy.copy(error)
    except Exception:  # an exception type that does not copy: share it
        return error


def _client_from_settings(settings: dict[str, Any]) -> Client:
    return Client(**settings)
