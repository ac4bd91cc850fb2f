#!/usr/bin/env bash
# tests/gpu/run.sh OUT_DIR: the GPU proof of issues 5 and 17, in one command, on a GPU
# host, from a checkout whose build was bundled into .gpu/bundle
# (tests/gpu/bundle.sh on the build machine; see tests/gpu/README.md).
#
#   1. starts jitd on a temporary Unix socket with a fresh cache directory
#      and this checkout's kernels/, and waits until it answers (nothing is
#      warmed: the first requests compile);
#   2. test_gpu_kernels: every kernel through daemon, client, module load and
#      launch against the CPU references (gtest XML in OUT_DIR), dumping the
#      diffusion cases for step 3;
#      then a check that at least one of its tests ran: when every test was
#      skipped (no device, no driver) the run proved nothing, and a failed
#      step "no GPU test ran" says so (issue 17, item 5);
#   3. crosscheck.py: the diffusion cubins through CuPy and eager PyTorch, and
#      against the C++ client's dumped outputs;
#   4. crosscheck_torch.py: all seven kernels, each held to one kind of
#      reference: eager PyTorch ops (diffusion), jitd's formulas evaluated in
#      torch (topk_sum, silu_and_mul, rmsnorm), a Python reference of the MoE
#      semantics (the align kernels); bit-exact or within KERNELS.md's ulps;
#   5. first_use.py: first-use latency (p50, p90, phases per run), jitd
#      against CuPy, nvcc and NVRTC;
#   6. kernel_bench.py: every kernel's µs, GB/s and % of a device copy, and
#      eager PyTorch's µs, on the serving shapes (about 120 s at most);
#   7. jitctl stats, then SIGTERM to the daemon and a wait for its exit;
#   8. OUT_DIR/report.md (write_report.py) from what the steps left in OUT_DIR,
#      also when the script is interrupted.
# A failing step does not stop the ones after it; the exit status is 1 when
# any step failed, 2 for a usage or setup error.
#
# Time: every step runs under `timeout`, and all of them together end before
# JITD_GPU_DEADLINE_S (default 570) seconds, so the report is written even
# inside a 10-minute slot on a shared GPU host. Other knobs:
#   JITD_GPU_BUNDLE       the bundle (default: .gpu/bundle in this checkout)
#   JITD_FIRST_USE_RUNS   fresh processes per first-use figure (default 7)
#   JITD_GPU_KEEP_WORK=1  keep the work directory (socket, cache, dumps,
#                         cubins; ~200 MB) even when every step passed
set -uo pipefail

if [ $# -ne 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
out_arg=$1
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$root" || exit 2
bundle=${JITD_GPU_BUNDLE:-$root/.gpu/bundle}
runs=${JITD_FIRST_USE_RUNS:-7}
deadline=$((SECONDS + ${JITD_GPU_DEADLINE_S:-570}))

for exe in jitd jitctl test_gpu_kernels first_use; do
  if [ ! -x "$bundle/bin/$exe" ]; then
    echo "run.sh: $bundle/bin/$exe is missing: run tests/gpu/bundle.sh on the build machine and copy .gpu/bundle here" >&2
    exit 2
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/jitd-gpu.XXXXXX") || exit 2
endpoint="unix:$work/jitd.sock"
mkdir -p "$work/bin"
# The bundled libraries go to jitd's own programs only, through these
# wrappers: Python, torch and CuPy keep the host's libraries (the bundle holds
# Debian's zlib, SQLite, OpenSSL, ...). NVRTC is the host's: the binaries look
# for it in /usr/local/cuda/lib (their build machine's layout), so the
# toolkit's lib64 follows the bundle. exec keeps the process id, so the
# daemon's wrapper pid is the daemon's.
for exe in jitd jitctl test_gpu_kernels first_use; do
  # shellcheck disable=SC2016 # $LD_LIBRARY_PATH and $@ are the wrapper's, expanded when it runs
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/%s" "$@"\n' \
    "$bundle" "$bundle" "$exe" >"$work/bin/$exe"
  chmod +x "$work/bin/$exe"
done
bin=$work/bin

steps="$out/steps.tsv"  # step, status, seconds, log: read by write_report.py
printf 'step\tstatus\tseconds\tlog\n' >"$steps"
failed=0

record() {  # record NAME RC SECONDS LOG
  local status=passed
  if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
    status="timed out"
  elif [ "$2" -ne 0 ]; then
    status="failed (exit $2)"
  fi
  record_status "$1" "$status" "$3" "$4"
}

record_status() {  # record_status NAME STATUS SECONDS LOG
  [ "$2" = passed ] || failed=1
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$steps"
  echo "run.sh: $1: $2 (${3}s)"
}

# step NAME LIMIT_S LOG COMMAND...: runs COMMAND under timeout, for LIMIT_S or
# what is left before the deadline less a reserve for the daemon's stats, its
# shutdown and the report, whichever is less.
step() {
  local name=$1 limit=$2 log=$3 start rc left
  shift 3
  left=$((deadline - SECONDS - 30))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -le 0 ]; then
    echo "not run: the run's deadline (JITD_GPU_DEADLINE_S) had passed" >"$log"
    record_status "$name" "not run (deadline)" 0 "$(basename "$log")"
    return
  fi
  echo "run.sh: $name (at most ${limit}s) ..."
  start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  record "$name" "$rc" $((SECONDS - start)) "$(basename "$log")"
}

daemon_pid=""
stop_daemon() {
  [ -n "$daemon_pid" ] || return 0
  local pid=$daemon_pid start=$SECONDS rc
  daemon_pid=""
  kill -TERM "$pid" 2>/dev/null
  # SIGTERM drains and exits 0; give it 30 s before SIGKILL.
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt 30 ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    record "stop daemon (SIGTERM)" 137 $((SECONDS - start)) jitd.log
    return
  fi
  wait "$pid" 2>/dev/null
  rc=$?
  record "stop daemon (SIGTERM)" "$rc" $((SECONDS - start)) jitd.log
}
# The report is written however the script ends (a signal included), from
# whatever the steps left behind.
finished=0
finish() {
  [ "$finished" = 0 ] || return 0
  finished=1
  stop_daemon
  if ! python3 "$root/tests/gpu/write_report.py" "$out" "tests/gpu/run.sh $out_arg"; then
    echo "run.sh: write_report.py failed; the step logs are in $out" >&2
    failed=1
  fi
  if [ "$failed" = 0 ] && [ "${JITD_GPU_KEEP_WORK:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "run.sh: work directory kept: $work"
  fi
  echo "run.sh: report: $out/report.md"
}
trap finish EXIT
trap 'record_status "run.sh" "interrupted by a signal" 0 -; exit 130' INT TERM

# --- The host ------------------------------------------------------------------
# The tree that ran: the bundled jitd's own revision (`git describe --always
# --dirty` of the tree it was built from, baked in at build time, printed by
# `jitd --version`), then this checkout's HEAD only where the checkout is a git
# repository of its own: an archive unpacked inside another repository would
# otherwise name that repository's commit, and a host's stale .git an old one.
tree_revision() {
  local version rev top head commit dirty untracked built
  version=$(timeout 20 "$bin/jitd" --version 2>&1 | head -n 1)
  rev=$(printf '%s\n' "$version" | sed -n 's/.*(git \([^)]*\)).*/\1/p')
  echo "jitd revision: ${rev:-unknown} (\`jitd --version\`: ${version:-no output})"
  top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)
  if [ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$(cd "$root" && pwd -P)" ]; then
    if [ -n "$top" ]; then
      echo "checkout: not a git repository of its own (it lies inside $top, whose commit does not name this tree)"
    else
      echo "checkout: not a git repository of its own"
    fi
    return
  fi
  head=$(git -C "$root" rev-parse --verify -q HEAD)
  echo "checkout HEAD: ${head:-none (no commit yet)} $(git -C "$root" log -1 --format=%s 2>/dev/null)"
  dirty=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
  untracked=$(git -C "$root" status --porcelain 2>/dev/null | grep -c '^??')
  if [ "$dirty" -gt 0 ]; then
    echo "checkout: dirty: $dirty tracked files changed, $untracked untracked (first 20 below)"
    git -C "$root" status --short --untracked-files=no 2>/dev/null | head -n 20
  else
    echo "checkout: clean (no tracked file changed; $untracked untracked)"
  fi
  commit=$(git -C "$root" rev-parse --verify -q "${rev%-dirty}^{commit}" 2>/dev/null)
  if [ -z "$rev" ] || [ "$rev" = unknown ]; then
    echo "jitd revision vs checkout HEAD: cannot tell (the binary names no revision)"
  elif [ -n "$head" ] && [ "$commit" = "$head" ]; then
    if [ "$rev" != "${rev%-dirty}" ] || [ "$dirty" -gt 0 ]; then
      echo "jitd revision vs checkout HEAD: the same commit, but the binary's tree or the checkout is dirty:" \
        "their sources may differ"
    else
      echo "jitd revision vs checkout HEAD: the same commit"
    fi
  else
    built="$rev (not a commit of this checkout)"
    [ -z "$commit" ] || built="$rev ($commit)"
    echo "jitd revision vs checkout HEAD: DIFFER: the binary was built from $built;" \
      "the checkout is at ${head:-no commit}"
  fi
}

# The kernels the daemon compiled (this checkout's kernels/), by digest,
# against those of the tree the bundle was built from (bundle.sh's SOURCE):
# a stale .git or an unpacked archive cannot make this line wrong.
kernels_that_ran() {
  local ran built revision
  ran=$(bash "$root/tests/gpu/kernels_digest.sh" "$root/kernels" 2>/dev/null) || ran="none (no kernels/ here)"
  echo "kernels/ that ran: digest $ran"
  built=$(sed -n 's/^kernels //p' "$bundle/SOURCE" 2>/dev/null)
  revision=$(sed -n 's/^revision //p' "$bundle/SOURCE" 2>/dev/null)
  if [ -z "$built" ]; then
    echo "kernels/ vs the bundle's build tree: cannot tell (the bundle has no SOURCE file)"
  elif [ "$built" = "$ran" ]; then
    echo "kernels/ vs the bundle's build tree ($revision): the same kernels"
  else
    echo "kernels/ vs the bundle's build tree ($revision): DIFFER (built with $built)"
  fi
}

{
  echo "## the tree that ran"
  tree_revision
  kernels_that_ran
  echo "## nvidia-smi -L"
  nvidia-smi -L 2>&1
  echo "## nvidia-smi --query-gpu"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  echo "## uname -a"
  uname -a
  echo "## nvcc --version"
  /usr/local/cuda/bin/nvcc --version 2>&1 | tail -n 2
  echo "## python3 (torch, CuPy)"
  python3 -c 'import sys, torch, cupy; print(sys.version.split()[0], "torch", torch.__version__, "(CUDA", str(torch.version.cuda) + ")", "CuPy", cupy.__version__)' 2>&1
} >"$out/host.txt"

# --- 1. The daemon -------------------------------------------------------------
echo "run.sh: starting jitd on $endpoint (cache $work/cache, kernels $root/kernels)"
"$bin/jitd" --listen "$endpoint" --cache-dir "$work/cache" --kernels "$root/kernels" \
  >"$out/jitd.log" 2>&1 &
daemon_pid=$!
ready_start=$SECONDS
ready=1
# Ready when it answers a call; bounded, and it stops early if jitd exits.
until "$bin/jitctl" --endpoint "$endpoint" --timeout 2s stats >/dev/null 2>&1; do
  if ! kill -0 "$daemon_pid" 2>/dev/null || [ $((SECONDS - ready_start)) -ge 60 ]; then
    ready=0
    break
  fi
  sleep 0.2
done
if [ "$ready" = 1 ]; then
  record "start jitd (ready)" 0 $((SECONDS - ready_start)) jitd.log
else
  record "start jitd (ready)" 1 $((SECONDS - ready_start)) jitd.log
  echo "run.sh: jitd did not become ready; see $out/jitd.log" >&2
fi

# --- 2. Every kernel against the CPU references ---------------------------------
step "test_gpu_kernels" 300 "$out/test_gpu_kernels.txt" \
  env JITD_ENDPOINT="$endpoint" JITD_GPU_DUMP_DIR="$work/dump" \
  "$bin/test_gpu_kernels" --gtest_output="xml:$out/test_gpu_kernels.xml"

# Every test skipped (no driver, no device) proves nothing: a failed step.
# write_report.py --gtest-ran reads the XML: exit 0 when a test ran, 1 when
# none did, 2 when there is no readable XML.
ran_start=$SECONDS
ran_summary=$(python3 "$root/tests/gpu/write_report.py" --gtest-ran "$out/test_gpu_kernels.xml" 2>&1)
ran_rc=$?
ran_summary=$(printf '%s' "$ran_summary" | tr '\t\n|' '   ')
if [ "$ran_rc" -eq 0 ]; then
  record_status "GPU tests ran ($ran_summary)" passed $((SECONDS - ran_start)) test_gpu_kernels.xml
else
  record_status "no GPU test ran" "failed ($ran_summary)" $((SECONDS - ran_start)) test_gpu_kernels.xml
fi

# --- 3. CuPy and eager PyTorch ----------------------------------------------------
step "crosscheck.py (CuPy, eager PyTorch)" 180 "$out/crosscheck.txt" \
  python3 tests/gpu/crosscheck.py --jitctl "$bin/jitctl" --endpoint "$endpoint" --work "$work/cubins" \
  --dump "$work/dump"

# --- 4. All seven kernels: eager ops, formulas in torch, the MoE semantics ----------
step "crosscheck_torch.py (seven kernels: eager ops, formulas in torch, MoE semantics)" 150 "$out/crosscheck_torch.txt" \
  python3 tests/gpu/crosscheck_torch.py --jitctl "$bin/jitctl" --endpoint "$endpoint" --work "$work/cubins" \
  --report "$out/crosscheck_torch.md" --json "$out/crosscheck_torch.json"

# --- 5. First-use latency ----------------------------------------------------------
step "first_use.py (latency)" 420 "$out/first_use.txt" \
  python3 tests/gpu/first_use.py --first-use "$bin/first_use" --endpoint "$endpoint" --kernels "$root/kernels" \
  --runs "$runs" --json "$out/first_use.json"

# --- 6. Kernel benchmark --------------------------------------------------------------
# 120 s at most, or what the deadline leaves; the script starts no case past
# its budget (20 s less), so it writes its tables before `timeout` would end it.
bench_limit=120
bench_left=$((deadline - SECONDS - 30))
[ "$bench_limit" -le "$bench_left" ] || bench_limit=$bench_left
bench_budget=$((bench_limit - 20))
[ "$bench_budget" -ge 5 ] || bench_budget=5
step "kernel_bench.py (µs, GB/s, vs copy and eager)" "$bench_limit" "$out/kernel_bench.txt" \
  python3 tests/gpu/kernel_bench.py --jitctl "$bin/jitctl" --endpoint "$endpoint" --work "$work/cubins" \
  --budget-s "$bench_budget" --report "$out/kernel_bench.md" --json "$out/kernel_bench.json"

# --- 7. The daemon's account, then stop it ------------------------------------------
# Outside the deadline's reckoning: its reserve is for this.
stats_start=$SECONDS
timeout 15 "$bin/jitctl" --endpoint "$endpoint" stats >"$out/jitd_stats.txt" 2>&1
record "jitctl stats" $? $((SECONDS - stats_start)) jitd_stats.txt
timeout 15 "$bin/jitctl" --endpoint "$endpoint" --json stats >"$out/jitd_stats.json" 2>/dev/null

# --- 8. The report (finish, on exit) ---------------------------------------------------
finish
exit "$failed"
