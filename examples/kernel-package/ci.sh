#!/usr/bin/env bash
# The CI step of a kernel package: the namespace guard and a compile-all of
# every instantiation for every arch the package ships, with no daemon and no
# GPU. It writes the JUnit report a CI shows as tests, and, when everything
# passes, the lock a deployment serves with `jitd --lock`.
#
#   ci.sh [OUT_DIR]      JITD: the jitd binary (default: jitd on PATH)
#                        ARCHS: the archs to check (default: sm_90 sm_100a)
#
# Exit status is jitd lint's: 0 clean (lock written), 1 findings (report
# written, no lock), 2 lint could not run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
jitd=${JITD:-jitd}
mkdir -p "$out"
arch_flags=()
for arch in ${ARCHS:-sm_90 sm_100a}; do arch_flags+=(--arch "$arch"); done

# The name the deployment serves the tree under: it is part of every key,
# so the lock is written for that name.
"$jitd" lint --kernels "example=$here/kernels" "${arch_flags[@]}" \
  --format junit --write-lock "$out/example.lock" >"$out/lint.xml"
status=$?
echo "ci: jitd lint exited $status; report $out/lint.xml$([ "$status" -eq 0 ] && echo ", lock $out/example.lock")"
exit "$status"
