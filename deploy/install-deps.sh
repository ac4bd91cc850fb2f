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
