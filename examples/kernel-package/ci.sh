#!/usr/bin/env bash
# The CI step of a kernel package: the namespace guard and a compile-all of
# every instantiation for every arch the package ships, with no daemon and no
# GPU. It writes the JUnit report a CI shows as tests, and, when everything
# passes, the lock a deployment serves with `jitd --lock`.
#
#   ci.sh [OUT_DIR]      JITD: the jitd binary (default: jitd on PATH, else
#                          ../../build/daemon/jitd from this script, if built)
#                        ARCHS: the archs to check (default: sm_90 sm_100a)
#
# Exit status is jitd lint's: 0 clean (lock written), 1 findings (report
# written, no lock), 2 lint could not run (no jitd found included).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
if [ -n "${JITD:-}" ]; then
  jitd=$JITD
elif command -v jitd >/dev/null 2>&1; then
  jitd=$(command -v jitd)
elif [ -x "$here/../../build/daemon/jitd" ]; then
  jitd=$here/../../build/daemon/jitd
else
  jitd=
fi
if [ -z "$jitd" ] || ! command -v "$jitd" >/dev/null 2>&1; then
  echo "ci: ${JITD:+JITD=$JITD is not an executable; }no jitd to run: set JITD=/path/to/jitd (or put jitd on PATH)" >&2
  exit 2
fi
mkdir -p "$out"
arch_flags=()
for arch in ${ARCHS:-sm_90 sm_100a}; do arch_flags+=(--arch "$arch"); done

# The name the deployment serves the tree under: a lock names its tree, and
# the daemon refuses a lock written for another name.
"$jitd" lint --kernels "example=$here/kernels" "${arch_flags[@]}" \
  --format junit --write-lock "$out/example.lock" >"$out/lint.xml"
status=$?
echo "ci: jitd lint exited $status; report $out/lint.xml$([ "$status" -eq 0 ] && echo ", lock $out/example.lock")"
exit "$status"
