#!/usr/bin/env bash
# Builds jitd's libFuzzer targets with clang (with AddressSanitizer and
# UndefinedBehaviorSanitizer) and runs each for a bounded time, starting
# from its corpus in tests/fuzz/corpus/NAME (new inputs it finds go to
# BUILD/fuzz-corpus/NAME, not into the repository). Any crash, leak,
# sanitizer report or timeout fails the run. CI runs it with the defaults.
#
#   tests/fuzz/run.sh [BUILD_DIR]     (default: build-fuzz)
#   JITD_FUZZ_SECONDS=N               seconds per target (default 20: CI's
#                                     budget; longer runs find more)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build-fuzz}"
seconds="${JITD_FUZZ_SECONDS:-20}"
targets=(blob manifest config request index http_head bundle fatbin)
targets+=(local_wire)
targets+=(module_symbols)

cxx="$(command -v clang++ || command -v clang++-14 || true)"
cc="$(command -v clang || command -v clang-14 || true)"
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "tests/fuzz/run.sh: needs clang and libFuzzer (deploy/install-deps.sh installs clang-14)" >&2
  exit 1
fi
CC="$cc" CXX="$cxx" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJITD_FUZZ=ON \
  -DJITD_SANITIZE=address,undefined -DJITD_BUILD_BENCHMARKS=OFF -DJITD_WERROR=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
printf '%-10s %12s %10s %12s\n' target executions corpus "new inputs"
for t in "${targets[@]}"; do
  work="$build/fuzz-corpus/$t"
  mkdir -p "$work"
  before=$(find "$here/corpus/$t" "$work" -type f | wc -l)
  log="$build/fuzz-$t.log"
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/fuzz-$t-" \
      -print_final_stats=1 "$work" "$here/corpus/$t" >"$log" 2>&1; then
    tail -60 "$log"
    echo "tests/fuzz/run.sh: fuzz_$t found a problem (log: $log; the input is $build/fuzz-$t-*)" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  after=$(find "$here/corpus/$t" "$work" -type f | wc -l)
  printf '%-10s %12s %10s %12s\n' "$t" "$runs" "$after" "$((after - before))"
done
