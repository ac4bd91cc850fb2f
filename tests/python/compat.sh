#!/usr/bin/env bash
# tests/python/compat.sh [BUILD_DIR]: the Python client against the grpcio and
# protobuf runtimes users have, old to new. The package is built once (its
# generated stubs carry no runtime version check: client/python/protogen.py),
# then installed without dependencies into one virtual environment per
# (grpcio, protobuf) pair below, under BUILD_DIR/python-compat, where the
# kernels, errors, warm and admin tests run against this build's jitd.
# Needs PyPI and tests/python/run.sh BUILD_DIR run once (its venv builds the
# wheel). Not part of ctest: it downloads a dozen wheels. Prints one line per
# pair and exits non-zero when any failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
python=${JITD_PYTHON:-/usr/bin/python3}
export JITD_BINARY=${JITD_BINARY:-$build/daemon/jitd}
base=$build/python-venv
work=$build/python-compat
[ -x "$base/bin/python" ] || { echo "compat.sh: run tests/python/run.sh $build first" >&2; exit 2; }

# grpcio protobuf [PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION]
pairs=(
  "1.51.3 3.20.3"
  "1.51.3 4.21.12"
  "1.51.3 4.21.12 python"
  "1.62.3 4.25.9"
  "1.70.0 5.29.6"
  "1.84.2 6.33.6"
  "1.85.3 7.36.2"
  "1.85.3 7.36.2 python"
)

mkdir -p "$work"
rm -f "$work"/jitd-*.whl
"$base/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$work" "$build/python-src/jitd" || exit 2
wheel=$(ls "$work"/jitd-*.whl)

failed=0
for pair in "${pairs[@]}"; do
  read -r grpc_version protobuf_version implementation <<<"$pair"
  venv=$work/grpcio-$grpc_version-protobuf-$protobuf_version
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" &&
      "$venv/bin/python" -m pip install -q "grpcio==$grpc_version" "protobuf==$protobuf_version" pytest ||
      { echo "compat: grpcio $grpc_version protobuf $protobuf_version: could not install"; failed=1; continue; }
  fi
  "$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$wheel" >/dev/null
  log=$venv/pytest-${implementation:-default}.log
  (cd "$root/tests/python" &&
    env ${implementation:+PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=$implementation} PYTHONDONTWRITEBYTECODE=1 \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider test_client_kernels.py test_errors.py \
      test_warm_and_admin.py test_kernel_set.py -k "not full_compile_queue" >"$log" 2>&1)
  rc=$?
  actual=$(env ${implementation:+PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=$implementation} "$venv/bin/python" -c 'import grpc, google.protobuf as p; from google.protobuf.internal import api_implementation as a; print(grpc.__version__, p.__version__, a.Type())' 2>&1)
  summary=$(tail -n 1 "$log")
  if [ $rc -eq 0 ]; then
    echo "compat: ok     grpcio/protobuf/implementation $actual: $summary"
  else
    echo "compat: FAILED grpcio/protobuf/implementation $actual: $summary (log: $log)"
    failed=1
  fi
done
exit $failed
