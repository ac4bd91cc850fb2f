#!/usr/bin/env bash
# tests/gpu/kernels_digest.sh DIR: one digest of every file under DIR (its
# path relative to DIR and its bytes), the first 16 hex digits of a SHA-256,
# the same on any host for the same tree. bundle.sh records it for the tree
# it builds from; run.sh compares it with the kernels that ran.
set -euo pipefail
dir=${1:?usage: kernels_digest.sh DIR}
cd "$dir"
find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
