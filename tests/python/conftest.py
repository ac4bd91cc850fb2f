"""Fixtures for the Python client's tests: real jitd daemons on temporary
sockets and cache directories, ready when their health check says SERVING.

The daemon binary is $JITD_BINARY (tests/python/run.sh sets it to the build's),
default build/daemon/jitd. The CPU tests serve tests/daemon/fixtures/kernels_small
(see tests/daemon/support/kernel_fixtures.h): small.fill (dtype fp32|fp64) and
small.scale (clamp off*|on) compile in ~30 ms, small.broken never compiles,
small.block_sum (threads 128|256|512|1024) takes about a second.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pytest

import jitd

REPO = Path(__file__).resolve().parents[2]
SMALL_KERNELS = REPO / "tests" / "daemon" / "fixtures" / "kernels_small"
SHIPPED_KERNELS = REPO / "kernels"
# How long a daemon may take to answer SERVING (it reads its kernels tree,
# checks it with the namespace guard and fingerprints the toolkit first).
READY_TIMEOUT_S = 30.0


def jitd_binary() -> Path:
    return Path(os.environ.get("JITD_BINARY") or REPO / "build" / "daemon" / "jitd")


class Daemon:
    """A jitd process on a socket and cache directory of its own."""

    def __init__(self, kernels: Path = SMALL_KERNELS, args: Sequence[str] = (), workers: int = 2,
                 directory: Optional[Path] = None) -> None:
        # Under /tmp, short: a Unix socket path has at most 107 bytes.
        self.dir = directory or Path(tempfile.mkdtemp(prefix="jitd-py-", dir="/tmp"))
        self.socket = self.dir / "jitd.sock"
        self.endpoint = f"unix:{self.socket}"
        self.cache_dir = self.dir / "cache"
        self.log_path = self.dir / "jitd.log"
        self.kernels = kernels
        self.args = list(args)
        self.workers = workers
        self.process: Optional[subprocess.Popen[bytes]] = None

    def start(self, wait: bool = True) -> Daemon:
        binary = jitd_binary()
        if not os.access(binary, os.X_OK):
            pytest.fail(f"no jitd binary at {binary}: build it (cmake --build build --target jitd) or set JITD_BINARY")
        command = [str(binary), "--listen", self.endpoint, "--cache-dir", str(self.cache_dir),
                   "--kernels", str(self.kernels), "--workers", str(self.workers), *self.args]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Polls the health check until SERVING; fails at once, with the
        daemon's log, if the process exits first."""
        probe = jitd.Client(self.endpoint, retries=0)
        deadline = time.monotonic() + timeout
        try:
            while True:
                assert self.process is not None
                if self.process.poll() is not None:
                    pytest.fail(f"jitd exited with {self.process.returncode} before serving:\n{self.log}")
                try:
                    probe.wait_until_serving(timeout=0.5)
                    return
                except jitd.DeadlineExceeded:
                    if time.monotonic() > deadline:
                        pytest.fail(f"jitd at {self.endpoint} not serving within {timeout} s:\n{self.log}")
        finally:
            probe.close()

    def client(self, **kwargs: object) -> jitd.Client:
        return jitd.Client(self.endpoint, **kwargs)  # type: ignore[arg-type]

    @property
    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> int:
        """SIGTERM (the daemon drains and exits 0), SIGKILL after 30 s."""
        if self.process is None:
            return 0
        process, self.process = self.process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """One daemon serving kernels_small, shared by the tests that only read
    or add to its cache (they count by differences, never absolutes)."""
    shared = Daemon().start()
    yield shared
    shared.remove()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[jitd.Client]:
    """A fresh client (empty memo) of the shared daemon."""
    with daemon.client() as fresh:
        yield fresh


@pytest.fixture
def make_daemon() -> Iterator:
    """Starts daemons of the test's own (``make_daemon(args=[...])``),
    stopped and removed after the test."""
    started: list[Daemon] = []

    def make(kernels: Path = SMALL_KERNELS, args: Sequence[str] = (), workers: int = 2, start: bool = True,
             directory: Optional[Path] = None) -> Daemon:
        instance = Daemon(kernels, args, workers, directory)
        started.append(instance)
        return instance.start() if start else instance

    yield make
    for instance in started:
        instance.remove()


def poll_until(condition, timeout: float = 30.0, interval: float = 0.02) -> bool:
    """Whether ``condition()`` became true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and driver (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # GPU tests last: once CUDA is initialised in this process, the fork
    # tests' children would inherit a context they cannot use.
    items.sort(key=lambda item: item.get_closest_marker("gpu") is not None)
