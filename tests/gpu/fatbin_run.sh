#!/usr/bin/env bash
# tests/gpu/fatbin_run.sh OUT_DIR: the fatbin proof of issue 19 on a GPU
# host, from a checkout whose build was bundled into .gpu/bundle
# (tests/gpu/bundle.sh). Starts jitd with this checkout's kernels, a fresh
# cache and a fleet set, then runs the GPU tests of fatbins (Fatbin.*: a
# fatbin of sm_80 and sm_100 SASS plus compute_80 PTX runs bit-exact through
# the PTX path; one holding sm_90 SASS loads that SASS) beside the plain
# modulate_scale_shift cases, fetches a fleet fatbin with jitctl, and
# writes what it saw under OUT_DIR (gtest XML, logs, jitctl stats).
set -uo pipefail
[ $# -eq 1 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" && out=$(cd "$1" && pwd)
bundle=${JITD_GPU_BUNDLE:-$root/.gpu/bundle}
work=$(mktemp -d "${TMPDIR:-/tmp}/jitd-fatbin.XXXXXX")
mkdir -p "$work/bin"
for exe in jitd jitctl test_gpu_kernels; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/%s" "$@"\n' \
    "$bundle" "$bundle" "$exe" >"$work/bin/$exe"
  chmod +x "$work/bin/$exe"
done
export JITD_ENDPOINT="unix:$work/jitd.sock"
"$work/bin/jitd" --listen "$JITD_ENDPOINT" --cache-dir "$work/cache" --kernels "$root/kernels" \
  --fleet-archs sm_90,sm_100 >"$out/jitd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 300); do "$work/bin/jitctl" health >/dev/null 2>&1 && break; sleep 0.1; done
failed=0
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv >"$out/gpu.txt" 2>&1
timeout 400 "$work/bin/test_gpu_kernels" --gtest_filter='Fatbin.*:Shapes/ModulateScaleShift.*' \
  --gtest_output="xml:$out/test_gpu_fatbin.xml" >"$out/test_gpu_fatbin.log" 2>&1 || failed=1
"$work/bin/jitctl" get diffusion.modulate_scale_shift -p dtype=bf16 --fleet -o "$work/fleet.fatbin" \
  >"$out/jitctl_get_fleet.txt" 2>&1 || failed=1
"$work/bin/jitctl" stats >"$out/jitctl_stats.txt" 2>&1 || failed=1
kill -TERM "$daemon"; wait "$daemon"
grep -E "tests? (ran|PASSED|FAILED)|\[  (PASSED|FAILED|SKIPPED)" "$out/test_gpu_fatbin.log" | tail -5
echo "fatbin_run.sh: $([ $failed = 0 ] && echo passed || echo FAILED); logs in $1"
rm -rf "$work"
exit $failed
