#!/usr/bin/env bash
# tests/gpu/bundle.sh [BUILD_DIR]: on the build machine, builds what the GPU
# run needs (jitd, jitctl, test_gpu_kernels, first_use) and bundles them with
# the shared libraries a GPU host lacks into .gpu/bundle (ignored by git), for
# tests/gpu/run.sh there. BUILD_DIR defaults to build-gpu in this checkout
# (configured Release with -DJITD_WERROR=ON if it is not yet). JOBS=N sets
# the build's parallelism (default 2); JITD_GPU_BUNDLE another destination.
# See tests/gpu/README.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
bundle=${JITD_GPU_BUNDLE:-$root/.gpu/bundle}
tool=${GPU_BUNDLE_TOOL:-$root/tools/gpu-bundle}
[ -x "$tool" ] || { echo "bundle.sh: $tool not found (set GPU_BUNDLE_TOOL)" >&2; exit 2; }

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DJITD_WERROR=ON
fi
cmake --build "$build" -j"${JOBS:-2}" --target jitd jitctl test_gpu_kernels first_use

rm -rf "$bundle"
"$tool" "$bundle" "$build/daemon/jitd" "$build/client/jitctl" "$build/tests/gpu/test_gpu_kernels" \
  "$build/tests/gpu/first_use"

# What the binaries were built from, for run.sh's report: the daemon there
# compiles the kernels of the checkout it runs in, so their digest is kept
# beside the revision.
{
  echo "revision $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "kernels $(bash "$root/tests/gpu/kernels_digest.sh" "$root/kernels")"
} >"$bundle/SOURCE"

# The device runner carries ignored paths of at most 64 MiB in all.
kib=$(du -sk "$bundle" | cut -f1)
if [ "$kib" -gt $((60 * 1024)) ]; then
  echo "bundle.sh: warning: $bundle is $((kib / 1024)) MiB, near or over a 64 MiB carry limit" >&2
fi
echo "bundle.sh: $bundle ready ($((kib / 1024)) MiB); on the GPU host: tests/gpu/run.sh OUT_DIR"
