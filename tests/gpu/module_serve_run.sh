#!/usr/bin/env bash
# tests/gpu/module_serve_run.sh OUT_DIR: on a GPU host, the module tree as a
# server gets it from jitd. A jitd bundled here (.gpu/bundle, by
# tests/gpu/bundle.sh and python_bundle.sh) serves examples/module_tree from
# a seed bundle made on the build machine (.gpu/modules.bundle:
# `jitd bundle create --all --kernels examples/module_tree --arch sm_90a`),
# with no nvcc (--nvcc names none), and every module is loaded through
# jitd.load_module and launched with torch tensors by module_tree_check.py
# --endpoint, held to KERNELS.md's semantics. apache-tvm-ffi comes as a
# wheel in .gpu/wheels (pip download here). Writes jitd.log,
# module_serve.txt, module_serve.json and stats.json to OUT_DIR; exits as
# the check did.
#
# tests/gpu/module_serve_run.sh OUT_DIR --adhoc: the same tree asked for as
# SGLang's load_jit asks (module_tree_check.py --adhoc: each spec built at
# run time and sent through jitd.jit_loader); the daemon builds them with
# the host's nvcc (/usr/local/cuda/bin/nvcc, or $NVCC) and g++ against the
# wheel's tvm-ffi, into an empty cache, then answers each declared module
# from the same entry.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: module_serve_run.sh OUT_DIR [--adhoc]}
adhoc=${2:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bundle=$root/.gpu/bundle
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$bundle/bin:$PATH
work=$(mktemp -d /tmp/jitd-module-serve-XXXXXX)
python3 -m pip install -q --no-index --no-deps --target "$work/py" "$root"/.gpu/wheels/apache_tvm_ffi-*.whl
export PYTHONPATH=$work/py:$bundle/python${PYTHONPATH:+:$PYTHONPATH}
export XDG_RUNTIME_DIR=$work/run
mkdir -m 0700 "$XDG_RUNTIME_DIR"

if [ "$adhoc" = --adhoc ]; then
  jitd serve --listen "unix:$work/jitd.sock" --cache-dir "$work/cache" --kernels "$root/examples/module_tree" \
    --nvcc "${NVCC:-/usr/local/cuda/bin/nvcc}" --tvm-ffi-root "$work/py/tvm_ffi" --arch sm_90a \
    --workers 8 >"$out/jitd.log" 2>&1 &
else
  jitd serve --listen "unix:$work/jitd.sock" --cache-dir "$work/cache" --kernels "$root/examples/module_tree" \
    --bundle "$root/.gpu/modules.bundle" --nvcc "$work/no-nvcc/nvcc" --arch sm_90a >"$out/jitd.log" 2>&1 &
fi
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 200); do
  jitctl --endpoint "unix:$work/jitd.sock" health >/dev/null 2>&1 && break
  sleep 0.1
done
set +e
python3 "$root/tests/gpu/module_tree_check.py" --endpoint "unix:$work/jitd.sock" --json "$out/module_serve.json" \
  ${adhoc:+--adhoc} 2>&1 | tee "$out/module_serve.txt"
rc=${PIPESTATUS[0]}
set -e
jitctl --endpoint "unix:$work/jitd.sock" stats --json >"$out/stats.json" || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1 || true
exit "$rc"
