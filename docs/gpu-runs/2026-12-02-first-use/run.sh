#!/usr/bin/env bash
# Session 26b: first use with old/new daemon x old/new client (spin, linger).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd); cd "$root"
out=/tmp/s26c; mkdir -p $out
bundle=$root/.gpu/bundle; work=$(mktemp -d /tmp/js26c.XXXXXX); mkdir -p $work/bin
mk() { printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' "$bundle" "$2" >"$work/bin/$1"; chmod +x "$work/bin/$1"; }
mk jitd-new $bundle/bin/jitd; mk jitd-old $root/.gpu/old/jitd; mk fu-new $bundle/bin/first_use; mk fu-old $root/.gpu/old/first_use; mk jitctl $bundle/bin/jitctl
bin=$work/bin
{ nproc; cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1; for s in /sys/devices/system/cpu/cpu0/cpuidle/state*; do echo "$(cat $s/name) lat $(cat $s/latency)us"; done 2>&1; which perf strace; } >$out/host.txt 2>&1; cat $out/host.txt
start_daemon() {  # NAME EXE
  "$bin/$2" --listen "unix:$work/$1.sock" --cache-dir "$work/cache-$1" --kernels "$root/kernels" >"$out/jitd-$1.log" 2>&1 &
  for i in $(seq 1 100); do "$bin/jitctl" --endpoint "unix:$work/$1.sock" --timeout 2s stats >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "daemon $1 not ready" >&2
}
start_daemon old jitd-old; start_daemon new jitd-new
SECONDS=0
for i in $(seq 1 45); do
  for combo in "old old" "old new" "new old" "new new"; do set -- $combo
    timeout 20 "$bin/fu-$2" --endpoint "unix:$work/$1.sock" --kernel diffusion.modulate_scale_shift -p dtype=bf16 | sed "s/^{/{\"combo\": \"d-$1 c-$2\", /"
    [ $((i % 4)) = 0 ] && timeout 20 "$bin/fu-$2" --endpoint "unix:$work/$1.sock" --kernel norm.rmsnorm -p dtype=bf16 -p threads=256 | sed "s/^{/{\"combo\": \"d-$1 c-$2\", /"
  done
done >>$out/first_use.jsonl 2>>$out/first_use.err
echo "first_use at $SECONDS s"
python3 - $out/first_use.jsonl <<'PY' | tee $out/summary.txt
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for combo in sorted({r["combo"] for r in rows}):
  for k in sorted({r["kernel"] for r in rows}):
    rs = [r for r in rows if r["kernel"] == k and r["combo"] == combo][1:]
    if not rs: continue
    ph = {p: st.median(r["phases_ms"][p] for r in rs) for p in rs[0]["phases_ms"]}
    share = st.median(r["phases_ms"]["connect"] + r["phases_ms"]["get_binary"] for r in rs)
    sh = sorted(r["phases_ms"]["connect"] + r["phases_ms"]["get_binary"] for r in rs)
    print(combo, k.split(".")[1][:8], "n", len(rs), "total %.3f share %.3f p90 %.3f" % (st.median(r["ms"] for r in rs), share, sh[int(0.9 * len(sh))]), {p: round(v, 3) for p, v in ph.items()}, rs[-1]["source"])
PY
pkill -TERM -f "$work/bin/jitd" ; pkill -TERM -f "$bundle/bin/jitd"; pkill -TERM -f ".gpu/old/jitd"; sleep 1
tar czf "$OUT/s26c.tgz" -C $out .
echo "total $SECONDS s"
