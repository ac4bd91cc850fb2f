#!/usr/bin/env bash
# silu_and_mul: the committed tree against "rcp" (rcp.approx + one Newton step, one fp64 branch per pack)
# and "rcpidx" (the same, and the row followed along the stride), benches interleaved.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); cd "$root"
out=/tmp/s27; mkdir -p $out
bundle=$root/.gpu/bundle; work=$(mktemp -d /tmp/js27.XXXXXX); mkdir -p $work/bin
for exe in jitd jitctl test_gpu_kernels; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/%s" "$@"\n' "$bundle" "$bundle" "$exe" >"$work/bin/$exe"; chmod +x "$work/bin/$exe"
done
bin=$work/bin
kdir() { case $1 in tree) echo "$root/kernels";; *) echo "$root/.gpu/exp/silu-$1/kernels";; esac; }
start_daemon() {  # NAME
  "$bin/jitd" --listen "unix:$work/$1.sock" --cache-dir "$work/cache-$1" --kernels "$(kdir $1)" >"$out/jitd-$1.log" 2>&1 &
  for i in $(seq 1 100); do "$bin/jitctl" --endpoint "unix:$work/$1.sock" --timeout 2s stats >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "daemon $1 not ready" >&2
}
SECONDS=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $out/gpu.txt 2>&1
for v in tree rcp rcpidx; do start_daemon $v; done
for v in tree rcp rcpidx; do
  timeout 60 python3 docs/gpu-runs/2026-12-02-silu-rcp/regs.py "$bin/jitctl" "unix:$work/$v.sock" "$work/regs-$v" $v 2>&1 | tee -a $out/regs.txt
done
for round in 1 2; do for v in tree rcp rcpidx; do
  timeout 45 python3 tests/gpu/kernel_bench.py --jitctl "$bin/jitctl" --endpoint "unix:$work/$v.sock" --work "$work/kb-$v" --kernels "$(kdir $v)" --only silu --budget-s 28 --report "$out/bench-$v-$round.md" --json "$out/bench-$v-$round.json" >"$out/bench-$v-$round.txt" 2>&1; echo "bench $v $round rc $? at $SECONDS s"
  grep "⚓" $out/bench-$v-$round.md | head -2 | tail -1 | cut -d'|' -f2,3,7,9,15
done; done
for v in rcp rcpidx; do
  timeout 100 python3 tests/gpu/crosscheck_torch.py --jitctl "$bin/jitctl" --endpoint "unix:$work/$v.sock" --work "$work/cc-$v" --kernels "$(kdir $v)" --only silu --report $out/cc-$v.md --json $out/cc-$v.json >$out/cc-$v.txt 2>&1; echo "cc $v rc $? at $SECONDS s"; tail -1 $out/cc-$v.txt; grep -i "every finite" $out/cc-$v.md | head -3 | cut -c1-160
  JITD_ENDPOINT="unix:$work/$v.sock" timeout 100 "$bin/test_gpu_kernels" --gtest_filter='*Silu*' >$out/gtest_silu_$v.txt 2>&1; echo "gtest silu $v rc $? at $SECONDS s"; tail -2 $out/gtest_silu_$v.txt
done
grep -h "silu_and_mul" $out/bench-*-*.md | grep -v "⚓" | cut -d'|' -f2,3,7,9 | sort | uniq | head -20
pkill -TERM -f "$bundle/bin/jitd"; sleep 1
tar czf "$OUT/s27.tgz" -C $out .
echo "total $SECONDS s"
