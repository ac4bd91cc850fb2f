#!/usr/bin/env bash
# Session 25: align_block_size at several grids (GPU tests + bench), silu variants.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); cd "$root"
out=/tmp/s25; mkdir -p $out
bundle=$root/.gpu/bundle; work=$(mktemp -d /tmp/js25.XXXXXX); mkdir -p $work/bin
for exe in jitd jitctl test_gpu_kernels; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/%s" "$@"\n' "$bundle" "$bundle" "$exe" >"$work/bin/$exe"; chmod +x "$work/bin/$exe"
done
bin=$work/bin
start_daemon() {  # NAME KERNELS_DIR
  "$bin/jitd" --listen "unix:$work/$1.sock" --cache-dir "$work/cache-$1" --kernels "$2" >"$out/jitd-$1.log" 2>&1 &
  for i in $(seq 1 100); do "$bin/jitctl" --endpoint "unix:$work/$1.sock" --timeout 2s stats >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "daemon $1 not ready" >&2
}
SECONDS=0
start_daemon main "$root/kernels"
JITD_ENDPOINT="unix:$work/main.sock" timeout 150 "$bin/test_gpu_kernels" --gtest_filter='MoeAlign*:*SingleToken*' >$out/gtest_align.txt 2>&1; echo "gtest align rc $? at $SECONDS s"; tail -3 $out/gtest_align.txt
timeout 100 python3 tests/gpu/kernel_bench.py --jitctl "$bin/jitctl" --endpoint "unix:$work/main.sock" --work "$work/kb" --only align --only silu --budget-s 80 --report $out/kernel_bench.md --json $out/kernel_bench.json >$out/kernel_bench.txt 2>&1; echo "bench rc $? at $SECONDS s"
grep -E "silu|align" $out/kernel_bench.md | head -40 | cut -d'|' -f2,3,7,9,14,15 
timeout 60 python3 tests/gpu/crosscheck_torch.py --jitctl "$bin/jitctl" --endpoint "unix:$work/main.sock" --work "$work/cc" --only align --report $out/cc_align.md --json $out/cc_align.json >$out/cc_align.txt 2>&1; echo "cc align rc $? at $SECONDS s"; tail -3 $out/cc_align.txt
for v in u2 u4 u2cs u1cs; do
  start_daemon $v "$root/.gpu/exp/silu-$v/kernels"
  timeout 40 python3 tests/gpu/kernel_bench.py --jitctl "$bin/jitctl" --endpoint "unix:$work/$v.sock" --work "$work/kb-$v" --kernels "$root/.gpu/exp/silu-$v/kernels" --only silu --budget-s 30 --report "$out/bench-$v.md" --json "$out/bench-$v.json" >"$out/bench-$v.txt" 2>&1; echo "bench $v rc $? at $SECONDS s"
  grep "⚓" $out/bench-$v.md | head -1 | cut -d'|' -f2,3,7,9,15
done
pkill -TERM -f "$bundle/bin/jitd"; sleep 1
tar czf "$OUT/s25.tgz" -C $out .
echo "total $SECONDS s"
