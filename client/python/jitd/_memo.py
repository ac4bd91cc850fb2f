"""A memo with single flight: the first caller of a key produces its value,
concurrent callers of the same key wait for that one answer, later callers
get it at once. Errors are shared with the waiters but not remembered."""

from __future__ import annotations

import copy
import threading
import time
from typing import Callable, Generic, Optional, Tuple, TypeVar

T = TypeVar("T")


class _Flight(Generic[T]):
    __slots__ = ("done", "value", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Optional[T] = None
        self.error: Optional[BaseException] = None


class SingleFlightMemo(Generic[T]):
    """Thread-safe; after fork, :meth:`after_fork` forgets the flights the
    parent's threads had in the air (they never land in the child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, T] = {}
        self._flights: dict[str, _Flight[T]] = {}

    def find(self, key: str) -> Optional[T]:
        with self._lock:
            return self._values.get(key)

    def remember(self, key: str, value: T) -> None:
        with self._lock:
            self._values.setdefault(key, value)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def get(self, key: str, produce: Callable[[], Tuple[T, bool]], timeout: Optional[float],
            on_timeout: Callable[[], BaseException]) -> Tuple[T, bool]:
        """The value of ``key`` and whether this call produced it.

        ``produce`` returns the value and whether to keep it. A caller that
        waits on another's flight waits at most ``timeout`` seconds, then
        raises ``on_timeout()``; the producer's error, if any, is raised in
        every waiter (a copy each, so tracebacks do not mix)."""
        with self._lock:
            if key in self._values:
                return self._values[key], False
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            if not flight.done.wait(timeout):
                raise on_timeout()
            if flight.error is not None:
                error = flight.error
                try:
                    error = copy.copy(error)
                except Exception:  # an exception type that does not copy: share it
                    pass
                raise error
            assert flight.value is not None
            return flight.value, False
        try:
            value, keep = produce()
        except BaseException as error:
            flight.error = error
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()
            raise
        flight.value = value
        with self._lock:
            if keep:
                self._values.setdefault(key, value)
                value = self._values[key]
            self._flights.pop(key, None)
        flight.done.set()
        return value, True

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (the parent's may have been held by
        a thread that does not exist here) and no flights; values stay."""
        self._lock = threading.Lock()
        self._flights = {}


def deadline_after(timeout: Optional[float]) -> Optional[float]:
    """time.monotonic() deadline for a timeout in seconds (None: none)."""
    return None if timeout is None else time.monotonic() + timeout


def remaining(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else deadline - time.monotonic()
