"""jitd.Client: typed calls to a running jitd daemon over gRPC."""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, TypeVar, Union

import grpc

from . import _endpoint, _health, _units
from ._memo import SingleFlightMemo, deadline_after, remaining
from ._proto.jitd.v1 import cache_admin_pb2, cache_admin_pb2_grpc, compiler_pb2, compiler_pb2_grpc
from .errors import DeadlineExceeded, InvalidArgument, JitdError, from_rpc_error
from .retry import RetryPolicy
from .types import (ClientCounters, Entries, Entry, EvictResult, KernelInfo, KernelParam, KernelResult, KernelSpec,
                    Manifest, Mode, ParamsLike, ParamValue, Stats, VerifyResult, WarmProgress, WarmResult, arch_text)

logger = logging.getLogger("jitd")

T = TypeVar("T")

#: What ``Client.warm(kernels=...)`` takes: None or "all" (every
#: instantiation of the manifest), or specs, kernel names (default params)
#: and ``(name, params)`` pairs.
KernelsLike = Union[None, str, Iterable[Union[KernelSpec, str, "tuple[str, Mapping[str, ParamValue]]"]]]

# The daemon is local: a refused connection is tried again after 100 ms
# rather than gRPC's default second, so retries and wait_until_serving()
# notice a freshly started daemon quickly (the C++ client's values).
_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Cubins of large kernels pass gRPC's default 4 MiB receive limit.
    ("grpc.max_receive_message_length", -1),
)
# How long one health poll of wait_until_serving() waits for the socket.
_HEALTH_POLL_S = 0.5
# Pause between polls while the daemon answers NOT_SERVING (starting, draining).
_NOT_SERVING_PAUSE_S = 0.02

_MODES = {Mode.COMPILE: compiler_pb2.GetKernelRequest.COMPILE,
          Mode.CACHED_ONLY: compiler_pb2.GetKernelRequest.CACHED_ONLY,
          Mode.PREFETCH: compiler_pb2.GetKernelRequest.PREFETCH}


def _enum_names(enum_type: Any) -> dict[int, str]:
    return {value.number: value.name.lower() for value in enum_type.values}


_SOURCES = _enum_names(compiler_pb2.GetKernelResponse.DESCRIPTOR.enum_types_by_name["Source"])
_SOURCES[0] = "unspecified"
_OUTCOMES = _enum_names(compiler_pb2.WarmProgress.DESCRIPTOR.enum_types_by_name["Outcome"])
_OUTCOMES[0] = "unspecified"


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


class Client:
    """A connection to a jitd daemon: kernels by name, warm-up, and the cache.

    ::

        client = jitd.Client()                      # $JITD_ENDPOINT or the default socket
        k = client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
        k.cubin, k.symbols, k.source                # bytes, {expression: lowered}, "compiled"

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

    def __init__(self, endpoint: Optional[str] = None, *, timeout: Optional[float] = 120.0,
                 retries: Union[RetryPolicy, int, None] = None, admin_token: Optional[str] = None,
                 admin_token_file: Union[str, "os.PathLike[str]", None] = None, arch: Optional[str] = None,
                 warm_timeout: Optional[float] = None, tls_ca_file: Optional[str] = None,
                 tls_cert_file: Optional[str] = None, tls_key_file: Optional[str] = None) -> None:
        self._endpoint = _endpoint.resolve_endpoint(endpoint)
        _endpoint.validate_endpoint(self._endpoint)
        self._timeout = timeout
        self._retry = RetryPolicy.of(retries)
        self._admin_token = admin_token
        self._admin_token_file = os.fspath(admin_token_file) if admin_token_file is not None else None
        if self._admin_token_file is not None:
            _endpoint.read_admin_token_file(self._admin_token_file)  # fail now, naming the file
        self._arch = arch_text(arch)
        self._warm_timeout = warm_timeout
        self._tls = (tls_ca_file, tls_cert_file, tls_key_file)
        if (tls_cert_file is None) != (tls_key_file is None):
            raise InvalidArgument("a client certificate and its key go together: set both or neither")
        self._settings = dict(endpoint=self._endpoint, timeout=timeout, retries=self._retry, admin_token=admin_token,
                              admin_token_file=self._admin_token_file, arch=arch, warm_timeout=warm_timeout,
                              tls_ca_file=tls_ca_file, tls_cert_file=tls_cert_file, tls_key_file=tls_key_file)
        self._lock = threading.Lock()
        self._connection: Optional[_Connection] = None
        self._memo: SingleFlightMemo[KernelResult] = SingleFlightMemo()
        self._counts = {"get_kernel_rpcs": 0, "memo_hits": 0, "retries": 0}
        _CLIENTS.add(self)

    # --- Life ------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The endpoint this client talks to, resolved ("unix:/run/user/1000/jitd.sock")."""
        return self._endpoint

    @property
    def counters(self) -> ClientCounters:
        """RPCs, memo hits and retries so far."""
        with self._lock:
            return ClientCounters(**self._counts)

    def close(self) -> None:
        """Closes the connection (this process's). Later calls reconnect."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None and connection.pid == os.getpid():
            connection.channel.close()

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
            channel = self._make_channel()
            connection = _Connection(pid, channel, compiler_pb2_grpc.CompilerStub(channel),
                                     cache_admin_pb2_grpc.CacheAdminStub(channel), _health.check_method(channel))
            self._connection = connection
            return connection

    def _make_channel(self) -> grpc.Channel:
        target = self._endpoint
        ca, cert, key = self._tls
        if target.startswith("unix:") or not any(self._tls):
            return grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)

        def read(path: Optional[str], what: str) -> Optional[bytes]:
            if path is None:
                return None
            try:
                data = open(path, "rb").read()
            except OSError as error:
                raise InvalidArgument(f"{what} {path}: {error.strerror}") from None
            if b"-----BEGIN" not in data:
                raise InvalidArgument(f"{what} {path}: not a PEM file")
            return data

        credentials = grpc.ssl_channel_credentials(read(ca, "TLS CA"), read(key, "TLS key"),
                                                   read(cert, "TLS certificate"))
        return grpc.secure_channel(target, credentials, options=_CHANNEL_OPTIONS)

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _admin_metadata(self) -> tuple[tuple[str, str], ...]:
        # Only on the calls that may change state (Evict, Verify): a server
        # that answers Stats learns nothing it could replay.
        token = self._admin_token
        if not token and self._admin_token_file is not None:
            token = _endpoint.read_admin_token_file(self._admin_token_file)
        if not token:
            token = _endpoint.socket_admin_token(self._endpoint)  # re-read: a restarted daemon has a new one
        return (("authorization", f"Bearer {token}"),) if token else ()

    def _call(self, what: str, invoke: Callable[[_Connection, Optional[float]], T],
              timeout: Optional[float]) -> T:
        """``invoke(connection, seconds_left)`` under the retry policy, with
        gRPC errors turned into JitdError."""
        deadline = deadline_after(timeout)
        attempt = 0
        while True:
            attempt += 1
            left = remaining(deadline)
            try:
                return invoke(self._connect(), None if left is None else max(left, 0.001))
            except grpc.RpcError as rpc_error:
                error = from_rpc_error(rpc_error, self._endpoint)
            if error.code == grpc.StatusCode.DEADLINE_EXCEEDED and error.message == "Deadline Exceeded":
                # gRPC's own words for the client-side deadline: say which call and what to change.
                error = DeadlineExceeded(f"{what}: no answer from jitd at {self._endpoint} within {timeout} s "
                                         "(a compile can take seconds: pass a larger timeout=)",
                                         endpoint=self._endpoint)
            pause = self._retry.backoff(attempt)
            left = remaining(deadline)
            if not self._retry.should_retry(error.code, attempt) or (left is not None and pause >= left):
                raise error
            self._count("retries")
            logger.debug("jitd: %s failed (%s), attempt %d of %d, retrying in %.2f s", what, error,
                         attempt, self._retry.max_attempts, pause)
            time.sleep(pause)

    def _default_timeout(self, timeout: Optional[float], default: Optional[float]) -> Optional[float]:
        return default if timeout is None else timeout

    # --- Kernels -----------------------------------------------------------------

    def get_kernel(self, kernel: str, arch: Optional[str] = None, *, params: Optional[ParamsLike] = None,
                   mode: Union[Mode, str] = Mode.COMPILE, options: Sequence[str] = (),
                   timeout: Optional[float] = None, **more_params: ParamValue) -> KernelResult:
        """The cubin of one kernel instantiation, compiled by the daemon on a
        miss (``mode="compile"``, the default).

        ::

            k = client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
            k = client.get_kernel("norm.rmsnorm", "sm_100a", dtype=x.dtype, threads=256)

        Params are keywords (values: str, int, bool, or a torch/numpy dtype);
        ``params=`` takes a mapping for names that are not identifiers or
        clash with these arguments. ``options`` are extra NVRTC options from
        the daemon's allow-list (``["-lineinfo"]``).

        Modes: ``"cached_only"`` never compiles and raises
        :class:`jitd.NotFound` on a miss; ``"prefetch"`` answers at once and,
        on a miss, returns a result with ``source == "none"`` and no cubin
        while the daemon compiles in the background.

        Raises :class:`jitd.NotFound` (unknown kernel, with close matches;
        CACHED_ONLY miss), :class:`jitd.InvalidArgument` (bad params, option
        or arch), :class:`jitd.CompileError` (NVRTC's log in ``.log``),
        :class:`jitd.Unavailable`, :class:`jitd.DeadlineExceeded`, ...
        """
        spec = KernelSpec.of(kernel, arch, options=options, params=params, **more_params)
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

    def _with_default_arch(self, spec: KernelSpec) -> KernelSpec:
        if spec.arch:
            return spec
        arch = self._arch
        if not arch:
            from .driver import current_device_arch  # ctypes only; never initialises CUDA
            arch = current_device_arch() or ""
        return spec.with_arch(arch) if arch else spec

    def _fetch(self, spec: KernelSpec, mode: Mode, timeout: Optional[float]) -> tuple[KernelResult, bool]:
        request = compiler_pb2.GetKernelRequest(kernel=spec.kernel, params=dict(spec.params), arch=spec.arch,
                                                options=list(spec.options), mode=_MODES[mode],
                                                delivery=compiler_pb2.GetKernelRequest.BYTES)

        def invoke(connection: _Connection, left: Optional[float]) -> Any:
            self._count("get_kernel_rpcs")
            return connection.compiler.GetKernel(request, timeout=left)

        response = self._call(f"GetKernel {spec}", invoke, timeout)
        result = KernelResult(
            kernel=spec.kernel, params=dict(spec.params), arch=response.arch or spec.arch, options=spec.options,
            key=response.key, cubin=bytes(response.cubin),
            symbols={symbol.name_expression: symbol.lowered_name for symbol in response.symbols},
            source=_SOURCES.get(response.source, "unspecified"),  # type: ignore[arg-type]
            compile_ms=response.compile_ms, log=response.log, nvrtc_version=response.nvrtc_version,
            served_us=response.served_us)
        return result, result.source != "none"

    def kernels(self, glob: str = "", *, timeout: Optional[float] = None) -> Manifest:
        """The kernels the daemon's manifest registers (``glob`` filters
        names: ``"moe.*"``), with their params, the default arch and every
        arch the daemon's NVRTC supports."""
        request = compiler_pb2.ListKernelsRequest(glob=glob)
        response = self._call("ListKernels", lambda c, left: c.compiler.ListKernels(request, timeout=left),
                              self._default_timeout(timeout, self._timeout))
        return Manifest(
            kernels=[KernelInfo(name=k.name, source=k.source, name_expression=k.name_expression,
                                params=[KernelParam(p.name, p.type, list(p.allowed), p.default_value) for p in k.params],
                                default_options=list(k.default_options), instantiations=k.instantiations,
                                description=k.description) for k in response.kernels],
            default_arch=response.default_arch, supported_archs=list(response.supported_archs))

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
        last = items[-1] if items else None
        return WarmResult(total=last.total if last else 0, compiled=last.compiled if last else 0,
                          cached=last.cached if last else 0, failed=last.failed if last else 0,
                          elapsed_ms=last.elapsed_ms if last else 0, items=items)

    def warm_iter(self, kernels: KernelsLike = None, *, archs: Sequence[str] = (), concurrency: int = 0,
                  timeout: Optional[float] = None) -> Iterator[WarmProgress]:
        """:meth:`warm` as an iterator of :class:`jitd.WarmProgress`, one per
        finished instantiation. Leaving the loop early cancels the warm-up
        (what is compiled stays cached)."""
        request = compiler_pb2.WarmRequest(archs=[arch_text(a) for a in ([archs] if isinstance(archs, str) else archs)],
                                           concurrency=concurrency)
        if kernels is None or kernels == "all":
            request.all = True
        elif isinstance(kernels, str):
            raise InvalidArgument(f"kernels={kernels!r}: pass None or 'all', or a list of specs or names")
        else:
            for item in kernels:
                spec = _to_spec(item)
                request.specs.add(kernel=spec.kernel, params=dict(spec.params), arch=spec.arch,
                                  options=list(spec.options))
        timeout = self._default_timeout(timeout, self._warm_timeout)
        deadline = deadline_after(timeout)
        attempt = 0
        while True:
            attempt += 1
            left = remaining(deadline)
            call = self._connect().compiler.Warm(request, timeout=None if left is None else max(left, 0.001))
            received = False
            try:
                for message in call:
                    received = True
                    yield _warm_progress(message)
                return
            except grpc.RpcError as rpc_error:
                error = from_rpc_error(rpc_error, self._endpoint)
            finally:
                call.cancel()  # no-op when finished; stops the daemon's work when the caller left early
            pause = self._retry.backoff(attempt)
            left = remaining(deadline)
            if received or not self._retry.should_retry(error.code, attempt) or (left is not None and pause >= left):
                raise error
            self._count("retries")
            time.sleep(pause)

    # --- The cache (CacheAdmin) --------------------------------------------------

    def stats(self, *, timeout: Optional[float] = None) -> Stats:
        """The daemon's counters: cache entries and bytes, hits, compiles,
        workers, queue (see :class:`jitd.Stats`)."""
        response = self._call("Stats", lambda c, left: c.admin.Stats(
            cache_admin_pb2.StatsRequest(), timeout=left),
            self._default_timeout(timeout, self._timeout))
        return Stats(**{name: getattr(response, name) for name in Stats.__dataclass_fields__})

    def entries(self, kernel_glob: str = "", *, arch: str = "", limit: int = 0,
                timeout: Optional[float] = None) -> Entries:
        """The cache's entries, most recently used first; filtered by a glob
        over kernel names (``"moe.*"``) and an exact arch; at most ``limit``
        (0: all). ``.total`` counts the matches before the limit."""
        request = cache_admin_pb2.ListEntriesRequest(kernel_glob=kernel_glob, arch=arch, limit=limit)
        response = self._call("ListEntries", lambda c, left: c.admin.ListEntries(
            request, timeout=left), self._default_timeout(timeout, self._timeout))
        return Entries(entries=[_entry(e) for e in response.entries], total=response.total)

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
        request = cache_admin_pb2.EvictRequest(keys=list(keys), kernel_glob=kernel_glob, arch=arch, dry_run=dry_run,
                                               include_pinned=include_pinned)
        if older_than is not None:
            request.older_than_s = _units.parse_duration(older_than)
        if max_bytes is not None:
            request.max_bytes = _units.parse_byte_size(max_bytes)
        response = self._call("Evict", lambda c, left: c.admin.Evict(
            request, timeout=left, metadata=self._admin_metadata()), self._default_timeout(timeout, self._timeout))
        return EvictResult(evicted=[_entry(e) for e in response.evicted], evicted_entries=response.evicted_entries,
                           evicted_bytes=response.evicted_bytes, dry_run=response.dry_run,
                           remaining_entries=response.remaining_entries, remaining_bytes=response.remaining_bytes)

    def verify(self, *, repair: bool = False, timeout: Optional[float] = None) -> VerifyResult:
        """Re-reads every cache entry against its checksum; ``repair=True``
        (admin token) drops corrupt entries and reconciles index and files."""
        request = cache_admin_pb2.VerifyRequest(repair=repair)
        r = self._call("Verify", lambda c, left: c.admin.Verify(
            request, timeout=left, metadata=self._admin_metadata()), self._default_timeout(timeout, self._timeout))
        return VerifyResult(checked=r.checked, ok=r.ok, corrupt=r.corrupt, missing_blobs=r.missing_blobs,
                            orphan_blobs=r.orphan_blobs, repaired=r.repaired, problems=list(r.problems),
                            index_integrity=r.index_integrity)

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
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded(f"jitd at {self._endpoint} was not serving within {timeout} s; last: {last}",
                                       endpoint=self._endpoint)
            try:
                status = self._connect().health("", timeout=min(left, _HEALTH_POLL_S), wait_for_ready=True)
            except grpc.RpcError as rpc_error:
                last = str(from_rpc_error(rpc_error, self._endpoint))
                continue
            if status == "SERVING":
                return
            last = f"the daemon answers {status}"
            time.sleep(_NOT_SERVING_PAUSE_S)


def _client_from_settings(settings: dict[str, Any]) -> Client:
    return Client(**settings)


def _to_spec(item: Any) -> KernelSpec:
    if isinstance(item, KernelSpec):
        return item
    if isinstance(item, str):
        return KernelSpec(item)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return KernelSpec(item[0], item[1])
    raise InvalidArgument(f"{item!r} is not a KernelSpec, a kernel name or a (name, params) pair")


def _warm_progress(message: Any) -> WarmProgress:
    spec = message.spec
    return WarmProgress(
        spec=KernelSpec(spec.kernel or "?", tuple(spec.params.items()), spec.arch, tuple(spec.options)),
        key=message.key, outcome=_OUTCOMES.get(message.outcome, "unspecified"),  # type: ignore[arg-type]
        error=message.error, done=message.done, total=message.total, compiled=message.compiled,
        cached=message.cached, failed=message.failed, elapsed_ms=message.elapsed_ms, compile_ms=message.compile_ms)


def _entry(e: Any) -> Entry:
    return Entry(key=e.key, kernel=e.kernel, params=e.params, arch=e.arch, size_bytes=e.size_bytes,
                 created_unix_ms=e.created_unix_ms, last_used_unix_ms=e.last_used_unix_ms, hits=e.hits,
                 pinned=e.pinned, nvrtc_version=e.nvrtc_version, compile_ms=e.compile_ms)
