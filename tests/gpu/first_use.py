#!/usr/bin/env python3
"""First-use latency on the GPU host: from "I need kernel X" to a launchable
function handle, in fresh processes, after CUDA is initialised (GPU host only).

  (a) jitd, kernel cached:   a fresh client process connects, gets the cubin,
                             loads the module, gets the function
                             (tests/gpu/first_use), with each phase's median
                             and jitd's share (all but the driver's two)
  (b) jitd, cold:            the same, but the daemon compiles (a unique -D per
                             run gives a new key each time)
  (c) CuPy RawModule:        the same source and options, cold (an empty
                             CUPY_CACHE_DIR) and with its own disk cache warm
  (d) nvcc -cubin:           the same source to a cubin, what an nvcc JIT pays
  (e) NVRTC in the process:  first_use --mode nvrtc (resolve, compile, load)

    python3 tests/gpu/first_use.py --first-use BIN --endpoint unix:SOCK --kernels DIR [--runs N] [--json OUT]
Prints a table of medians and their ratio to (a); writes the same as JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CUDA = "/usr/local/cuda"
KERNELS = [
    # (manifest name, params, name expression, source)
    ("diffusion.modulate_scale_shift", {"dtype": "bf16"},
     "sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16>", "diffusion/modulate_scale_shift.cu"),
    ("norm.rmsnorm", {"dtype": "bf16", "threads": "256"},
     "sglang::norm::rmsnorm_kernel<__nv_bfloat16, 256>", "norm/rmsnorm.cu"),
]
DEFAULT_OPTIONS = ["-std=c++17", "--fmad=true", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"]

CUPY_SCRIPT = r"""
import sys, time, json
import cupy as cp
cp.cuda.runtime.getDeviceCount(); cp.cuda.Device(0).use(); cp.empty(1)  # CUDA initialised before timing
src, expr, opts = sys.argv[1], sys.argv[2], tuple(json.loads(sys.argv[3]))
t0 = time.perf_counter()
mod = cp.RawModule(code=open(src).read(), options=opts, name_expressions=[expr])
fn = mod.get_function(expr)
fn.attributes  # forces the module load
print(json.dumps({"ms": (time.perf_counter() - t0) * 1e3}))
"""


def run_doc(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.strip().splitlines()[-1]
    return json.loads(out)


def run_json(cmd, env=None):
    return run_doc(cmd, env)["ms"]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--first-use", required=True, help="the tests/gpu/first_use program")
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--kernels", required=True, help="the kernels directory")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    include = ["-I" + a.kernels, f"-I{CUDA}/include/cccl", f"-I{CUDA}/include"]
    results = {}
    for kernel, params, expr, source in KERNELS:
        pflags = sum((["-p", f"{k}={v}"] for k, v in params.items()), [])
        base = [a.first_use, "--endpoint", a.endpoint, "--kernel", kernel] + pflags
        rows = {}
        run_json(base)  # make sure it is cached
        cached = [run_doc(base) for _ in range(a.runs)]
        rows["(a) jitd, cached"] = [d["ms"] for d in cached]
        phases = {p: median([d["phases_ms"][p] for d in cached]) for p in cached[0]["phases_ms"]}
        nonce = int(time.time())
        rows["(b) jitd, cold (daemon compiles)"] = [
            run_json(base + ["--option", f"-DJITD_FIRST_USE_NONCE={nonce}{i}"]) for i in range(a.runs)]
        opts = json.dumps(DEFAULT_OPTIONS + include + ["-arch=sm_90"])
        src = os.path.join(a.kernels, source)
        cold = []
        for _ in range(a.runs):
            with tempfile.TemporaryDirectory() as d:
                cold.append(run_json([sys.executable, "-c", CUPY_SCRIPT, src, expr, opts],
                                     env=dict(os.environ, CUPY_CACHE_DIR=d)))
        rows["(c) CuPy RawModule, cold"] = cold
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, CUPY_CACHE_DIR=d)
            run_json([sys.executable, "-c", CUPY_SCRIPT, src, expr, opts], env=env)
            rows["(c) CuPy RawModule, its disk cache warm"] = [
                run_json([sys.executable, "-c", CUPY_SCRIPT, src, expr, opts], env=env) for _ in range(a.runs)]
        with tempfile.TemporaryDirectory() as d:
            # nvcc compiles what the program instantiates: take the kernel's address.
            wrapper = os.path.join(d, "wrapper.cu")
            with open(wrapper, "w") as f:
                f.write(f'#include "{source}"\n__attribute__((used)) static const void* jitd_entry = '
                        f'reinterpret_cast<const void*>(&{expr});\n')
            nv = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                subprocess.run([f"{CUDA}/bin/nvcc", "-cubin", "-arch=sm_90", "-std=c++17"] + include +
                               ["-o", os.path.join(d, "k.cubin"), wrapper], check=True, capture_output=True)
                nv.append((time.perf_counter() - t0) * 1e3)
            rows["(d) nvcc -cubin"] = nv
        rows["(e) NVRTC in the process"] = [
            run_json(base + ["--mode", "nvrtc", "--kernels", a.kernels]) for _ in range(a.runs)]
        results[kernel] = {k: {"median_ms": median(v), "runs_ms": v} for k, v in rows.items()}
        # jitd's own share: everything but the driver's module load and
        # function lookup.
        share = [d["ms"] - d["phases_ms"]["module_load"] - d["phases_ms"]["get_function"] for d in cached]
        results[kernel]["(a) jitd, cached"].update(phases_median_ms=phases, jitd_share_median_ms=median(share))
        ref = median(rows["(a) jitd, cached"])
        print(f"\n{kernel} {params}: medians of {a.runs} fresh processes, after CUDA init")
        for k, v in rows.items():
            print(f"  {k:<42} {median(v):10.2f} ms   {median(v) / ref:8.1f}x (a)")
        print("  (a)'s phases: " + ", ".join(f"{p} {ms:.3f} ms" for p, ms in phases.items()) +
              f"; jitd's share (all but module_load and get_function) {median(share):.3f} ms")
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
