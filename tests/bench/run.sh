#!/usr/bin/env bash
# jitd's benchmark suite in one command: builds the benchmarks, runs each
# (every one measures its baseline in the same run: a bare gRPC echo server,
# NVRTC called directly, an empty cache, one worker), then prints one table
# of every figure with its baseline, ratio and target, writes it as JSON,
# and draws latency vs concurrency when matplotlib is there.
#
#   tests/bench/run.sh [--build-dir DIR] [--out DIR] [--quick] [--no-build]
#
#   --build-dir DIR  CMake build directory (default: build)
#   --out DIR        where the JSON, logs and plot go (default: bench-results)
#   --quick          a few calls and rounds each: checks that the suite runs,
#                    not the figures (CI runs this as the ctest bench.quick)
#   --no-build       use the binaries already built
# Exit status: 0 when every benchmark ran (figures that miss their target
# are marked NO in the table, not failures), 1 when one failed, 2 on usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build"
out="$root/bench-results"
quick=0
do_build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$(cd "$2" && pwd)"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"

benches=(bench_serving bench_cold bench_start bench_warmup bench_cache_lookup bench_first_use)
if [ "$do_build" = 1 ]; then
  echo "== building ${benches[*]} jitd jitctl in $build"
  cmake --build "$build" -j"$(nproc)" --target "${benches[@]}" jitd jitctl >"$out/build.log" 2>&1 \
    || { tail -30 "$out/build.log"; echo "run.sh: build failed (log: $out/build.log)" >&2; exit 1; }
fi

if [ "$quick" = 1 ]; then
  serving_args=(--calls 40 --large-calls 8 --seconds 0.2)
  cold_args=(--rounds 1)
  start_args=(--entries 2000 --rounds 1)
  warmup_args=(--rounds 1 --quick)
  lookup_args=(--benchmark_min_time=0.01)
  lookup_env=(JITD_BENCH_ENTRIES=2000)
  first_use_args=(--rounds 3)
else
  serving_args=()
  cold_args=()
  start_args=(--seeded "$out/seeded-cache")
  warmup_args=()
  lookup_args=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
  lookup_env=()
  first_use_args=(--rounds 41)
fi

run() {  # run NAME ARGS...: NAME's output to OUT/NAME.log, its table shown
  local name="$1"; shift
  echo "== $name $*"
  local started=$SECONDS
  if ! "$@" >"$out/$name.log" 2>&1; then
    tail -40 "$out/$name.log"
    echo "run.sh: $name failed (log: $out/$name.log)" >&2
    exit 1
  fi
  echo "   done in $((SECONDS - started)) s"
}

bin="$build/tests/bench"
run bench_serving "$bin/bench_serving" --json "$out/serving.json" "${serving_args[@]}"
run bench_cold "$bin/bench_cold" --json "$out/cold.json" "${cold_args[@]}"
run bench_start "$bin/bench_start" --json "$out/start.json" "${start_args[@]}"
run bench_warmup "$bin/bench_warmup" --json "$out/warmup.json" "${warmup_args[@]}"
run bench_cache_lookup env "${lookup_env[@]}" "$bin/bench_cache_lookup" --benchmark_out="$out/cache_lookup.json" \
  --benchmark_out_format=json "${lookup_args[@]}"
run bench_first_use "$bin/bench_first_use" --json "$out/first_use.json" "${first_use_args[@]}"

python3 "$here/report.py" --out "$out/bench.json" --markdown "$out/bench.md" \
  "$out/serving.json" "$out/cold.json" "$out/start.json" "$out/warmup.json" "$out/cache_lookup.json" \
  "$out/first_use.json"
if python3 -c "import matplotlib" 2>/dev/null; then
  python3 "$here/plot.py" "$out/bench.json" "$out/latency_vs_concurrency.png"
else
  echo "(no matplotlib here: plot later with python3 tests/bench/plot.py $out/bench.json FILE.png)"
fi
