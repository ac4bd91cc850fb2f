"""What :class:`jitd.Client` and :class:`jitd.aio.Client` share, so that
both send the same requests and answer with the same types and errors: the
settings and their checks, each call's request and the reading of its answer,
the error mapping and when to retry. Only the waiting differs (threads and
``time.sleep`` there, coroutines and ``asyncio.sleep`` here)."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, List, Mapping, Optional, Sequence, Union

import grpc

from . import _endpoint, _units
from ._memo import remaining
from ._proto.jitd.v1 import cache_admin_pb2, compiler_pb2
from .errors import (DeadlineExceeded, Internal, InvalidArgument, JitdError, from_rpc_error, unreachable_reason,
                     what_to_do)
from .retry import RetryPolicy
from .types import (ClientCounters, Entries, Entry, EvictResult, KernelInfo, KernelParam, KernelResult, KernelSpec,
                    Manifest, Mode, MountedBundle, ParamValue, Stats, VerifyResult, WarmProgress, WarmResult,
                    arch_text)

logger = logging.getLogger("jitd")

#: What ``Client.warm(kernels=...)`` takes: None or "all" (every
#: instantiation of the manifest), or specs, kernel names (default params)
#: and ``(name, params)`` pairs.
KernelsLike = Union[None, str, Iterable[Union[KernelSpec, str, "tuple[str, Mapping[str, ParamValue]]"]]]

# The daemon is local: a refused connection is tried again after 100 ms
# rather than gRPC's default second, so retries and wait_until_serving()
# notice a freshly started daemon quickly (the C++ client's values). Not
# grpc.min_reconnect_backoff_ms: gRPC reads it as the least time one
# attempt gets to connect (default 20 s), and at 100 ms a daemon slow to
# answer on a loaded machine failed a fresh client's first call.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Cubins of large kernels pass gRPC's default 4 MiB receive limit.
    ("grpc.max_receive_message_length", -1),
)
# How long one health poll of wait_until_serving() waits for the socket.
HEALTH_POLL_S = 0.5
# Pause between polls while the daemon answers NOT_SERVING (starting, draining).
NOT_SERVING_PAUSE_S = 0.02

_MODES = {Mode.COMPILE: compiler_pb2.GetKernelRequest.COMPILE,
          Mode.CACHED_ONLY: compiler_pb2.GetKernelRequest.CACHED_ONLY,
          Mode.PREFETCH: compiler_pb2.GetKernelRequest.PREFETCH}


def _enum_names(enum_type: Any) -> dict[int, str]:
    return {value.number: value.name.lower() for value in enum_type.values}


_ORIGINS = _enum_names(compiler_pb2.GetKernelResponse.DESCRIPTOR.enum_types_by_name["Source"])
_ORIGINS[0] = "unspecified"
_OUTCOMES = _enum_names(compiler_pb2.WarmProgress.DESCRIPTOR.enum_types_by_name["Outcome"])
_OUTCOMES[0] = "unspecified"


class Settings:
    """A client's settings, checked, and what its calls share: counters,
    the admin token, the default arch, the channel, retries. The base of
    both clients, and their constructor (its arguments are documented on
    :class:`jitd.Client`); each adds its connections in :meth:`_init_client`."""

    def __init__(self, endpoint: Optional[str] = None, *, timeout: Optional[float] = 120.0,
                 retries: Union[RetryPolicy, int, None] = None, admin_token: Optional[str] = None,
                 admin_token_file: Union[str, "os.PathLike[str]", None] = None, arch: Optional[str] = None,
                 warm_timeout: Optional[float] = None, tls_ca_file: Optional[str] = None,
                 tls_cert_file: Optional[str] = None, tls_key_file: Optional[str] = None,
                 local_path: Optional[bool] = None) -> None:
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
        # The local path only where there is a Unix socket to speak it on.
        self._local_path = self._endpoint.startswith("unix:") and local_path is not False
        if local_path is not None:
            self._settings["local_path"] = local_path
        self._lock = threading.Lock()
        self._counts = {"get_kernel_rpcs": 0, "memo_hits": 0, "retries": 0, "local_answers": 0}
        self._init_client()

    def _init_client(self) -> None:
        """What a client holds beyond its settings (connections, memo), set
        up at the end of the constructor."""
        raise NotImplementedError

    @property
    def endpoint(self) -> str:
        """The endpoint this client talks to, resolved ("unix:/run/user/1000/jitd.sock")."""
        return self._endpoint

    @property
    def counters(self) -> ClientCounters:
        """RPCs, memo hits and retries so far."""
        with self._lock:
            return ClientCounters(**self._counts)

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _local_hit(self, spec: KernelSpec, answer: Any) -> Optional[tuple[KernelResult, bool]]:
        """A local-path LocalAnswer as a counted cache hit, or None for
        anything else (a miss, an error): the caller then asks over gRPC."""
        if answer.code != 0:
            return None
        self._count("get_kernel_rpcs")
        self._count("local_answers")
        return kernel_result(spec, answer.response)

    def _get_kernel_invoke(self, request: Any) -> Callable[[Any, Optional[float]], Any]:
        """One GetKernel attempt of ``request`` for ``_call``, counted as an
        RPC (its answer, or with ``grpc.aio`` its awaitable)."""

        def invoke(connection: Any, left: Optional[float]) -> Any:
            self._count("get_kernel_rpcs")
            return connection.compiler.GetKernel(request, timeout=left)

        return invoke

    def _new_channel(self, grpc_module: Any) -> Any:
        """A channel to the endpoint made by ``grpc`` or ``grpc.aio`` (the
        same functions): TLS when the endpoint has TLS files."""
        credentials = self._credentials()
        if credentials is None:
            return grpc_module.insecure_channel(self._endpoint, options=CHANNEL_OPTIONS)
        return grpc_module.secure_channel(self._endpoint, credentials, options=CHANNEL_OPTIONS)

    def _credentials(self) -> Optional[grpc.ChannelCredentials]:
        """TLS credentials for a ``HOST:PORT`` endpoint with TLS files; None
        for a plaintext channel (every ``unix:`` endpoint)."""
        ca, cert, key = self._tls
        if self._endpoint.startswith("unix:") or not any(self._tls):
            return None

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

        return grpc.ssl_channel_credentials(read(ca, "TLS CA"), read(key, "TLS key"), read(cert, "TLS certificate"))

    def _admin_metadata(self) -> tuple[tuple[str, str], ...]:
        # Only on the calls that may change state (Evict, Verify): a server
        # that answers Stats learns nothing it could replay.
        token = self._admin_token
        if not token and self._admin_token_file is not None:
            token = _endpoint.read_admin_token_file(self._admin_token_file)
        if not token:
            token = _endpoint.socket_admin_token(self._endpoint)  # re-read: a restarted daemon has a new one
        return (("authorization", f"Bearer {token}"),) if token else ()

    def _with_default_arch(self, spec: KernelSpec) -> KernelSpec:
        if spec.arch or spec.archs or spec.fleet:
            return spec
        arch = self._arch
        if not arch:
            from .driver import current_device_arch  # ctypes only; never initialises CUDA
            arch = current_device_arch() or ""
        return spec.with_arch(arch) if arch else spec

    def _default_timeout(self, timeout: Optional[float], default: Optional[float]) -> Optional[float]:
        return default if timeout is None else timeout

    def _call_error(self, rpc_error: grpc.RpcError, what: str, timeout: Optional[float]) -> JitdError:
        """The JitdError of a failed attempt of call ``what``."""
        error = from_rpc_error(rpc_error, self._endpoint)
        if error.code == grpc.StatusCode.DEADLINE_EXCEEDED and error.message == "Deadline Exceeded":
            # gRPC's own words for the client-side deadline: say which call and what to change.
            error = DeadlineExceeded(f"{what}: no answer from jitd at {self._endpoint} within {timeout} s "
                                     "(a compile can take seconds: pass a larger timeout=)", endpoint=self._endpoint)
        return error

    def _before_retry(self, error: JitdError, attempt: int, deadline: Optional[float], what: str) -> float:
        """Seconds to wait before attempt ``attempt + 1`` of call ``what``
        after ``error``, counted as a retry; raises ``error`` when it is not
        to be retried (the policy says no, its attempts are used up, or the
        deadline would pass while waiting)."""
        pause = self._retry.backoff(attempt)
        left = remaining(deadline)
        if not self._retry.should_retry(error.code, attempt) or (left is not None and pause >= left):
            raise error
        self._count("retries")
        logger.debug("jitd: %s failed (%s), attempt %d of %d, retrying in %.2f s", what, error, attempt,
                     self._retry.max_attempts, pause)
        return pause

    def _health_failure(self, rpc_error: grpc.RpcError) -> str:
        """What one failed health poll of wait_until_serving() says: with
        ``wait_for_ready`` a daemon that is not there shows as the poll's
        deadline, which says nothing, so it is worded as unreachable."""
        if rpc_error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return (f"cannot reach jitd at {self._endpoint}: {unreachable_reason(self._endpoint, '')} "
                    f"({what_to_do(self._endpoint)})")
        return str(from_rpc_error(rpc_error, self._endpoint))

    def _health_poll_timeout(self, deadline: float, timeout: float, last: str) -> float:
        """How long the next health poll of wait_until_serving() may wait;
        DeadlineExceeded, saying what the last poll got, once ``deadline``
        (``timeout`` seconds after the start) has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"jitd at {self._endpoint} was not serving within {timeout} s; last: {last}",
                                   endpoint=self._endpoint)
        return min(left, HEALTH_POLL_S)


def attempt_timeout(deadline: Optional[float]) -> Optional[float]:
    """The timeout of one attempt: what is left of the call's deadline."""
    left = remaining(deadline)
    return None if left is None else max(left, 0.001)


# --- Requests and answers ------------------------------------------------------------


def get_kernel_request(spec: KernelSpec, mode: Mode) -> Any:
    request = compiler_pb2.GetKernelRequest(kernel=spec.kernel, params=dict(spec.params), arch=spec.arch,
                                            options=list(spec.options), mode=_MODES[mode],
                                            delivery=compiler_pb2.GetKernelRequest.BYTES, archs=list(spec.archs),
                                            fleet=spec.fleet)
    if spec.module is not None:
        m = spec.module
        request.module.CopyFrom(compiler_pb2.ModuleSpec(
            sources=list(m.sources), include_dirs=list(m.include_dirs), options=list(m.options),
            exports=[compiler_pb2.ModuleExport(name=n, expression=e) for n, e in m.exports],
            tree_fingerprint=m.tree_fingerprint))
    return request


def kernel_result(spec: KernelSpec, response: Any) -> tuple[KernelResult, bool]:
    """The result of a GetKernel answer, and whether to remember it (not a
    PREFETCH miss, which has no cubin yet)."""
    result = KernelResult(
        kernel=spec.kernel, params=dict(spec.params), arch=response.arch or spec.arch, options=spec.options,
        key=response.key, cubin=bytes(response.cubin),
        symbols={symbol.name_expression: symbol.lowered_name for symbol in response.symbols},
        origin=_ORIGINS.get(response.source, "unspecified"),  # type: ignore[arg-type]
        compile_ms=response.compile_ms, log=response.log, nvrtc_version=response.nvrtc_version,
        served_us=response.served_us, fatbin_archs=tuple(response.fatbin_archs))
    return result, result.origin != "none"


# A daemon answers ListKernels a page at a time (at most 4096 kernels) and
# its pages end; this many pages would be millions of kernels.
MAX_LIST_PAGES = 1024


def list_kernels_request(glob: str, page_token: str = "") -> Any:
    return compiler_pb2.ListKernelsRequest(glob=glob, page_token=page_token)


def next_list_kernels_request(glob: str, pages: List[Any], endpoint: str) -> Optional[Any]:
    """The request for the page after ``pages``, or None after the last."""
    token = pages[-1].next_page_token
    if not token:
        return None
    if len(pages) >= MAX_LIST_PAGES:
        raise Internal(f"jitd answered {len(pages)} pages of kernels without a last one", endpoint=endpoint)
    return list_kernels_request(glob, token)


def manifest(pages: Sequence[Any]) -> Manifest:
    """Every kernel of ``pages`` (ListKernels answers, in order)."""
    first = pages[0]
    return Manifest(
        kernels=[KernelInfo(name=k.name, source=k.source, name_expression=k.name_expression,
                            params=[KernelParam(p.name, p.type, list(p.allowed), p.default_value) for p in k.params],
                            default_options=list(k.default_options), instantiations=k.instantiations,
                            description=k.description, signature=k.signature, launch=k.launch)
                 for response in pages for k in response.kernels],
        default_arch=first.default_arch, supported_archs=list(first.supported_archs))


def warm_request(kernels: KernelsLike, archs: Union[str, Sequence[str]], concurrency: int) -> Any:
    request = compiler_pb2.WarmRequest(archs=[arch_text(a) for a in ([archs] if isinstance(archs, str) else archs)],
                                       concurrency=concurrency)
    if kernels is None or kernels == "all":
        request.all = True
    elif isinstance(kernels, str):
        raise InvalidArgument(f"kernels={kernels!r}: pass None or 'all', or a list of specs or names")
    else:
        for item in kernels:
            spec = to_spec(item)
            request.specs.add(kernel=spec.kernel, params=dict(spec.params), arch=spec.arch, options=list(spec.options))
    return request


def to_spec(item: Any) -> KernelSpec:
    if isinstance(item, KernelSpec):
        return item
    if isinstance(item, str):
        return KernelSpec(item)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return KernelSpec(item[0], item[1])
    raise InvalidArgument(f"{item!r} is not a KernelSpec, a kernel name or a (name, params) pair")


def warm_progress(message: Any) -> WarmProgress:
    spec = message.spec
    return WarmProgress(
        spec=KernelSpec(spec.kernel or "?", tuple(spec.params.items()), spec.arch, tuple(spec.options)),
        key=message.key, outcome=_OUTCOMES.get(message.outcome, "unspecified"),  # type: ignore[arg-type]
        error=message.error, done=message.done, total=message.total, compiled=message.compiled,
        cached=message.cached, failed=message.failed, elapsed_ms=message.elapsed_ms, compile_ms=message.compile_ms)


def warm_result(items: list[WarmProgress]) -> WarmResult:
    """The totals of a finished warm-up: its last progress message's."""
    last = items[-1] if items else None
    return WarmResult(total=last.total if last else 0, compiled=last.compiled if last else 0,
                      cached=last.cached if last else 0, failed=last.failed if last else 0,
                      elapsed_ms=last.elapsed_ms if last else 0, items=items)


def stats_request() -> Any:
    return cache_admin_pb2.StatsRequest()


def stats(response: Any) -> Stats:
    fields = {name: getattr(response, name) for name in Stats.__dataclass_fields__}
    fields["bundles"] = tuple(MountedBundle(path=b.path, entries=b.entries, bytes=b.bytes, seal=b.seal,
                                            seal_hex=b.seal_hex) for b in response.bundles)
    fields["fleet_targets"] = tuple(response.fleet_targets)
    fields["arch_misses"] = dict(response.arch_misses)
    fields["rewarm"] = {f.name: getattr(response.rewarm, f.name) for f in response.rewarm.DESCRIPTOR.fields}
    fields["trees"] = tuple({f.name: getattr(t, f.name) for f in t.DESCRIPTOR.fields} for t in response.trees)
    return Stats(**fields)


def entries_request(kernel_glob: str, arch: str, limit: int) -> Any:
    return cache_admin_pb2.ListEntriesRequest(kernel_glob=kernel_glob, arch=arch, limit=limit)


def entries(response: Any) -> Entries:
    return Entries(entries=[_entry(e) for e in response.entries], total=response.total)


def evict_request(keys: Sequence[str], kernel_glob: str, arch: str, older_than: Any, max_bytes: Any, dry_run: bool,
                  include_pinned: bool) -> Any:
    request = cache_admin_pb2.EvictRequest(keys=list(keys), kernel_glob=kernel_glob, arch=arch, dry_run=dry_run,
                                           include_pinned=include_pinned)
    if older_than is not None:
        request.older_than_s = _units.parse_duration(older_than)
    if max_bytes is not None:
        request.max_bytes = _units.parse_byte_size(max_bytes)
    return request


def evict_result(response: Any) -> EvictResult:
    return EvictResult(evicted=[_entry(e) for e in response.evicted], evicted_entries=response.evicted_entries,
                       evicted_bytes=response.evicted_bytes, dry_run=response.dry_run,
                       remaining_entries=response.remaining_entries, remaining_bytes=response.remaining_bytes)


def verify_request(repair: bool) -> Any:
    return cache_admin_pb2.VerifyRequest(repair=repair)


def verify_result(r: Any) -> VerifyResult:
    return VerifyResult(checked=r.checked, ok=r.ok, corrupt=r.corrupt, missing_blobs=r.missing_blobs,
                        orphan_blobs=r.orphan_blobs, repaired=r.repaired, problems=list(r.problems),
                        index_integrity=r.index_integrity)


def _entry(e: Any) -> Entry:
    return Entry(key=e.key, kernel=e.kernel, params=e.params, arch=e.arch, size_bytes=e.size_bytes,
                 created_unix_ms=e.created_unix_ms, last_used_unix_ms=e.last_used_unix_ms, hits=e.hits,
                 pinned=e.pinned, nvrtc_version=e.nvrtc_version, compile_ms=e.compile_ms, options=tuple(e.options),
                 kind=e.kind)
