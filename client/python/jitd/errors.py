"""The exceptions jitd raises.

Every error the daemon answers is a :class:`JitdError` carrying the gRPC
status code (``.code``, a :class:`grpc.StatusCode`) and the daemon's message
(``.message``, written for a person), as a subclass named after the code::

    JitdError
    ├── NotFound            NOT_FOUND: unknown kernel (the message names close
    │   │                   matches), or a CACHED_ONLY miss       (LookupError)
    │   ├── KernelsMissing  KernelSet.require(): every missing instantiation
    │   └── TreeRefused     reason TREE_REFUSED: the kernel's tree was refused
    ├── InvalidArgument     INVALID_ARGUMENT: bad or missing params, an option
    │   │                   outside the allow-list, an unknown arch (ValueError)
    │   └── NotAModule      load_module() of an NVRTC kernel (a cubin, not a
    │                       shared object): use get_kernel
    ├── CompileError        FAILED_PRECONDITION: NVRTC rejected the program;
    │   │                   ``.log`` holds NVRTC's log
    │   └── WarmFailed      KernelSet.warm(): instantiations that failed
    ├── ResourceExhausted   RESOURCE_EXHAUSTED: compile queue full, too many calls
    ├── PermissionDenied    PERMISSION_DENIED: admin call without the admin
    │                       token                                  (PermissionError)
    ├── Unavailable         UNAVAILABLE: no daemon at the endpoint  (ConnectionError)
    ├── DeadlineExceeded    DEADLINE_EXCEEDED: the call's timeout passed (TimeoutError)
    ├── Cancelled, DataLoss, Internal, Unimplemented
    ├── LockViolation       FAILED_PRECONDITION, reason LOCK_VIOLATION: not in
    │                       its tree's lock (no NVRTC log)
    ├── TreeMismatch        FAILED_PRECONDITION, reason TREE_MISMATCH: an ad-hoc
    │                       module over a copy of the tree that is not the daemon's
    ├── ModuleUnavailable   FAILED_PRECONDITION: load_module() cannot load a
    │                       module here (no tvm_ffi, another tvm-ffi version,
    │                       an unsafe directory, a missing library) (ImportError)
    ├── DriverUnavailable   FAILED_PRECONDITION: no usable CUDA driver in this
    │                       process, found when launching (jitd.driver.CudaError)
    └── (JitdError itself for any other code)

Each also derives from the built-in exception in parentheses, so code that
already catches ``TimeoutError`` or ``ConnectionError`` keeps working. The
exceptions pickle, so they cross ``multiprocessing`` boundaries intact.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

import grpc


class JitdError(Exception):
    """An error answered by the daemon (or found by the client on its way).

    Attributes:
        code: the gRPC status code, unchanged from the daemon.
        message: the daemon's message, meant for a person.
        endpoint: the endpoint the call went to, when there was a call.
        reason: why, in a word a program may match, when the daemon gave
            one (``"LOCK_VIOLATION"``, ``"TREE_REFUSED"``,
            ``"TREE_MISMATCH"``, ``"ADHOC_NOT_ALLOWED"``: the ErrorInfo of
            the call's error details); ``""`` otherwise.
    """

    default_code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None, endpoint: str | None = None,
                 reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.endpoint = endpoint
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code.name})"

    def _extra(self) -> dict[str, Any]:
        """Attributes beyond message/code/endpoint/reason, for pickling."""
        return {}

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.message, self.code.name, self.endpoint, {"reason": self.reason,
                                                                                      **self._extra()}))


def _rebuild(cls: type, message: str, code: str, endpoint: str | None, extra: dict[str, Any]) -> JitdError:
    error = cls.__new__(cls, message)
    JitdError.__init__(error, message, code=grpc.StatusCode[code], endpoint=endpoint)
    error.__dict__.update(extra)
    return error


class NotFound(JitdError, LookupError):
    """NOT_FOUND: an unknown kernel (the message names close matches) or,
    with ``mode=CACHED_ONLY``, an instantiation that is not cached."""

    default_code = grpc.StatusCode.NOT_FOUND


class InvalidArgument(JitdError, ValueError):
    """INVALID_ARGUMENT: a bad or missing param, an option outside the
    daemon's allow-list, an unknown arch, a malformed endpoint."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class CompileError(JitdError):
    """FAILED_PRECONDITION: NVRTC rejected the program. ``.log`` is NVRTC's
    log (file, line and error), the part of the message after its first line.
    Never retried: the same sources fail the same way."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION

    @property
    def log(self) -> str:
        _, _, log = self.message.partition("\n")
        return log


class ResourceExhausted(JitdError):
    """RESOURCE_EXHAUSTED: the daemon's compile queue is full, this client
    has too many calls in flight (--max-calls-per-peer), or the request is
    too large. Retried with backoff by default."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class PermissionDenied(JitdError, PermissionError):
    """PERMISSION_DENIED: an admin call (evict, verify with repair) without
    the daemon's admin token; pass ``admin_token=`` or ``admin_token_file=``
    to :class:`jitd.Client`."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class Unavailable(JitdError, ConnectionError):
    """UNAVAILABLE: no daemon answers at the endpoint (not started, being
    restarted, wrong socket). Retried with backoff by default."""

    default_code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(JitdError, TimeoutError):
    """DEADLINE_EXCEEDED: the call's timeout passed before the answer (a
    compile can take seconds: raise ``timeout=``)."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(JitdError):
    """CANCELLED: the call was cancelled (by this process, or the daemon
    shutting down)."""

    default_code = grpc.StatusCode.CANCELLED


class DataLoss(JitdError):
    """DATA_LOSS: a cache entry failed its checksum."""

    default_code = grpc.StatusCode.DATA_LOSS


class Internal(JitdError):
    """INTERNAL: a daemon-side failure (a compile worker crashed, say)."""

    default_code = grpc.StatusCode.INTERNAL


class Unimplemented(JitdError):
    """UNIMPLEMENTED: the daemon is older than this client and lacks the call."""

    default_code = grpc.StatusCode.UNIMPLEMENTED


class NotAModule(InvalidArgument):
    """Raised by :func:`jitd.load_module`: the kernel is an NVRTC kernel,
    answered as a cubin (or PTX, or a fatbin), not a tvm-ffi shared object;
    load it with :meth:`jitd.Client.get_kernel` and launch that instead."""


class ModuleUnavailable(JitdError, ImportError):
    """Raised by :func:`jitd.load_module`: the daemon built the module, but
    this process cannot load it: ``tvm_ffi`` does not import (the message
    says which ``apache-tvm-ffi`` to install), its version differs in
    major.minor from the one the daemon built against, the directory the
    shared object goes to is not private to this user, or the dynamic loader
    refused the file (a library it needs, such as ``libcudart.so.13``, is not
    on the loader path: the message has the loader's words). Never retried."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class KernelsMissing(NotFound):
    """Raised by :meth:`jitd.KernelSet.require` (strict start-up): the
    instantiations the daemon's cache lacks, all of them, in ``.missing``
    (a list of :class:`jitd.KernelSpec`)."""

    def __init__(self, message: str, *, missing: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.missing = list(missing or [])

    def _extra(self) -> dict[str, Any]:
        return {"missing": self.missing}


class WarmFailed(CompileError):
    """Raised by :meth:`jitd.KernelSet.warm`: instantiations that did not
    compile, in ``.failures`` (a list of :class:`jitd.WarmProgress`, each
    with its ``error``)."""

    def __init__(self, message: str, *, failures: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.failures = list(failures or [])

    def _extra(self) -> dict[str, Any]:
        return {"failures": self.failures}

    @property
    def log(self) -> str:
        return "\n".join(failure.error for failure in self.failures)


class CudaError(RuntimeError):
    """A CUDA driver call failed: ``.call`` names it, ``.result`` is the
    CUresult, ``.name`` its name (``CUDA_ERROR_NO_BINARY_FOR_GPU``). Raised
    by :mod:`jitd.driver` (also reachable as ``jitd.driver.CudaError``)."""

    def __init__(self, call: str, result: int, name: str, text: str, hint: str = "") -> None:
        message = f"{call} failed: {name} ({text})" + (f"; {hint}" if hint else "")
        super().__init__(message)
        self.call, self.result, self.name = call, result, name


class DriverUnavailable(CudaError, JitdError):
    """FAILED_PRECONDITION, found in this process: no usable CUDA driver.
    libcuda.so.1 could not be opened, cuInit failed (no device, a driver too
    old), or CUDA was initialised before this process was forked. A
    :class:`jitd.JitdError` like every jitd failure, and a
    :class:`jitd.driver.CudaError` (``.call``, ``.result``, ``.name``)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, message: str, call: str = "", result: int = -1, name: str = "", **kwargs: Any) -> None:
        JitdError.__init__(self, message, **kwargs)
        self.call, self.result, self.name = call, result, name

    def _extra(self) -> dict[str, Any]:
        return {"call": self.call, "result": self.result, "name": self.name}


class LockViolation(JitdError):
    """FAILED_PRECONDITION, reason LOCK_VIOLATION: the kernel's tree is
    served with a lock (``jitd --lock``) that does not list this
    instantiation, or lists it with another key (its sources or toolkit are
    not the ones linted). Not an NVRTC error: there is no log; lint and lock
    again, or ask for what the lock lists."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class TreeRefused(NotFound):
    """NOT_FOUND, reason TREE_REFUSED: the kernel's tree was refused when the
    daemon loaded it (the message says why: namespace findings, a
    kernels.toml that does not parse, ...); its kernels are not served."""


class TreeMismatch(JitdError):
    """FAILED_PRECONDITION, reason TREE_MISMATCH: an ad-hoc module
    (:func:`jitd.load_jit`) whose tree differs between this process's copy
    and the daemon's (their fingerprints are in the message)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


# Refusals a reason names more precisely than their code.
_BY_REASON: dict[str, type[JitdError]] = {
    "LOCK_VIOLATION": LockViolation,
    "TREE_REFUSED": TreeRefused,
    "TREE_MISMATCH": TreeMismatch,
}

_BY_CODE: dict[grpc.StatusCode, type[JitdError]] = {
    cls.default_code: cls
    for cls in (NotFound, InvalidArgument, CompileError, ResourceExhausted, PermissionDenied, Unavailable,
                DeadlineExceeded, Cancelled, DataLoss, Internal, Unimplemented)
}


def error_for(code: grpc.StatusCode, message: str, endpoint: str | None = None, reason: str = "") -> JitdError:
    """The exception for a status code and reason: the reason's class, else
    the code's (FAILED_PRECONDITION with an unknown reason is no NVRTC
    error: JitdError), else JitdError."""
    cls = _BY_REASON.get(reason)
    if cls is None:
        cls = JitdError if reason and code == grpc.StatusCode.FAILED_PRECONDITION else _BY_CODE.get(code, JitdError)
    return cls(message, code=code, endpoint=endpoint, reason=reason)


def reason_of(error: Any) -> str:
    """The reason of a failed call's error details (the ErrorInfo in its
    grpc-status-details-bin trailer), or ""."""
    try:
        metadata = error.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 (a call that never reached a server has none)
        return ""
    for key, value in metadata:
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        from ._proto.jitd.v1 import error_details_pb2  # generated at build; errors.py is imported before it is needed
        try:
            status = error_details_pb2.RpcStatus.FromString(value)
            for detail in status.details:
                if detail.type_url.endswith("/google.rpc.ErrorInfo"):
                    return error_details_pb2.ErrorInfo.FromString(detail.value).reason
        except Exception:  # noqa: BLE001 (details another server wrote)
            return ""
    return ""


def from_rpc_error(error: grpc.RpcError, endpoint: str) -> JitdError:
    """The JitdError for a failed gRPC call (``grpc.RpcError`` or
    ``grpc.aio.AioRpcError``): the daemon's message as it is, or, when the
    call never reached the daemon, a short reason naming the endpoint and
    what to do instead of gRPC's chain of transport errors."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    # details() only: str(error) carries gRPC's debug_error_string.
    details = (error.details() if hasattr(error, "details") else None) or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        reason = unreachable_reason(endpoint, details)
        if reason is not None:
            return Unavailable(f"cannot reach jitd at {endpoint}: {reason} ({what_to_do(endpoint)})",
                               code=code, endpoint=endpoint)
        # UNAVAILABLE from the daemon itself (a compile worker gone, say).
        return Unavailable(f"jitd at {endpoint}: {details}", code=code, endpoint=endpoint)
    return error_for(code, details or f"the call to jitd at {endpoint} failed without a message", endpoint,
                     reason_of(error))


def what_to_do(endpoint: str) -> str:
    """The hint every "cannot reach jitd" message ends with."""
    return f"is the daemon running? start it with `jitd`; `jitctl --endpoint {endpoint} health` checks it"


# gRPC's words for a call that never reached a server, in any of its
# versions since 1.51: phrases only its transport uses...
_TRANSPORT_MARKS = ("failed to connect", "last error:", "connections to all backends failing", "empty address list",
                    "connect failed", "dns resolution failed", "errors resolving", "handshake")
# ... and whole messages of a connection that broke (lower case).
_CLOSED = {"socket closed", "connection reset by peer", "broken pipe", "transport closed", "goaway received",
           "stream removed", "connection lost", "endpoint closing"}
# What the causes in a transport message mean here; first match wins.
_CAUSES = (
    ("no such file or directory", "no socket at {path}"),
    ("permission denied", "permission denied: this user may not connect to the socket (the daemon's --socket-group "
                          "names who may)"),
    ("connection refused", "connection refused: nothing accepts connections there"),
    ("dns resolution failed", "cannot resolve the host name"),
    ("errors resolving", "cannot resolve the host name"),
    ("domain name not found", "cannot resolve the host name"),
    ("handshake", "the TLS handshake failed (does the daemon use TLS, with the CA tls_ca_file= names?)"),
    ("timeout", "no connection within the timeout"),
    ("timed out", "no connection within the timeout"),
)


def unreachable_reason(endpoint: str, details: str) -> str | None:
    """Why a call could not reach the daemon, in a few words, from gRPC's
    ``details`` ("failed to connect to all addresses; last error: UNKNOWN:
    ipv4:127.0.0.1:7070: Failed to connect to remote host: Connection
    refused") or, for a Unix socket, from the socket file itself; None when
    ``details`` is the daemon's own UNAVAILABLE message."""
    path = endpoint[5:] if endpoint.startswith("unix:") else endpoint
    text = details.lower().strip()
    if text in _CLOSED:
        return "the daemon closed the connection"
    if text and not any(mark in text for mark in _TRANSPORT_MARKS):
        return None
    for needle, reason in _CAUSES:
        if needle in text:
            return reason.format(path=path)
    if endpoint.startswith("unix:"):
        try:
            os.stat(path)
        except FileNotFoundError:
            return f"no socket at {path}"
        except OSError as error:
            return f"cannot reach the socket {path}: {error.strerror}"
    # A cause this client does not know: the chain's last link, without
    # gRPC's status names and addresses.
    last = re.split(r"last error:\s*", details)[-1]
    last = re.sub(r"^[A-Z_]+:\s*", "", last)
    last = re.sub(r"^(?:ipv4|ipv6|unix|unix-abstract):\S+:\s+", "", last)
    return last.strip() or "no connection"
