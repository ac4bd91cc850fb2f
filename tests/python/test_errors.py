"""Every error the daemon produces, as a Python caller receives it: the
exception class, the gRPC code and the daemon's own message."""

from __future__ import annotations

import pickle
import socket
import threading
import time

import grpc
import jitd
import pytest
from conftest import poll_until


def test_unknown_kernel_is_not_found_naming_the_close_match(client):
    with pytest.raises(jitd.NotFound) as error:
        client.get_kernel("small.fil", dtype="fp32")
    assert error.value.code == grpc.StatusCode.NOT_FOUND
    assert error.value.message == "unknown kernel 'small.fil'; did you mean small.fill?"
    assert isinstance(error.value, LookupError)
    assert str(error.value) == "NOT_FOUND: unknown kernel 'small.fil'; did you mean small.fill?"


def test_unknown_kernel_without_close_matches_points_to_the_kernel_list(client):
    with pytest.raises(jitd.NotFound, match="jitctl kernels"):
        client.get_kernel("zzzzzzzzzzzzzzzzzzzz")


@pytest.mark.parametrize("kwargs, message", [
    ({"dtype": "bf16"}, "dtype=bf16 is not allowed for kernel small.fill; dtype (fp32|fp64)"),
    ({}, "kernel small.fill needs parameter dtype (fp32|fp64)"),
])
def test_bad_or_missing_param_is_invalid_argument_saying_what_is_allowed(client, kwargs, message):
    with pytest.raises(jitd.InvalidArgument) as error:
        client.get_kernel("small.fill", **kwargs)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.message == message
    assert isinstance(error.value, ValueError)


def test_unknown_param_is_invalid_argument_listing_the_kernels_params(client):
    with pytest.raises(jitd.InvalidArgument) as error:
        client.get_kernel("small.scale", factor=2)
    assert error.value.message == "kernel small.scale has no parameter 'factor'; its parameters: clamp (off|on, default off)"


def test_option_outside_the_allow_list_is_invalid_argument_saying_why(client):
    with pytest.raises(jitd.InvalidArgument) as error:
        client.get_kernel("small.fill", dtype="fp32", options=["-I/etc"])
    assert "option '-I/etc' is not allowed" in error.value.message
    assert "include paths and forced includes come from the daemon" in error.value.message


def test_unknown_arch_is_invalid_argument_listing_the_supported_ones(client):
    with pytest.raises(jitd.InvalidArgument) as error:
        client.get_kernel("small.fill", "sm_91", dtype="fp32")
    assert "arch 'sm_91' is not supported" in error.value.message
    assert "sm_90" in error.value.message and "sm_100" in error.value.message


def test_nvrtc_rejection_is_a_compile_error_carrying_the_log_and_is_never_retried(client):
    with pytest.raises(jitd.CompileError) as error:
        client.get_kernel("small.broken")
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "NVRTC failed for broken.cu" in error.value.message
    assert 'broken.cu(3): error: identifier "undeclared_in_broken_kernel" is undefined' in error.value.log
    assert 'error detected in the compilation of "' in error.value.log
    assert 'broken.cu".' in error.value.log  # the user's kernels file, by its path
    assert client.counters.get_kernel_rpcs == 1 and client.counters.retries == 0
    # Errors are not memoized: asking again asks the daemon again.
    with pytest.raises(jitd.CompileError):
        client.get_kernel("small.broken")
    assert client.counters.get_kernel_rpcs == 2


def test_admin_call_without_the_token_is_permission_denied_and_the_token_file_admits(make_daemon, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    daemon = make_daemon(args=["--admin-token-file", str(token)])
    with pytest.raises(jitd.PermissionDenied) as error:
        daemon.client().evict(kernel_glob="*")
    assert error.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.value.message == ("Evict needs the admin token: jitctl --admin-token-file FILE; other clients "
                                   "send it as 'authorization: Bearer <token>'")
    assert isinstance(error.value, PermissionError)
    assert daemon.client().stats().entries == 0  # reading needs no token
    assert daemon.client(admin_token_file=token).evict(kernel_glob="*").evicted_entries == 0
    assert daemon.client(admin_token="s3cret").evict(kernel_glob="*", dry_run=True).dry_run
    with pytest.raises(jitd.PermissionDenied):
        daemon.client(admin_token="wrong").evict(kernel_glob="*")


def test_no_daemon_is_unavailable_naming_the_endpoint_quickly(tmp_path):
    endpoint = f"unix:{tmp_path}/nobody.sock"
    client = jitd.Client(endpoint, retries=0)
    start = time.monotonic()
    with pytest.raises(jitd.Unavailable) as error:
        client.get_kernel("small.fill", dtype="fp32")
    assert time.monotonic() - start < 2  # fails fast: no 20 s connect timeout
    assert error.value.code == grpc.StatusCode.UNAVAILABLE
    assert error.value.message.startswith(f"cannot reach jitd at {endpoint}: ")
    assert "is the daemon running?" in error.value.message
    assert error.value.endpoint == endpoint
    assert isinstance(error.value, ConnectionError)
    with pytest.raises(jitd.Unavailable):
        client.stats()
    assert client.counters.retries == 0


def unreachable(endpoint: str, reason: str) -> str:
    return (f"cannot reach jitd at {endpoint}: {reason} (is the daemon running? start it with `jitd`; "
            f"`jitctl --endpoint {endpoint} health` checks it)")


# What gRPC's own text of a failed connection is made of; none of it helps.
GRPC_NOISE = ("debug_error_string", "{created_time", "failed to connect to all addresses", "last error",
              "ipv4:", "UNKNOWN:", "FAILED_PRECONDITION", "addr:")


def test_an_unreachable_daemon_is_a_short_reason_naming_the_endpoint_and_what_to_do(tmp_path):
    stale = tmp_path / "stale.sock"  # a socket file nobody listens on (a daemon that was killed)
    with socket.socket(socket.AF_UNIX) as leftover:
        leftover.bind(str(stale))
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cases = [(f"unix:{tmp_path}/nobody.sock", f"no socket at {tmp_path}/nobody.sock"),
             (f"unix:{stale}", "connection refused: nothing accepts connections there"),
             (f"127.0.0.1:{port}", "connection refused: nothing accepts connections there")]
    for endpoint, reason in cases:
        client = jitd.Client(endpoint, retries=0)
        for call in (client.stats, lambda: client.get_kernel("small.fill", dtype="fp32"), client.health):
            with pytest.raises(jitd.Unavailable) as error:
                call()
            assert error.value.message == unreachable(endpoint, reason)
            assert str(error.value) == f"UNAVAILABLE: {unreachable(endpoint, reason)}"
            for noise in GRPC_NOISE:
                assert noise not in str(error.value), (noise, str(error.value))
    # wait_until_serving's own deadline says why as well, not "Deadline Exceeded".
    endpoint, reason = cases[0]
    with pytest.raises(jitd.DeadlineExceeded) as error:
        jitd.Client(endpoint).wait_until_serving(timeout=0.3)
    assert error.value.message == (f"jitd at {endpoint} was not serving within 0.3 s; last: "
                                   + unreachable(endpoint, reason))


class _RpcError(grpc.RpcError):
    """What a failed call raises: a code and gRPC's details."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def __str__(self) -> str:
        return f"<_InactiveRpcError ... debug_error_string = \"{{created_time:...}}\">"


@pytest.mark.parametrize("details, message", [
    # A transport cause this client has no words for: the chain's last link only.
    ("failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:7070: Network is unreachable",
     unreachable("10.0.0.1:7070", "Network is unreachable")),
    ("Socket closed", unreachable("10.0.0.1:7070", "the daemon closed the connection")),
    ("DNS resolution failed for nohost:7070: UNAVAILABLE: ...", unreachable("10.0.0.1:7070",
                                                                           "cannot resolve the host name")),
    # UNAVAILABLE the daemon itself answered keeps its message.
    ("the compile worker is gone", "jitd at 10.0.0.1:7070: the compile worker is gone"),
])
def test_unavailable_from_grpc_is_reworded_and_from_the_daemon_kept(details, message):
    error = jitd.errors.from_rpc_error(_RpcError(grpc.StatusCode.UNAVAILABLE, details), "10.0.0.1:7070")
    assert isinstance(error, jitd.Unavailable) and error.message == message


def test_an_error_without_details_never_shows_grpcs_debug_string():
    error = jitd.errors.from_rpc_error(_RpcError(grpc.StatusCode.INTERNAL, ""), "unix:/s")
    assert isinstance(error, jitd.Internal)
    assert str(error) == "INTERNAL: the call to jitd at unix:/s failed without a message"


def test_the_default_policy_gives_up_on_a_missing_daemon_within_two_seconds(tmp_path):
    client = jitd.Client(f"unix:{tmp_path}/nobody.sock")
    start = time.monotonic()
    with pytest.raises(jitd.Unavailable):
        client.stats()
    assert time.monotonic() - start < 4  # 0.1 + 0.2 + 0.4 + 0.8 s of backoff, on a loaded machine
    assert client.counters.retries == 4  # 5 attempts


def test_a_deadline_shorter_than_the_compile_is_deadline_exceeded_and_not_retried(make_daemon):
    daemon = make_daemon()
    client = daemon.client()
    # Connected first: on a loaded machine the connection alone can take
    # most of 0.3 s, and a call that never reached the daemon abandons nothing.
    client.wait_until_serving()
    start = time.monotonic()
    with pytest.raises(jitd.DeadlineExceeded) as error:
        client.get_kernel("small.block_sum", threads=1024, timeout=0.3)
    assert time.monotonic() - start < 3  # the compile takes a second or more
    assert error.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert isinstance(error.value, TimeoutError)
    # Whoever notices first words it: the daemon ("deadline passed while
    # small.block_sum for sm_90 was compiling ...") or this client ("GetKernel
    # small.block_sum{threads=1024}: no answer from jitd at ... within 0.3 s").
    assert "small.block_sum" in error.value.message
    assert "Deadline Exceeded" not in error.value.message  # never gRPC's bare words
    assert client.counters.get_kernel_rpcs == 1
    # The daemon notices the caller left and cancels the compile nobody wants.
    assert poll_until(lambda: client.stats().abandoned == 1 and client.stats().compiles_in_flight == 0)


def test_a_deadline_the_client_notices_first_names_the_call_the_endpoint_and_the_timeout(tmp_path):
    # A server that accepts GetKernel and never answers: the client's own
    # deadline fires, and its message says more than gRPC's "Deadline Exceeded".
    from concurrent.futures import ThreadPoolExecutor

    release = threading.Event()
    silent = grpc.method_handlers_generic_handler("jitd.v1.Compiler", {
        "GetKernel": grpc.unary_unary_rpc_method_handler(lambda request, context: release.wait(10) and b"")})
    server = grpc.server(ThreadPoolExecutor(2), handlers=[silent])
    endpoint = f"unix:{tmp_path}/silent.sock"
    server.add_insecure_port(endpoint)
    server.start()
    try:
        with pytest.raises(jitd.DeadlineExceeded) as error:
            jitd.Client(endpoint, retries=0).get_kernel("small.fill", dtype="fp32", timeout=0.3)
    finally:
        release.set()
        server.stop(None)
    assert error.value.message == (f"GetKernel small.fill{{dtype=fp32}}: no answer from jitd at {endpoint} within "
                                   "0.3 s (a compile can take seconds: pass a larger timeout=)")


def test_a_full_compile_queue_is_resource_exhausted_without_retries_and_succeeds_with_them(make_daemon):
    daemon = make_daemon(args=["--max-queue", "1"], workers=1)
    threads = ["128", "256", "512", "1024"]

    def race(retries, tag):
        errors: list = [None] * len(threads)
        start = threading.Barrier(len(threads))

        def ask(i: int) -> None:
            client = daemon.client(retries=retries)
            start.wait()
            try:
                client.get_kernel("small.block_sum", threads=threads[i], options=[f"-DRACE={tag}"])
            except jitd.JitdError as error:
                errors[i] = error

        callers = [threading.Thread(target=ask, args=(i,)) for i in range(len(threads))]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        return errors

    refused = [e for e in race(0, "1") if e is not None]
    assert len(refused) >= 2  # one compiling and one waiting were accepted
    for error in refused:
        assert isinstance(error, jitd.ResourceExhausted)
        assert "compile queue is full (1 jobs waiting)" in error.message
    # The same race with backoff and enough attempts: everyone gets a cubin.
    patient = jitd.RetryPolicy(max_attempts=40, initial_backoff=0.1, max_backoff=0.5)
    assert race(patient, "2") == [None] * len(threads)


def test_a_malformed_endpoint_is_invalid_argument_before_any_call():
    with pytest.raises(jitd.InvalidArgument, match="neither unix:PATH nor HOST:PORT"):
        jitd.Client("localhost")
    with pytest.raises(jitd.InvalidArgument, match="no valid port"):
        jitd.Client("localhost:99999")
    with pytest.raises(jitd.InvalidArgument, match="names no socket path"):
        jitd.Client("unix:")


def test_errors_pickle_with_their_code_message_and_details():
    errors = [
        jitd.NotFound("unknown kernel 'x'", endpoint="unix:/s"),
        jitd.CompileError("NVRTC failed for a.cu: NVRTC_ERROR_COMPILATION\na.cu(1): error: boom"),
        jitd.Unavailable("cannot reach jitd"),
        jitd.DeadlineExceeded("late"),
        jitd.PermissionDenied("needs the token"),
        jitd.KernelsMissing("2 missing", missing=[jitd.KernelSpec("a"), jitd.KernelSpec("b")]),
        jitd.JitdError("odd", code=grpc.StatusCode.ABORTED),
    ]
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert (copy.code, copy.message, copy.endpoint, str(copy)) == (error.code, error.message, error.endpoint,
                                                                       str(error))
    assert pickle.loads(pickle.dumps(errors[1])).log == "a.cu(1): error: boom"
    assert pickle.loads(pickle.dumps(errors[5])).missing == [jitd.KernelSpec("a"), jitd.KernelSpec("b")]


def test_retry_policy_refuses_codes_that_never_succeed_again():
    with pytest.raises(ValueError, match="FAILED_PRECONDITION"):
        jitd.RetryPolicy(codes={grpc.StatusCode.FAILED_PRECONDITION})
    with pytest.raises(ValueError):
        jitd.RetryPolicy(max_attempts=0)
    assert jitd.RetryPolicy.of(0).max_attempts == 1
    assert jitd.RetryPolicy.of(3).max_attempts == 4
    assert jitd.RetryPolicy.of(None) == jitd.RetryPolicy()


def test_a_request_outside_the_lock_is_a_lock_violation_not_a_compile_error(make_daemon, tmp_path):
    lock = tmp_path / "small.lock"
    lock.write_text("schema = 1\n")  # a lock of the unnamed tree that lists nothing
    daemon = make_daemon(args=["--lock", str(lock)])
    with daemon.client() as client:
        with pytest.raises(jitd.LockViolation, match=r"is not in .*small\.lock") as error:
            client.get_kernel("small.fill", dtype="fp32")
    assert error.value.reason == "LOCK_VIOLATION"
    assert error.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert not isinstance(error.value, jitd.CompileError)
    again = pickle.loads(pickle.dumps(error.value))
    assert type(again) is jitd.LockViolation and again.reason == "LOCK_VIOLATION"


def test_an_error_without_a_reason_keeps_its_codes_class():
    assert type(jitd.errors.error_for(grpc.StatusCode.FAILED_PRECONDITION, "NVRTC says no")) is jitd.CompileError
    unknown = jitd.errors.error_for(grpc.StatusCode.FAILED_PRECONDITION, "new", reason="SOMETHING_NEW")
    assert type(unknown) is jitd.JitdError and unknown.reason == "SOMETHING_NEW"
    assert type(jitd.errors.error_for(grpc.StatusCode.NOT_FOUND, "x", reason="TREE_REFUSED")) is jitd.TreeRefused
