"""When jitd's client repeats a failed call, and how long it waits."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import FrozenSet

import grpc

# Codes that say "the same call may succeed later": no daemon yet (being
# restarted), a full compile queue, too many calls in flight.
RETRYABLE_CODES: FrozenSet[grpc.StatusCode] = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})

# Codes that never change by asking again: a compile error stays one (the
# daemon keys it by content), as do bad arguments, unknown kernels and
# missing rights; DEADLINE_EXCEEDED means the caller's budget is spent.
NEVER_RETRIED: FrozenSet[grpc.StatusCode] = frozenset({
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for calls that failed with a code in
    ``codes`` (UNAVAILABLE and RESOURCE_EXHAUSTED by default).

    A call is tried at most ``max_attempts`` times; before attempt n+1 the
    client sleeps ``min(initial_backoff * multiplier**(n-1), max_backoff)``
    seconds, give or take ``jitter`` (a fraction). Retries never outlast the
    call's timeout: when the next sleep would pass it, the last error is
    raised. The default (5 attempts: 0.1 + 0.2 + 0.4 + 0.8 s of waiting)
    rides over a daemon restart and fails within about 1.5 s when there is
    no daemon at all. Compile errors, bad arguments, unknown kernels,
    missing rights and passed deadlines are never retried.

    ``RetryPolicy.none()`` (or ``Client(retries=0)``) turns retries off.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.1
    codes: FrozenSet[grpc.StatusCode] = field(default=RETRYABLE_CODES)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts is at least 1 (one try, no retry), got {self.max_attempts}")
        if self.initial_backoff < 0 or self.max_backoff < 0 or self.multiplier < 1 or not 0 <= self.jitter < 1:
            raise ValueError("backoffs are >= 0 seconds, multiplier >= 1, jitter in [0, 1)")
        object.__setattr__(self, "codes", frozenset(self.codes))
        refused = self.codes & NEVER_RETRIED
        if refused:
            names = ", ".join(sorted(code.name for code in refused))
            raise ValueError(f"{names} never succeed by asking again and cannot be retried")

    @classmethod
    def none(cls) -> RetryPolicy:
        """One attempt, no retry."""
        return cls(max_attempts=1)

    @classmethod
    def of(cls, retries: RetryPolicy | int | None) -> RetryPolicy:
        """A policy from itself, a number of retries (0 = none), or None
        (the default policy)."""
        if retries is None:
            return cls()
        if isinstance(retries, RetryPolicy):
            return retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries is a RetryPolicy or a number of retries >= 0, got {retries!r}")
        return cls(max_attempts=retries + 1)

    def should_retry(self, code: grpc.StatusCode, attempt: int) -> bool:
        """Whether attempt number ``attempt`` (1-based) that failed with
        ``code`` is followed by another."""
        return code in self.codes and attempt < self.max_attempts

    def backoff(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt number ``attempt``."""
        base = min(self.initial_backoff * self.multiplier ** (attempt - 1), self.max_backoff)
        return max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))
