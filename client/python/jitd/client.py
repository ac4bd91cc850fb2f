"""jitd.Client: typed calls to a running jitd daemon over gRPC (and cached
kernels over the local path of a same-host daemon, _local.py)."""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, TypeVar, Union

import grpc

from . import _calls, _health, _local, modules
from ._calls import KernelsLike
from ._memo import SingleFlightMemo, deadline_after
from ._proto.jitd.v1 import cache_admin_pb2_grpc, compiler_pb2_grpc
from .errors import DeadlineExceeded, JitdError, from_rpc_error
from .types import (Entries, EvictResult, KernelResult, KernelSpec, Manifest, Mode, ParamsLike, ParamValue, Stats,
                    VerifyResult, WarmProgress, WarmResult)

T = TypeVar("T")

__all__ = ["Client", "KernelsLike"]


@dataclass
class _Connection:
    """A channel and its stubs, for the process that made them."""

    pid: int
    channel: grpc.Channel
    compiler: compiler_pb2_grpc.CompilerStub
    admin: cache_admin_pb2_grpc.CacheAdminStub
    health: Callable[..., Any]


# Every live client, so that a forked child can reset their locks and
# connections before anything else runs in it.
_CLIENTS: "weakref.WeakSet[Client]" = weakref.WeakSet()
# Channels a forked child inherited: gRPC forbids using them across fork, and
# closing one in the child would touch the parent's connection, so the child
# keeps them, untouched, for its life.
_INHERITED_CHANNELS: list[grpc.Channel] = []


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Client(_calls.Settings):
    """A connection to a jitd daemon: kernels by name, warm-up, and the cache.

    ::

        client = jitd.Client()                      # $JITD_ENDPOINT or the default socket
        k = client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
        k.cubin, k.symbols, k.origin                # bytes, {expression: lowered}, "compiled"

    Endpoint: ``endpoint`` when given, else ``$JITD_ENDPOINT``, else the
    daemon's default (``unix:$XDG_RUNTIME_DIR/jitd.sock``, else
    ``unix:$XDG_CACHE_HOME/jitd/jitd.sock``, else
    ``unix:~/.cache/jitd/jitd.sock``); ``unix:PATH`` or ``HOST:PORT``. The
    connection is made by the first call, so creating a client never fails
    because the daemon is not up yet.

    Args:
        endpoint: see above.
        timeout: seconds each call may take in all, retries included (a
            call that compiles can take tens of seconds, hence 120). Every
            method also takes ``timeout=`` for itself.
        retries: a :class:`jitd.RetryPolicy`, a number of retries (0: none),
            or None for the default (UNAVAILABLE and RESOURCE_EXHAUSTED, 5
            attempts with backoff from 0.1 s).
        admin_token: sent as ``authorization: Bearer <token>`` with the
            CacheAdmin calls; the daemon requires it for evict() and
            verify(repair=True).
        admin_token_file: read for the token at each admin call instead.
            Without either, a ``unix:`` endpoint's ``SOCKET.admin-token``
            (written by a daemon without --admin-token-file, readable by its
            user only) is used when this process can read it.
        arch: the arch for requests that name none. Unset: the arch of the
            current CUDA context's device when this process already uses
            CUDA (this client never initialises CUDA itself: fork-safe),
            else the daemon's default (its ``--arch``).
        warm_timeout: seconds a whole warm() may take; None (default): no limit.
        tls_ca_file, tls_cert_file, tls_key_file: PEM files for a TLS
            ``HOST:PORT`` endpoint (the daemon's CA; this client's
            certificate and key for mutual TLS). Ignored for ``unix:``.
        local_path: ask a ``unix:`` daemon for cached kernels over the local
            path first (jitd's own framing on the same socket, without gRPC;
            docs/CONTRACT.md): a first get_kernel then costs a connect and one
            round trip instead of a gRPC channel. Misses, compiles and every
            other call go over gRPC, as does everything with a daemon that
            does not speak it. Default: on for ``unix:``; never for TCP.

    Thread safety: share one client between threads; calls are independent.
    Fork safety: a forked child may keep using the client: it opens its own
    connection on its first call (gRPC channels must not cross a fork) and
    keeps the memo. A client pickles to its settings, admin token included
    (for spawn and forkserver workers); the memo stays behind.

    The memo: ``get_kernel`` asks the daemon once per instantiation for the
    life of the client; later calls (from any thread) return the same
    :class:`jitd.KernelResult` without an RPC, and concurrent first calls
    share one RPC. Errors are not memoized. Keep one client per process.
    """

    def _init_client(self) -> None:
        self._connection: Optional[_Connection] = None
        self._local: Optional[_local.LocalChannel] = None
        self._local_lock = threading.Lock()
        self._local_next_try = 0.0
        self._memo: SingleFlightMemo[KernelResult] = SingleFlightMemo()
        _CLIENTS.add(self)

    # --- Life ------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection (this process's). Later calls reconnect."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None and connection.pid == os.getpid():
            connection.channel.close()
        with self._local_lock:
            local, self._local = self._local, None
        if local is not None and local.pid == os.getpid():
            local.close()

    def clear_memo(self) -> None:
        """Forgets every remembered kernel: the next get_kernel asks again."""
        self._memo.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        return (_client_from_settings, (self._settings,))

    def __repr__(self) -> str:
        return f"jitd.Client({self._endpoint!r})"

    def _after_fork(self) -> None:
        # Runs in a forked child before anything else: the parent's threads
        # are gone, and so may be whoever held these locks.
        self._lock = threading.Lock()
        self._local_lock = threading.Lock()
        self._local = None  # the parent's socket: its frames are not this process's
        self._memo.after_fork()
        if self._connection is not None:
            _INHERITED_CHANNELS.append(self._connection.channel)
            self._connection = None

    def _connect(self) -> _Connection:
        pid = os.getpid()
        connection = self._connection
        if connection is not None and connection.pid == pid:
            return connection
        with self._lock:
            connection = self._connection
            if connection is not None and connection.pid == pid:
                return connection
            if connection is not None:  # forked without register_at_fork
                _INHERITED_CHANNELS.append(connection.channel)
            channel = self._new_channel(grpc)
            connection = _Connection(pid, channel, compiler_pb2_grpc.CompilerStub(channel),
                                     cache_admin_pb2_grpc.CacheAdminStub(channel), _health.check_method(channel))
            self._connection = connection
            return connection

    def _call(self, what: str, invoke: Callable[[_Connection, Optional[float]], T],
              timeout: Optional[float]) -> T:
        """``invoke(connection, seconds_left)`` under the retry policy, with
        gRPC errors turned into JitdError."""
        deadline = deadline_after(timeout)
        attempt = 0
        while True:
            attempt += 1
            try:
                return invoke(self._connect(), _calls.attempt_timeout(deadline))
            except grpc.RpcError as rpc_error:
                error = self._call_error(rpc_error, what, timeout)
            time.sleep(self._before_retry(error, attempt, deadline, what))

    # --- Kernels -----------------------------------------------------------------

    def get_kernel(self, kernel: str, arch: Optional[str] = None, *, params: Optional[ParamsLike] = None,
                   mode: Union[Mode, str] = Mode.COMPILE, options: Sequence[str] = (),
                   timeout: Optional[float] = None, archs: Sequence[Any] = (), fleet: bool = False,
                   **more_params: ParamValue) -> KernelResult:
        """The cubin of one kernel instantiation, compiled by the daemon on a
        miss (``mode="compile"``, the default).

        ::

            k = client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
            k = client.get_kernel("norm.rmsnorm", "sm_100a", dtype=x.dtype, threads=256)

        Params are keywords (values: str, int, bool, or a torch/numpy dtype);
        ``params=`` takes a mapping for names that are not identifiers or
        clash with these arguments. ``options`` are extra NVRTC options from
        the daemon's allow-list (``["-lineinfo"]``). ``archs=["sm_80",
        "sm_100", "compute_80"]`` asks for one fatbin of them (SASS for each
        ``sm_`` arch, the PTX of each ``compute_`` one), ``fleet=True`` for
        the daemon's fleet set (``--fleet-archs``) and the PTX of its lowest;
        the loaders load a fatbin as they load a cubin.

        Modes: ``"cached_only"`` never compiles and raises
        :class:`jitd.NotFound` on a miss; ``"prefetch"`` answers at once and,
        on a miss, returns a result with ``origin == "none"`` and no cubin
        while the daemon compiles in the background (using that result says
        so; ask again with the default mode to wait for the cubin).

        Raises :class:`jitd.NotFound` (unknown kernel, with close matches;
        CACHED_ONLY miss), :class:`jitd.InvalidArgument` (bad params, option
        or arch), :class:`jitd.CompileError` (NVRTC's log in ``.log``),
        :class:`jitd.Unavailable`, :class:`jitd.DeadlineExceeded`, ...
        """
        spec = KernelSpec.of(kernel, arch, options=options, params=params, archs=archs, fleet=fleet, **more_params)
        return self.get(spec, mode=mode, timeout=timeout)

    def get(self, spec: KernelSpec, *, mode: Union[Mode, str] = Mode.COMPILE,
            timeout: Optional[float] = None) -> KernelResult:
        """:meth:`get_kernel` for a :class:`jitd.KernelSpec`."""
        mode = Mode.of(mode)
        timeout = self._default_timeout(timeout, self._timeout)
        spec = self._with_default_arch(spec)
        key = spec.canonical()
        if mode is Mode.COMPILE:
            def on_timeout() -> JitdError:
                return DeadlineExceeded(f"{spec}: no answer within {timeout} s (waited for the same request "
                                        "another thread of this process made)", endpoint=self._endpoint)

            result, produced = self._memo.get(key, lambda: self._fetch(spec, mode, timeout), timeout, on_timeout)
            if not produced:
                self._count("memo_hits")
            return result
        # CACHED_ONLY and PREFETCH use remembered answers but never wait for
        # another caller's compile.
        found = self._memo.find(key)
        if found is not None:
            self._count("memo_hits")
            return found
        result, keep = self._fetch(spec, mode, timeout)
        if keep:
            self._memo.remember(key, result)
        return result

    def _fetch(self, spec: KernelSpec, mode: Mode, timeout: Optional[float]) -> tuple[KernelResult, bool]:
        if self._local_path:
            hit = self._fetch_local(spec)
            if hit is not None:
                return hit
        request = _calls.get_kernel_request(spec, mode)
        return _calls.kernel_result(spec, self._call(f"GetKernel {spec}", self._get_kernel_invoke(request), timeout))

    def _fetch_local(self, spec: KernelSpec) -> Optional[tuple[KernelResult, bool]]:
        """A cache hit over the local path, or None: a miss, an error or a
        path that cannot be used now leave the request to gRPC, so that the
        local path changes no answer, only how fast a hit arrives."""
        request = _calls.get_kernel_request(spec, Mode.CACHED_ONLY)
        with self._local_lock:
            local = self._local
            if local is None or local.pid != os.getpid():
                if time.monotonic() < self._local_next_try:
                    return None
                try:
                    local = _local.LocalChannel(self._endpoint[len("unix:"):])
                except _local.LocalError:
                    self._local_next_try = time.monotonic() + _local.RETRY_AFTER_S
                    return None
                self._local = local
            try:
                answer = local.ask(request)
            except _local.LocalError:
                local.close()
                self._local = None  # broken: the next request opens a new one
                return None
        return self._local_hit(spec, answer)

    def load_module(self, kernel: str, arch: Optional[str] = None, *, timeout: Optional[float] = None,
                    **params: ParamValue) -> Any:
        """A module kernel (``kind = "module"``: a tvm-ffi shared object the
        daemon builds with nvcc), loaded into this process: a
        ``tvm_ffi.Module`` whose exports are functions of tensors.

        ::

            mod = client.load_module("activation.silu_and_mul", dtype="bf16")
            mod.silu_and_mul(out, x)                # or mod["silu_and_mul"](out, x)

        The kernel comes from :meth:`get_kernel` (memo, retries, timeout as
        there; every keyword is a param); :func:`jitd.modules.load` writes
        it to a directory private to this user, checks it and loads it with
        ``tvm_ffi.load_module``, once per content key and process: later
        calls return the same module object.

        Raises, beside get_kernel's errors: :class:`jitd.NotAModule` for an
        NVRTC kernel (use get_kernel), :class:`jitd.ModuleUnavailable` when
        this process cannot load it (no ``tvm_ffi``: the message says which
        ``apache-tvm-ffi`` to install; another tvm-ffi major.minor than the
        daemon's; a directory others may write; ``libcudart.so.13`` not on
        the loader path), :class:`jitd.DataLoss` when the file does not read
        back as received.
        """
        return modules.load(self.get_kernel(kernel, arch, params=params, timeout=timeout))

    def kernels(self, glob: str = "", *, timeout: Optional[float] = None) -> Manifest:
        """The kernels the daemon's manifest registers (``glob`` filters
        names: ``"moe.*"``), with their params, the default arch and every
        arch the daemon's NVRTC supports."""
        pages: List[Any] = []
        request: Optional[Any] = _calls.list_kernels_request(glob)
        while request is not None:  # every page (the daemon answers 4096 kernels at a time)
            pages.append(self._call(
                "ListKernels", lambda c, left, asked=request: c.compiler.ListKernels(asked, timeout=left),
                self._default_timeout(timeout, self._timeout)))
            request = _calls.next_list_kernels_request(glob, pages, self._endpoint)
        return _calls.manifest(pages)

    # --- Warm-up -----------------------------------------------------------------

    def warm(self, kernels: KernelsLike = None, *, archs: Sequence[str] = (), concurrency: int = 0,
             on_progress: Optional[Callable[[WarmProgress], None]] = None,
             timeout: Optional[float] = None) -> WarmResult:
        """Compiles instantiations into the daemon's cache (the Warm RPC) and
        returns the totals; ``on_progress`` runs on this thread once per
        finished instantiation, in order.

        ``kernels``: None or ``"all"`` for every instantiation of the
        manifest; else :class:`jitd.KernelSpec` objects, kernel names (their
        default params) or ``(name, params)`` pairs. Each is warmed for each
        of ``archs`` (default: the daemon's), unless it names its own.
        ``concurrency``: compiles at once (0: the daemon's worker count).

        An instantiation that fails to compile is reported (``outcome ==
        "failed"``, ``result.failures``), not raised; the call raises only
        when the stream itself fails (no daemon, timeout, bad request).
        """
        items: list[WarmProgress] = []
        for progress in self.warm_iter(kernels, archs=archs, concurrency=concurrency, timeout=timeout):
            items.append(progress)
            if on_progress is not None:
                on_progress(progress)
        return _calls.warm_result(items)

    def warm_iter(self, kernels: KernelsLike = None, *, archs: Sequence[str] = (), concurrency: int = 0,
                  timeout: Optional[float] = None) -> Iterator[WarmProgress]:
        """:meth:`warm` as an iterator of :class:`jitd.WarmProgress`, one per
        finished instantiation. Leaving the loop early cancels the warm-up
        (what is compiled stays cached)."""
        request = _calls.warm_request(kernels, archs, concurrency)
        timeout = self._default_timeout(timeout, self._warm_timeout)
        deadline = deadline_after(timeout)
        attempt = 0
        while True:
            attempt += 1
            call = self._connect().compiler.Warm(request, timeout=_calls.attempt_timeout(deadline))
            received = False
            try:
                for message in call:
                    received = True
                    yield _calls.warm_progress(message)
                return
            except grpc.RpcError as rpc_error:
                error = self._call_error(rpc_error, "Warm", timeout)
            finally:
                call.cancel()  # no-op when finished; stops the daemon's work when the caller left early
            if received:
                raise error
            time.sleep(self._before_retry(error, attempt, deadline, "Warm"))

    # --- The cache (CacheAdmin) --------------------------------------------------

    def stats(self, *, timeout: Optional[float] = None) -> Stats:
        """The daemon's counters: cache entries and bytes, hits, compiles,
        workers, queue (see :class:`jitd.Stats`)."""
        return _calls.stats(self._call("Stats", lambda c, left: c.admin.Stats(_calls.stats_request(), timeout=left),
                                       self._default_timeout(timeout, self._timeout)))

    def entries(self, kernel_glob: str = "", *, arch: str = "", limit: int = 0,
                timeout: Optional[float] = None) -> Entries:
        """The cache's entries, most recently used first; filtered by a glob
        over kernel names (``"moe.*"``) and an exact arch; at most ``limit``
        (0: all). ``.total`` counts the matches before the limit."""
        request = _calls.entries_request(kernel_glob, arch, limit)
        return _calls.entries(self._call("ListEntries", lambda c, left: c.admin.ListEntries(request, timeout=left),
                                         self._default_timeout(timeout, self._timeout)))

    def evict(self, *, keys: Sequence[str] = (), kernel_glob: str = "", arch: str = "",
              older_than: Union[int, float, str, Any, None] = None, max_bytes: Union[int, str, None] = None,
              dry_run: bool = False, include_pinned: bool = False,
              timeout: Optional[float] = None) -> EvictResult:
        """Removes cache entries matching every filter given (at least one):
        exact ``keys``, a ``kernel_glob``, an exact ``arch``, unused for
        ``older_than`` (seconds, a timedelta, or "7d"), or least recently
        used first until the cache holds ``max_bytes`` (int or "10G").
        ``dry_run`` reports what would go. Pinned entries (the manifest's
        instantiations a warm-up compiled) go only with ``include_pinned``.

        Needs the admin token when the daemon has one
        (:class:`jitd.PermissionDenied` otherwise)."""
        request = _calls.evict_request(keys, kernel_glob, arch, older_than, max_bytes, dry_run, include_pinned)
        return _calls.evict_result(self._call("Evict", lambda c, left: c.admin.Evict(
            request, timeout=left, metadata=self._admin_metadata()), self._default_timeout(timeout, self._timeout)))

    def verify(self, *, repair: bool = False, timeout: Optional[float] = None) -> VerifyResult:
        """Re-reads every cache entry against its checksum; ``repair=True``
        (admin token) drops corrupt entries and reconciles index and files."""
        request = _calls.verify_request(repair)
        return _calls.verify_result(self._call("Verify", lambda c, left: c.admin.Verify(
            request, timeout=left, metadata=self._admin_metadata()), self._default_timeout(timeout, self._timeout)))

    # --- Health --------------------------------------------------------------------

    def health(self, service: str = "", *, timeout: float = 2.0) -> str:
        """The daemon's ``grpc.health.v1.Health/Check`` answer: "SERVING",
        "NOT_SERVING" (starting or draining) or "SERVICE_UNKNOWN". Not
        retried; raises :class:`jitd.Unavailable` when nobody answers."""
        try:
            return self._connect().health(service, timeout=timeout)
        except grpc.RpcError as rpc_error:
            raise from_rpc_error(rpc_error, self._endpoint) from None

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        """Returns once the daemon answers SERVING; polls, each poll waiting
        for the socket to accept, so it covers a daemon still starting.
        :class:`jitd.DeadlineExceeded` naming the endpoint after ``timeout``."""
        deadline = time.monotonic() + timeout
        last = "not asked yet"
        while True:
            poll_timeout = self._health_poll_timeout(deadline, timeout, last)
            try:
                status = self._connect().health("", timeout=poll_timeout, wait_for_ready=True)
            except grpc.RpcError as rpc_error:
                last = self._health_failure(rpc_error)
                continue
            if status == "SERVING":
                return
            last = f"the daemon answers {status}"
            time.sleep(_calls.NOT_SERVING_PAUSE_S)


def _client_from_settings(settings: dict[str, Any]) -> Client:
    return Client(**settings)
