#!/usr/bin/env bash
# silu_and_mul fast paths: the error table (silu_err.py), then each variant kernel tree
# (.gpu/exp/silu-NAME/kernels, made by make_variants.py) benchmarked and cross-checked.
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd); cd "$root"
out=/tmp/s26a; mkdir -p $out
bundle=$root/.gpu/bundle; work=$(mktemp -d /tmp/js26.XXXXXX); mkdir -p $work/bin
for exe in jitd jitctl test_gpu_kernels first_use; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/bin/%s" "$@"\n' "$bundle" "$bundle" "$exe" >"$work/bin/$exe"; chmod +x "$work/bin/$exe"
done
bin=$work/bin
start_daemon() {  # NAME KERNELS_DIR
  "$bin/jitd" --listen "unix:$work/$1.sock" --cache-dir "$work/cache-$1" --kernels "$2" >"$out/jitd-$1.log" 2>&1 &
  for i in $(seq 1 100); do "$bin/jitctl" --endpoint "unix:$work/$1.sock" --timeout 2s stats >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "daemon $1 not ready" >&2
}
SECONDS=0
timeout 60 python3 "$(dirname "$0")/silu_err.py" >$out/silu_err.md 2>&1; echo "silu_err rc $? at $SECONDS s"; cat $out/silu_err.md
start_daemon main "$root/kernels"
for v in tree mufu8 mufu12 splitdiv8; do
  if [ $v = tree ]; then kd="$root/kernels"; sock=main; else kd="$root/.gpu/exp/silu-$v/kernels"; sock=$v; start_daemon $v "$kd"; fi
  timeout 50 python3 tests/gpu/kernel_bench.py --jitctl "$bin/jitctl" --endpoint "unix:$work/$sock.sock" --work "$work/kb-$v" --kernels "$kd" --only silu --budget-s 35 --report "$out/bench-$v.md" --json "$out/bench-$v.json" >"$out/bench-$v.txt" 2>&1; echo "bench $v rc $? at $SECONDS s"
  grep "⚓" $out/bench-$v.md | head -2 | cut -d'|' -f2,3,7,9,15
  timeout 90 python3 tests/gpu/crosscheck_torch.py --jitctl "$bin/jitctl" --endpoint "unix:$work/$sock.sock" --work "$work/cc-$v" --kernels "$kd" --only silu --report $out/cc-$v.md --json $out/cc-$v.json >$out/cc-$v.txt 2>&1; echo "cc $v rc $? at $SECONDS s"; tail -2 $out/cc-$v.txt; grep -i "every finite" $out/cc-$v.md | cut -c1-250
done
pkill -TERM -f "$bundle/bin/jitd"; sleep 1
tar czf "$OUT/s26a.tgz" -C $out .
echo "total $SECONDS s"
