#!/usr/bin/env bash
# tests/gpu/python_run.sh OUT_DIR: the GPU proof of the Python client (issue
# 9), in one command, on a GPU host, with the host's own python3 (torch,
# CuPy, grpcio and some protobuf; nothing installable), from a checkout whose
# .gpu/bundle was prepared by tests/gpu/python_bundle.sh on the build machine.
#
#   1. the host: GPU, driver, python3 and its grpcio, protobuf (version and
#      implementation), torch, CuPy, cuda-python (OUT_DIR/host.txt);
#   2. import: the bundled package (.gpu/bundle/python on PYTHONPATH) and its
#      generated stubs load on the host's runtimes;
#   3. starts the bundled jitd on a temporary Unix socket with a fresh cache
#      and this checkout's kernels/, ready when its health check says SERVING
#      (asked by the Python client);
#   4. pytest tests/python/test_gpu_loaders.py against that daemon
#      (JITD_TEST_ENDPOINT): CuPy, the ctypes driver, jitd.torch (streams, a
#      CUDA graph), cuda-python, each bit for bit against the CPU reference,
#      and the README's examples (OUT_DIR/pytest.txt, pytest.xml);
#   5. the five-line README example alone, as a reader runs it, with
#      JITD_ENDPOINT set (OUT_DIR/readme_example_N.txt);
#   6. the daemon's stats (OUT_DIR/jitd_stats.json), then SIGTERM and a wait;
#   7. OUT_DIR/summary.md: each step's result and time, the pytest summary.
# A failing step does not stop the others; exit 1 when any failed, 2 for a
# usage or setup error. Every step runs under `timeout`, all of them within
# JITD_GPU_DEADLINE_S (default 540) seconds. JITD_GPU_BUNDLE: another bundle;
# JITD_GPU_KEEP_WORK=1 keeps the socket, cache and logs directory.
set -uo pipefail

if [ $# -ne 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$root" || exit 2
bundle=${JITD_GPU_BUNDLE:-$root/.gpu/bundle}
deadline=$((SECONDS + ${JITD_GPU_DEADLINE_S:-540}))

for need in bin/jitd python/jitd/_proto/jitd/v1/compiler_pb2.py; do
  if [ ! -e "$bundle/$need" ]; then
    echo "python_run.sh: $bundle/$need is missing: run tests/gpu/python_bundle.sh on the build machine" \
      "and bring .gpu/bundle here" >&2
    exit 2
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/jitd-gpu-python.XXXXXX") || exit 2
endpoint="unix:$work/jitd.sock"
# The bundled libraries go to jitd only, through this wrapper: python3,
# torch and CuPy keep the host's. NVRTC is the host's (lib64 after the bundle).
# shellcheck disable=SC2016 # $LD_LIBRARY_PATH and $@ are the wrapper's
printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/jitd" "$@"\n' \
  "$bundle" "$bundle" >"$work/jitd"
chmod +x "$work/jitd"
export PYTHONPATH="$bundle/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1

steps=$out/steps.tsv
printf 'step\tstatus\tseconds\tlog\n' >"$steps"
failed=0

record() {  # record NAME RC SECONDS LOG
  local status=passed
  if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
    status="timed out"
  elif [ "$2" -ne 0 ]; then
    status="failed (exit $2)"
  fi
  [ "$status" = passed ] || failed=1
  printf '%s\t%s\t%s\t%s\n' "$1" "$status" "$3" "$4" >>"$steps"
  echo "python_run.sh: $1: $status (${3}s)"
}

step() {  # step NAME LIMIT_S LOG COMMAND...: under timeout, within the deadline less a reserve
  local name=$1 limit=$2 log=$3 start rc left
  shift 3
  left=$((deadline - SECONDS - 30))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -le 0 ]; then
    echo "not run: the deadline (JITD_GPU_DEADLINE_S) had passed" >"$log"
    record "$name" 124 0 "$(basename "$log")"
    return
  fi
  echo "python_run.sh: $name (at most ${limit}s) ..."
  start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  record "$name" "$rc" $((SECONDS - start)) "$(basename "$log")"
}

daemon_pid=""
stop_daemon() {
  [ -n "$daemon_pid" ] || return 0
  local pid=$daemon_pid start=$SECONDS
  daemon_pid=""
  kill -TERM "$pid" 2>/dev/null
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt 30 ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    record "stop jitd (SIGTERM)" 137 $((SECONDS - start)) jitd.log
    return
  fi
  wait "$pid" 2>/dev/null
  record "stop jitd (SIGTERM)" $? $((SECONDS - start)) jitd.log
}

summary() {
  {
    echo "# Python client on the GPU host"
    echo
    # The tree that ran is the bundled jitd's (its own --version); a copied
    # checkout's .git may be stale or belong to an enclosing repository.
    echo "\`tests/gpu/python_run.sh\`, $(date -u '+%Y-%m-%d %H:%M UTC'), jitd revision" \
      "$(timeout 20 "$work/jitd" --version 2>/dev/null | sed -n 's/.*(git \([0-9a-f]*\)).*/\1/p' | head -n 1)"
    echo
    echo "| step | status | seconds | log |"
    echo "|---|---|---:|---|"
    tail -n +2 "$steps" | while IFS=$'\t' read -r name status seconds log; do
      echo "| $name | $status | $seconds | $log |"
    done
    echo
    echo "## Host"
    echo
    echo '```'
    cat "$out/host.txt" 2>/dev/null
    echo '```'
    echo
    echo "## pytest tests/python/test_gpu_loaders.py"
    echo
    echo '```'
    grep -E 'PASSED|FAILED|SKIPPED|ERROR|[0-9]+ (passed|failed)' "$out/pytest.txt" 2>/dev/null | tail -n 80
    echo '```'
  } >"$out/summary.md"
}

finished=0
finish() {
  [ "$finished" = 0 ] || return 0
  finished=1
  stop_daemon
  summary
  if [ "$failed" = 0 ] && [ "${JITD_GPU_KEEP_WORK:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "python_run.sh: work directory kept: $work"
  fi
  echo "python_run.sh: summary: $out/summary.md"
}
trap finish EXIT
trap 'record "python_run.sh" 130 0 -; exit 130' INT TERM

# --- 1. The host -----------------------------------------------------------------------
{
  echo "## nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  echo "## uname -a"
  uname -a
  echo "## python3"
  python3 - <<'EOF' 2>&1
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("grpc", "google.protobuf", "torch", "cupy", "cuda.core", "cuda.bindings", "numpy", "pytest"):
    try:
        module = importlib.import_module(name)
        print(f"{name:16} {getattr(module, '__version__', '(no version)')}")
    except Exception as error:  # noqa: BLE001 - report whatever it is
        print(f"{name:16} not importable: {type(error).__name__}: {error}")
try:
    from google.protobuf.internal import api_implementation
    print(f"{'protobuf impl':16} {api_implementation.Type()}")
except Exception as error:  # noqa: BLE001
    print(f"protobuf impl    unknown: {error}")
EOF
} >"$out/host.txt"
cat "$out/host.txt"

# --- 2. The bundled package imports on the host's runtimes -------------------------------------
step "import jitd (bundled, host grpcio/protobuf)" 60 "$out/import.txt" python3 -c '
import jitd, grpc, google.protobuf
from jitd._proto.jitd.v1 import compiler_pb2, cache_admin_pb2, compiler_pb2_grpc
print("jitd", jitd.__version__, "from", jitd.__file__)
print("stubs", compiler_pb2.__name__, compiler_pb2.GetKernelRequest.DESCRIPTOR.full_name)
print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'

# --- 3. The daemon -------------------------------------------------------------------------------
echo "python_run.sh: starting jitd on $endpoint (cache $work/cache, kernels $root/kernels)"
"$work/jitd" --listen "$endpoint" --cache-dir "$work/cache" --kernels "$root/kernels" >"$out/jitd.log" 2>&1 &
daemon_pid=$!
step "start jitd (health SERVING)" 90 "$out/ready.txt" python3 -c "
import jitd, time
start = time.monotonic()
jitd.Client('$endpoint').wait_until_serving(timeout=60)
print('SERVING after %.2f s' % (time.monotonic() - start))"

# --- 4. The GPU tests ------------------------------------------------------------------------------
step "pytest test_gpu_loaders.py" 360 "$out/pytest.txt" \
  env JITD_TEST_ENDPOINT="$endpoint" JITD_BINARY="$work/jitd" \
  python3 -m pytest -v -rs -p no:cacheprovider --junitxml="$out/pytest.xml" \
  --rootdir "$root/tests/python" "$root/tests/python/test_gpu_loaders.py"
# Tests skipped for want of a GPU mean this run proved nothing: a failure.
# (Other skips, such as cuda-python not being installed, show in the summary.)
if grep -qE 'SKIPPED.*(no usable CUDA GPU|torch sees no CUDA)' "$out/pytest.txt"; then
  record "the GPU was used (no test skipped for want of one)" 1 0 pytest.txt
fi

# --- 5. The README examples as a reader runs them ----------------------------------------------------
python3 - "$root/client/python/README.md" "$work" <<'EOF'
import re, sys, pathlib
examples = re.findall(r"<!-- gpu-example -->\s*```python\n(.*?)```", pathlib.Path(sys.argv[1]).read_text(), re.S)
for i, code in enumerate(examples, 1):
    pathlib.Path(sys.argv[2], f"readme_example_{i}.py").write_text(code)
EOF
for example in "$work"/readme_example_*.py; do
  [ -e "$example" ] || { record "README examples found" 1 0 -; break; }
  name=$(basename "$example" .py)
  step "$name" 120 "$out/$name.txt" bash -c '
    echo "\$ JITD_ENDPOINT=$1 python3 $(basename "$2")"; cat "$2"; echo "---"
    start=$(date +%s%N)
    JITD_ENDPOINT="$1" python3 "$2" && echo "ok: ran, its assert held ($(( ($(date +%s%N) - start) / 1000000 )) ms)"' \
    _ "$endpoint" "$example"
done

# --- 6. The daemon's account ------------------------------------------------------------------------
step "jitd stats" 30 "$out/jitd_stats.json" python3 -c "
import dataclasses, json, jitd
print(json.dumps(dataclasses.asdict(jitd.Client('$endpoint').stats()), indent=1))"

finish
exit "$failed"
