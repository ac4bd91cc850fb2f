#!/usr/bin/env bash
# Installs every Debian package jitd's build, tests and benchmarks need.
# Idempotent: packages already present are left alone, and apt's lists are
# refreshed only when something is missing. The CUDA toolkit (NVRTC and its
# headers) is expected at /usr/local/cuda; it is not a Debian package.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libsqlite3-dev sqlite3
  libspdlog-dev libfmt-dev
  libtomlplusplus-dev libcli11-dev
  libxxhash-dev libssl-dev openssl
  libhiredis-dev redis-server
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv
  clang-14 libclang-rt-14-dev
  systemd python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -e /usr/local/cuda/include/nvrtc.h ]; then
  echo "install-deps: the CUDA toolkit (NVRTC) is expected at /usr/local/cuda and is missing" >&2
  exit 1
fi

# apache-tvm-ffi, for module kernels (kind = "module"): the headers and
# libtvm_ffi.so that nvcc builds and links them against, and the Python
# package clients load them with. From PyPI, into a venv of its own (Debian's
# python is externally managed, PEP 668); CMake finds it there.
tvm_ffi_version="0.1.15.post2"
tvm_ffi_venv="${JITD_TVM_FFI_VENV:-/opt/jitd/tvm-ffi}"
if "$tvm_ffi_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('apache-tvm-ffi') != '$tvm_ffi_version')" 2>/dev/null; then
  echo "install-deps: apache-tvm-ffi $tvm_ffi_version present in $tvm_ffi_venv"
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || [ -w "$(dirname "$tvm_ffi_venv")" ] || sudo="sudo"
  echo "install-deps: installing apache-tvm-ffi $tvm_ffi_version into $tvm_ffi_venv"
  $sudo mkdir -p "$(dirname "$tvm_ffi_venv")"
  $sudo python3 -m venv "$tvm_ffi_venv"
  $sudo "$tvm_ffi_venv/bin/pip" install -q --disable-pip-version-check "apache-tvm-ffi==$tvm_ffi_version"
fi
