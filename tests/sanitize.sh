#!/usr/bin/env bash
# The daemon, cache, client and system tests built with AddressSanitizer
# (LeakSanitizer included) and UndefinedBehaviorSanitizer, and run: any
# memory error, leak or undefined behaviour in jitd fails the run. CI runs
# this after the main test suite (the README's test command).
#
#   tests/sanitize.sh [BUILD_DIR]      (default: build-sanitize)
#
# NVRTC is a prebuilt library: leaks it reports at a worker's exit are its
# own and suppressed (tests/sanitizer-suppressions.txt); jitd's are not.
# Warnings are not errors here: GCC 12 reports false maybe-uninitialized
# warnings in libstdc++ under -fsanitize (the main build keeps -Werror).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-$root/build-sanitize}"

targets=(jitd jitctl
  test_base_coding test_base_files test_base_hex
  test_cache_cache test_cache_recovery test_cache_eviction test_cache_multiprocess test_cache_blob_format
  test_cache_bundle test_daemon_bundle test_cache_fatbin test_daemon_fleet
  test_serving_executor test_serving_kernel_service test_serving_hot_cache test_serving_admission
  test_daemon_serve test_daemon_errors test_daemon_hostile test_daemon_lifecycle test_daemon_health test_daemon_metrics
  test_daemon_connections test_daemon_local_server test_daemon_local_path test_daemon_trees test_manifest_lock
  test_metrics_registry test_metrics_http_request test_metrics_http_server
  test_client_kernels test_guard_module_check test_guard_module_serving
  test_compiler_module_build test_manifest_module_kernel test_manifest_adhoc_module test_daemon_modules
  test_remote_redis_backend test_remote_remote_tier test_remote_fleet
  test_system_crash test_system_corruption test_system_full_disk test_system_soak)

# -O1 with line tables only (-g1): what the ASan manual recommends, and
# reports keep file:line for every frame, inlined ones included. Against
# RelWithDebInfo's -O2 -g it halves the compile (measured on 2 cores, one
# file under -fsanitize=address,undefined: daemon/rpc/cache_admin_rpc.cpp
# 16.4 s to 8.7 s, tests/remote/test_remote_fleet.cpp 36.6 s to 19.3 s),
# and this build is most of CI's time.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJITD_WERROR=OFF -DJITD_SANITIZE=address,undefined \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DJITD_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

# A small quarantine: the soak test checks that resident memory stays flat,
# and ASan holds freed blocks (256 MiB by default) before reusing them.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0:quarantine_size_mb=16"
export LSAN_OPTIONS="suppressions=$here/sanitizer-suppressions.txt:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Shorter fault loops than the plain run: the sanitized daemon is slower.
export JITD_CRASH_KILLS=40 JITD_SOAK_SECONDS=30
# What runs: every test of the sanitized test programs above (not a
# hand-kept list of suite names, which missed suites).
# tests/sanitize_selection.py reads ctest's test list, keeps the tests whose
# program is one of `targets`, and fails when a target has no test, so the
# list cannot go stale.
#
# Soak runs here too: sanitized, it holds the daemon's heap in use
# (jitd_heap_allocated_bytes) flat, not its RSS, which ASan's quarantine
# and size-class regions raise after the warm-up while the heap stays flat
# (60 s: RSS +5.5%, heap +0.1 MiB; test_system_soak.cpp says more).
#
# Nothing is excluded. DescriptorExhaustion, which runs the daemon out of
# file descriptors, runs too: UBSan's vptr check, which cannot work without a
# descriptor, is left out of this build (CMakeLists.txt says why).
regex=$(python3 "$here/sanitize_selection.py" "$build" --targets "${targets[@]}")
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -R "$regex"
