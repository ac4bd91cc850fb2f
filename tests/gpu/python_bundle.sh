#!/usr/bin/env bash
# tests/gpu/python_bundle.sh [BUILD_DIR]: on the build machine, prepares what
# tests/gpu/python_run.sh needs on the GPU host, inside .gpu/bundle (ignored
# by git; JITD_GPU_BUNDLE for another place):
#   bin/jitd, bin/jitctl and lib/   jitd with the libraries a GPU host lacks
#                                   (tools/gpu-bundle), added to
#                                   what tests/gpu/bundle.sh put there, if any;
#   python/jitd                     the Python package with its generated
#                                   stubs, installed with --target: the host's
#                                   python3 imports it from PYTHONPATH (nothing
#                                   can be installed there).
# BUILD_DIR defaults to build-gpu (configured Release if it is not yet); its
# jitd and jitctl are built, and its python-venv (tests/python/run.sh's, made
# here when missing; needs PyPI) builds the package. Run it after
# tests/gpu/bundle.sh, which empties the bundle first.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
bundle=${JITD_GPU_BUNDLE:-$root/.gpu/bundle}
tool=${GPU_BUNDLE_TOOL:-$root/tools/gpu-bundle}
python=${JITD_PYTHON:-/usr/bin/python3}
[ -x "$tool" ] || { echo "python_bundle.sh: $tool not found (set GPU_BUNDLE_TOOL)" >&2; exit 2; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" -j"${JOBS:-2}" --target jitd jitctl
"$tool" "$bundle" "$build/daemon/jitd" "$build/client/jitctl"

venv=$build/python-venv
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "setuptools>=64" wheel "grpcio-tools>=1.51" pytest
fi
# Built from a copy, as tests/python/run.sh does, so the source tree stays clean.
src=$(mktemp -d "${TMPDIR:-/tmp}/jitd-python-bundle.XXXXXX")
trap 'rm -rf "$src"' EXIT
cp -r "$root/client/python" "$src/jitd"
rm -rf "$src/jitd/build" "$src/jitd"/*.egg-info "$src/jitd/jitd/_proto"
cp -r "$root/proto" "$src/jitd/proto"
rm -rf "$bundle/python"
"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation --target "$bundle/python" "$src/jitd"
[ -f "$bundle/python/jitd/_proto/jitd/v1/compiler_pb2.py" ] ||
  { echo "python_bundle.sh: the package in $bundle/python has no generated stubs" >&2; exit 1; }

kib=$(du -sk "$bundle" | cut -f1)
if [ "$kib" -gt $((60 * 1024)) ]; then
  echo "python_bundle.sh: warning: $bundle is $((kib / 1024)) MiB, near or over a 64 MiB carry limit" >&2
fi
echo "python_bundle.sh: $bundle ready ($((kib / 1024)) MiB, Python package in $bundle/python);" \
  "on the GPU host: tests/gpu/python_run.sh OUT_DIR"
