#!/usr/bin/env bash
# tests/python/run.sh [BUILD_DIR [PYTEST_ARGS...]]: the Python client's tests
# (ctest -L python runs this). BUILD_DIR (default: build) holds the jitd to
# test (BUILD_DIR/daemon/jitd, passed to the tests as JITD_BINARY) and the
# virtual environment (BUILD_DIR/python-venv, made with Debian's python3 -m
# venv, or $JITD_PYTHON) into which the package from client/python is
# installed with pytest and apache-tvm-ffi (test_modules.py loads a module
# kernel); pip needs PyPI the first time and when that list changes. The
# package is rebuilt only when client/python or proto/ changed, so repeated
# runs start in about a second. GPU tests (test_gpu_loaders.py) skip without
# a GPU. LD_LIBRARY_PATH gains /usr/local/cuda/lib64 when it exists: module
# kernels link libcudart.so.13.
# JUnit XML goes to BUILD_DIR/python-tests.xml.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd)
venv=$build/python-venv
python=${JITD_PYTHON:-/usr/bin/python3}
export JITD_BINARY=${JITD_BINARY:-$build/daemon/jitd}
[ -x "$JITD_BINARY" ] || { echo "run.sh: no jitd at $JITD_BINARY: build it first (cmake --build $build)" >&2; exit 2; }

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || { echo "run.sh: $python -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 2; }
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
# The build's own requirements and the tests', once per venv and again only
# when this list changes, so later installs need no build isolation (no download).
requirements=("setuptools>=64" wheel "grpcio-tools>=1.51" pytest "apache-tvm-ffi==0.1.15.post2")
if [ "$(cat "$venv/.jitd-requirements" 2>/dev/null)" != "${requirements[*]}" ]; then
  "$venv/bin/python" -m pip install -q "${requirements[@]}"
  echo "${requirements[*]}" >"$venv/.jitd-requirements"
fi

# The package, built from a copy in BUILD_DIR so the source tree stays clean
# (setuptools writes build/ and *.egg-info beside setup.py), when its sources
# or the protos changed since the last install.
stamp=$( (cd "$root" && find client/python proto -type f ! -path '*/build/*' ! -path '*.egg-info*' \
            ! -path '*/_proto/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
if [ "$(cat "$venv/.jitd-stamp" 2>/dev/null)" != "$stamp" ]; then
  src=$build/python-src
  rm -rf "$src"
  mkdir -p "$src"
  cp -r "$root/client/python" "$src/jitd"
  rm -rf "$src/jitd/build" "$src/jitd"/*.egg-info "$src/jitd/jitd/_proto"
  cp -r "$root/proto" "$src/jitd/proto"  # where an sdist keeps them (protogen.find_proto_dir)
  "$venv/bin/python" -m pip install -q --no-build-isolation --force-reinstall "$src/jitd"
  echo "$stamp" >"$venv/.jitd-stamp"
fi

cd "$root/tests/python"
export PYTHONDONTWRITEBYTECODE=1
# A module kernel's shared object links libcudart.so.13 (torch ships one; here the toolkit's).
if [ -d /usr/local/cuda/lib64 ]; then
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs --durations=10 \
  --junitxml="$build/python-tests.xml" "$@" .
