#!/usr/bin/env bash
# jitd's benchmark suite in one command: builds the benchmarks, runs each
# (every one measures its baseline in the same run: a bare gRPC echo server,
# NVRTC called directly, an empty cache, one worker), then prints one table
# of every figure with its baseline, ratio and target, writes it as JSON,
# and draws latency vs concurrency when matplotlib is there.
#
#   tests/bench/run.sh [--build-dir DIR] [--out DIR] [--quick] [--no-build]
#                      [--repeat N] [--check]
#
#   --build-dir DIR  CMake build directory (default: build)
#   --out DIR        where the JSON, logs and plot go (default: bench-results)
#   --quick          a few calls and rounds each: checks that the suite runs,
#                    not the figures (CI runs this as the ctest bench.quick)
#   --no-build       use the binaries already built
#   --repeat N       run the whole suite N times (default 1); for N > 1 each
#                    run in OUT/run-1 ... OUT/run-N, then one table of every
#                    run's value per figure with their median, min and max,
#                    the target judged on the median (OUT/bench-repeat.json)
#   --check          exit 3 when a figure misses its target (with --repeat:
#                    its median), printing one "missed:" line per figure
# Exit status: 0 when every benchmark ran (without --check, figures that
# miss their target are marked NO in the table, not failures), 1 when one
# failed, 2 on usage, 3 with --check when a target was missed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build"
out="$root/bench-results"
quick=0
do_build=1
repeat=1
check=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$(cd "$2" && pwd)"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-build) do_build=0; shift ;;
    --repeat)
      [[ "${2-}" =~ ^[1-9][0-9]*$ ]] \
        || { echo "run.sh: --repeat needs a whole number of runs >= 1, not '${2-}'" >&2; exit 2; }
      repeat="$2"; shift 2 ;;
    --check) check=(--check); shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

dir="$out"  # where run writes: OUT, or OUT/run-I with --repeat
run() {  # run NAME ARGS...: NAME's output to DIR/NAME.log, its table shown
  local name="$1"; shift
  echo "== $name $*"
  local started=$SECONDS
  if ! "$@" >"$dir/$name.log" 2>&1; then
    tail -40 "$dir/$name.log"
    echo "run.sh: $name failed (log: $dir/$name.log)" >&2
    exit 1
  fi
  echo "   done in $((SECONDS - started)) s"
}

bin="$build/tests/bench"
suite() {  # suite: every benchmark once, its JSON and log in DIR
  mkdir -p "$dir"
  run bench_serving "$bin/bench_serving" --json "$dir/serving.json" "${serving_args[@]}"
  run bench_cold "$bin/bench_cold" --json "$dir/cold.json" "${cold_args[@]}"
  run bench_start "$bin/bench_start" --json "$dir/start.json" "${start_args[@]}"
  run bench_warmup "$bin/bench_warmup" --json "$dir/warmup.json" "${warmup_args[@]}"
  run bench_cache_lookup env "${lookup_env[@]}" "$bin/bench_cache_lookup" --benchmark_out="$dir/cache_lookup.json" \
    --benchmark_out_format=json "${lookup_args[@]}"
  run bench_first_use "$bin/bench_first_use" --json "$dir/first_use.json" "${first_use_args[@]}"
}

missed=0
report() {  # report ARGS...: report.py; its exit 3 (a target missed, --check) is kept in `missed`
  local rc=0
  python3 "$here/report.py" "$@" || rc=$?
  if [ "$rc" = 3 ]; then
    missed=1
  elif [ "$rc" != 0 ]; then
    echo "run.sh: report.py failed" >&2
    exit 1
  fi
}

merge() {  # merge [--check]: DIR's JSON into DIR/bench.json and DIR/bench.md, then the plot
  report --out "$dir/bench.json" --markdown "$dir/bench.md" "$@" \
    "$dir/serving.json" "$dir/cold.json" "$dir/start.json" "$dir/warmup.json" "$dir/cache_lookup.json" \
    "$dir/first_use.json"
  if python3 -c "import matplotlib" 2>/dev/null; then
    python3 "$here/plot.py" "$dir/bench.json" "$dir/latency_vs_concurrency.png"
  else
    echo "(no matplotlib here: plot later with python3 tests/bench/plot.py $dir/bench.json FILE.png)"
  fi
}

if [ "$repeat" = 1 ]; then
  suite
  merge "${check[@]}"
else
  runs=()
  for i in $(seq 1 "$repeat"); do
    echo "== run $i of $repeat"
    dir="$out/run-$i"
    suite
    merge
    runs+=("$dir/bench.json")
  done
  echo "== $repeat runs"
  report --repeat --out "$out/bench-repeat.json" --markdown "$out/bench-repeat.md" "${check[@]}" "${runs[@]}"
fi
if [ "$missed" = 1 ]; then
  echo "run.sh: a target was missed (--check): exit 3" >&2
  exit 3
fi
