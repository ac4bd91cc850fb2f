"""Retries (a daemon started after the client's first attempt; bounded by
the timeout), and where a client connects: the same endpoint rules and
admin token rules as the C++ client and the daemon."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
import time

import jitd
import pytest
from conftest import jitd_binary, poll_until


def test_a_daemon_started_after_the_first_attempt_is_reached_by_a_retry(make_daemon, caplog):
    daemon = make_daemon(start=False)
    client = daemon.client(retries=jitd.RetryPolicy(max_attempts=200, initial_backoff=0.05, max_backoff=0.2))
    answer: dict = {}

    def ask() -> None:
        try:
            answer["kernel"] = client.get_kernel("small.fill", dtype="fp32")
        except jitd.JitdError as error:
            answer["error"] = error

    caller = threading.Thread(target=ask)
    with caplog.at_level(logging.DEBUG, logger="jitd"):
        caller.start()
        assert poll_until(lambda: client.counters.retries >= 1, timeout=10)
        daemon.start()
        caller.join(60)
    assert "error" not in answer, answer.get("error")
    assert answer["kernel"].origin == "compiled"
    assert client.counters.get_kernel_rpcs >= 2
    assert any("retrying in" in record.getMessage() and "UNAVAILABLE" in record.getMessage()
               for record in caplog.records)


def test_retries_never_outlast_the_calls_timeout(tmp_path):
    client = jitd.Client(f"unix:{tmp_path}/nobody.sock", retries=jitd.RetryPolicy(max_attempts=1000), timeout=0.5)
    start = time.monotonic()
    with pytest.raises(jitd.Unavailable):
        client.get_kernel("small.fill", dtype="fp32")
    assert time.monotonic() - start < 3  # 0.5 s, with room for a loaded machine
    assert client.counters.retries >= 2


def test_wait_until_serving_covers_a_daemon_still_starting(make_daemon):
    daemon = make_daemon(start=False)
    client = daemon.client()
    starter = threading.Timer(0.3, lambda: daemon.start(wait=False))
    starter.start()
    try:
        client.wait_until_serving(timeout=30)
    finally:
        starter.join()
    assert client.health() == "SERVING"


def test_wait_until_serving_without_a_daemon_is_deadline_exceeded_naming_the_endpoint(tmp_path):
    client = jitd.Client(f"unix:{tmp_path}/nobody.sock")
    with pytest.raises(jitd.DeadlineExceeded, match=f"jitd at unix:{tmp_path}/nobody.sock was not serving"):
        client.wait_until_serving(timeout=0.3)


# --- Endpoints -----------------------------------------------------------------------


def _daemon_default_listen(env: dict) -> str:
    """The default --listen the C++ code computes, from `jitd --help`."""
    help_text = subprocess.run([str(jitd_binary()), "--help"], env=env, capture_output=True, text=True).stdout
    return re.search(r"--listen ADDR .*\(default: (unix:[^;]+);", help_text).group(1)


@pytest.mark.parametrize("env", [
    {"XDG_RUNTIME_DIR": "/run/user/4242", "XDG_CACHE_HOME": "/c", "HOME": "/h"},
    {"XDG_CACHE_HOME": "/somewhere/cache", "HOME": "/h"},
    {"HOME": "/home/someone"},
    {"XDG_RUNTIME_DIR": "", "HOME": "/home/empty-runtime-dir"},
])
def test_the_default_endpoint_is_the_daemons(monkeypatch, env):
    for name in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "HOME", "JITD_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert jitd.default_endpoint() == _daemon_default_listen(dict(os.environ))
    assert jitd.Client().endpoint == jitd.default_endpoint()


def test_without_home_the_password_databases_home_is_used(monkeypatch):
    import pwd

    for name in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    assert jitd.default_endpoint() == f"unix:{pwd.getpwuid(os.getuid()).pw_dir}/.cache/jitd/jitd.sock"


def test_an_explicit_endpoint_wins_over_jitd_endpoint_which_wins_over_the_default(monkeypatch, daemon):
    monkeypatch.setenv("JITD_ENDPOINT", daemon.endpoint)
    assert jitd.Client().endpoint == daemon.endpoint
    assert jitd.Client().health() == "SERVING"
    assert jitd.Client("unix:/elsewhere.sock").endpoint == "unix:/elsewhere.sock"
    monkeypatch.setenv("JITD_ENDPOINT", "")
    assert jitd.Client().endpoint == jitd.default_endpoint()


def test_the_token_beside_a_socket_is_read_only_from_a_regular_file_of_the_sockets_owner(tmp_path):
    from jitd import _endpoint
    socket = tmp_path / "jitd.sock"
    socket.write_text("")  # stands for the socket: only its owner is looked at
    token = tmp_path / "jitd.sock.admin-token"
    token.write_text("s3cret\n")
    assert _endpoint.socket_admin_token(f"unix:{socket}") == "s3cret"
    # A symlink planted beside a fake server's socket is not followed.
    token.unlink()
    (tmp_path / "real-token").write_text("the-real-token\n")
    token.symlink_to(tmp_path / "real-token")
    assert _endpoint.socket_admin_token(f"unix:{socket}") is None
    token.unlink()
    token.write_text("s3cret\n")
    if os.geteuid() == 0:
        os.chown(token, 65534, -1)  # someone else's file
        assert _endpoint.socket_admin_token(f"unix:{socket}") is None


def test_admin_token_files_are_read_as_the_daemon_reads_them(tmp_path):
    token = tmp_path / "token"
    token.write_text("  s3cret\n\n")
    assert jitd.read_admin_token_file(token) == "s3cret"
    token.write_text("\n")
    with pytest.raises(jitd.InvalidArgument, match="holds no token"):
        jitd.read_admin_token_file(token)
    token.write_text("two words\n")
    with pytest.raises(jitd.InvalidArgument, match="whitespace or control characters inside its token"):
        jitd.read_admin_token_file(token)
    with pytest.raises(jitd.NotFound, match="cannot read admin token file"):
        jitd.read_admin_token_file(tmp_path / "missing")
    with pytest.raises(jitd.NotFound):
        jitd.Client("unix:/x.sock", admin_token_file=tmp_path / "missing")


def test_the_daemons_own_token_beside_its_socket_makes_its_user_admin(make_daemon):
    daemon = make_daemon()
    token_file = f"{daemon.socket}.admin-token"
    assert os.path.exists(token_file)
    client = daemon.client()
    assert client.evict(kernel_glob="*").evicted_entries == 0
    # The daemon writes a new token when it restarts; the client reads it again.
    daemon.stop()
    daemon.start()
    assert client.evict(kernel_glob="*").evicted_entries == 0
