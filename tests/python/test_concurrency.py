"""One client shared by threads, and clients used from processes: forked
children (which must not touch the parent's gRPC channel) and spawned ones
(which receive the client pickled as its settings)."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import jitd

SPEC = jitd.KernelSpec("small.fill", {"dtype": "fp32"})


def test_concurrent_first_requests_of_one_spec_share_one_rpc(make_daemon):
    client = make_daemon().client()
    start = threading.Barrier(16)

    def ask(_: int) -> jitd.KernelResult:
        start.wait()
        return client.get_kernel("small.block_sum", threads=256)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(ask, range(16)))
    assert all(result is results[0] for result in results)
    assert client.counters.get_kernel_rpcs == 1 and client.counters.memo_hits == 15
    assert client.stats().compiles == 1


def test_threads_asking_for_different_kernels_each_get_their_own(client):
    specs = [("small.fill", {"dtype": d}) for d in ("fp32", "fp64")] + [("small.scale", {"clamp": c}) for c in
                                                                         ("off", "on")]

    def ask(i: int) -> jitd.KernelResult:
        kernel, params = specs[i % len(specs)]
        return client.get_kernel(kernel, params=params)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(ask, range(64)))
    assert len({r.key for r in results}) == 4
    assert client.counters.get_kernel_rpcs == 4


def test_a_waiter_gets_the_leaders_error_and_errors_are_not_remembered(client):
    start = threading.Barrier(4)
    errors: list = []

    def ask() -> None:
        start.wait()
        try:
            client.get_kernel("small.broken")
        except jitd.CompileError as error:
            errors.append(error)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(errors) == 4 and len({id(e) for e in errors}) == 4  # a copy each
    assert all("undeclared_in_broken_kernel" in e.log for e in errors)


# --- Processes ------------------------------------------------------------------------
# Workers are module-level functions so that spawn can import them.


def _fetch_in_child(client: jitd.Client) -> tuple[int, str, str, int, int]:
    k = client.get_kernel("small.fill", dtype="fp32")
    fresh = client.get_kernel("small.scale", clamp="on")  # needs an RPC in this process
    return os.getpid(), k.key, fresh.key, client.stats().workers, client.counters.get_kernel_rpcs


_inherited: jitd.Client | None = None


def _fetch_with_inherited_client(_: int) -> tuple[int, str, str, int, int]:
    assert _inherited is not None
    return _fetch_in_child(_inherited)


def test_forked_children_keep_using_the_parents_client_and_memo(daemon):
    global _inherited
    client = daemon.client()
    parent_key = client.get_kernel("small.fill", dtype="fp32").key  # the channel is live before the fork
    client.stats()
    _inherited = client
    try:
        with multiprocessing.get_context("fork").Pool(3) as pool:
            answers = pool.map(_fetch_with_inherited_client, range(6), chunksize=1)
    finally:
        _inherited = None
    assert {key for _, key, _, _, _ in answers} == {parent_key}
    assert all(workers == 2 for *_, workers, _ in answers)
    # The memo crossed the fork: a child's count is the parent's one RPC plus
    # its own for small.scale (the first of its tasks; the others hit its memo).
    assert all(rpcs == 2 for *_, rpcs in answers)
    # And the parent's channel still works.
    assert client.stats().workers == 2


def test_spawned_children_get_the_client_pickled_as_its_settings(daemon):
    client = daemon.client(timeout=30, retries=2)
    copy = pickle.loads(pickle.dumps(client))
    assert (copy.endpoint, copy._settings) == (client.endpoint, client._settings)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        answers = pool.map(_fetch_in_child, [client, client])
    expected = client.get_kernel("small.fill", dtype="fp32").key
    assert {key for _, key, _, _, _ in answers} == {expected}
    assert {pid for pid, *_ in answers} != {os.getpid()}


_BARE_FORK = """
import os, sys, jitd
client = jitd.Client(sys.argv[1])
client.stats()                                   # a live channel in the parent
pid = os.fork()
if pid == 0:
    print(client.stats().workers, client.get_kernel("small.fill", dtype="fp64").key, flush=True)
    sys.exit(0)                                  # the normal exit: finalizers run in the child
_, status = os.waitpid(pid, 0)
print(client.get_kernel("small.fill", dtype="fp64").key, os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_bare_fork_child_uses_the_client_and_both_exit_cleanly(daemon):
    done = subprocess.run([sys.executable, "-c", _BARE_FORK, daemon.endpoint], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    child, parent = done.stdout.splitlines()
    workers, child_key = child.split()
    parent_key, child_status = parent.split()
    assert workers == "2" and child_key == parent_key and child_status == "0"
