"""The exceptions jitd raises.

Every error the daemon answers is a :class:`JitdError` carrying the gRPC
status code (``.code``, a :class:`grpc.StatusCode`) and the daemon's message
(``.message``, written for a person), as a subclass named after the code::

    JitdError
    ├── NotFound            NOT_FOUND: unknown kernel (the message names close
    │   │                   matches), or a CACHED_ONLY miss       (LookupError)
    │   └── KernelsMissing  KernelSet.require(): every missing instantiation
    ├── InvalidArgument     INVALID_ARGUMENT: bad or missing params, an option
    │                       outside the allow-list, an unknown arch (ValueError)
    ├── CompileError        FAILED_PRECONDITION: NVRTC rejected the program;
    │   │                   ``.log`` holds NVRTC's log
    │   └── WarmFailed      KernelSet.warm(): instantiations that failed
    ├── ResourceExhausted   RESOURCE_EXHAUSTED: compile queue full, too many calls
    ├── PermissionDenied    PERMISSION_DENIED: admin call without the admin
    │                       token                                  (PermissionError)
    ├── Unavailable         UNAVAILABLE: no daemon at the endpoint  (ConnectionError)
    ├── DeadlineExceeded    DEADLINE_EXCEEDED: the call's timeout passed (TimeoutError)
    ├── Cancelled, DataLoss, Internal, Unimplemented
    └── (JitdError itself for any other code)

Each also derives from the built-in exception in parentheses, so code that
already catches ``TimeoutError`` or ``ConnectionError`` keeps working. The
exceptions pickle, so they cross ``multiprocessing`` boundaries intact.
"""

from __future__ import annotations

from typing import Any, ClassVar

import grpc


class JitdError(Exception):
    """An error answered by the daemon (or found by the client on its way).

    Attributes:
        code: the gRPC status code, unchanged from the daemon.
        message: the daemon's message, meant for a person.
        endpoint: the endpoint the call went to, when there was a call.
    """

    default_code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.endpoint = endpoint

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code.name})"

    def _extra(self) -> dict[str, Any]:
        """Attributes beyond message/code/endpoint, for pickling."""
        return {}

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.message, self.code.name, self.endpoint, self._extra()))


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


_BY_CODE: dict[grpc.StatusCode, type[JitdError]] = {
    cls.default_code: cls
    for cls in (NotFound, InvalidArgument, CompileError, ResourceExhausted, PermissionDenied, Unavailable,
                DeadlineExceeded, Cancelled, DataLoss, Internal, Unimplemented)
}


def error_for(code: grpc.StatusCode, message: str, endpoint: str | None = None) -> JitdError:
    """The exception for a status code: its subclass, or JitdError."""
    return _BY_CODE.get(code, JitdError)(message, code=code, endpoint=endpoint)


def from_rpc_error(error: grpc.RpcError, endpoint: str) -> JitdError:
    """The JitdError for a failed gRPC call. UNAVAILABLE names the endpoint
    and what to do, as the C++ client's message does."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    if code == grpc.StatusCode.UNAVAILABLE:
        details = f"cannot reach jitd at {endpoint}: {details} (is the daemon running? start it with `jitd`)"
    return error_for(code, details, endpoint)
