#!/usr/bin/env python3
"""First-use latency on the GPU host: from "I need kernel X" to a launchable
function handle, in fresh processes, after CUDA is initialised (GPU host only).

  (a) jitd, kernel cached:   a fresh client process connects, gets the cubin,
                             loads the module, gets the function
                             (tests/gpu/first_use), with each phase's p50
                             and p90 and jitd's share (all but the driver's two)
  (b) jitd, cold:            the same, but the daemon compiles (a unique -D per
                             run gives a new key each time)
  (c) CuPy RawModule:        the same source and options, cold (an empty
                             CUPY_CACHE_DIR) and with its own disk cache warm
  (d) nvcc -cubin:           the same source to a cubin, what an nvcc JIT pays
  (e) NVRTC in the process:  first_use --mode nvrtc (resolve, compile, load)

    python3 tests/gpu/first_use.py --first-use BIN --endpoint unix:SOCK --kernels DIR [--runs N] [--json OUT]
    python3 tests/gpu/first_use.py --self-test      # the aggregation, on fake runs (no GPU)

Prints a table of p50 and p90 per path and their ratio to (a), and each
phase's p50 and p90 for the paths tests/gpu/first_use times; writes every run
to --json, with each run's own phases (first_use's JSON line, kept whole in
"runs") and the aggregates: p50_ms, p90_ms (median_ms = p50_ms, kept for older
readers), phases_p50_ms and phases_p90_ms, and for (a) jitd's share per run.
p50 is the median; p90 the nearest rank, the ceil(0.9 n)-th fastest of n runs
(with 7 runs: the slowest).
"""
import argparse
import json
import math
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


def p50(xs):
    return median(xs)


def p90(xs):
    """The nearest rank: the ceil(0.9 n)-th smallest of n (an observed run)."""
    return sorted(xs)[-(-9 * len(xs) // 10) - 1] if xs else float("nan")


def aggregate(runs):
    """A path's figures from its runs: floats (ms) or first_use's JSON lines
    (dicts with "ms" and "phases_ms"), which are kept whole."""
    ms = [r["ms"] if isinstance(r, dict) else r for r in runs]
    row = {"p50_ms": p50(ms), "p90_ms": p90(ms), "median_ms": p50(ms), "runs_ms": ms}
    docs = [r for r in runs if isinstance(r, dict)]
    if docs:
        names = list(docs[0].get("phases_ms", {}))
        per_phase = {p: [d["phases_ms"][p] for d in docs if p in d.get("phases_ms", {})] for p in names}
        row.update(runs=docs, phases_p50_ms={p: p50(v) for p, v in per_phase.items()},
                   phases_p90_ms={p: p90(v) for p, v in per_phase.items()})
    return row


def add_jitd_share(row):
    """(a)'s jitd share per run: everything but the driver's module load and
    function lookup."""
    share = [d["ms"] - d["phases_ms"]["module_load"] - d["phases_ms"]["get_function"] for d in row["runs"]]
    row.update(jitd_share_runs_ms=share, jitd_share_p50_ms=p50(share), jitd_share_p90_ms=p90(share),
               jitd_share_median_ms=p50(share), phases_median_ms=row["phases_p50_ms"])


def print_kernel(kernel, params, runs, rows):
    ref = rows["(a) jitd, cached"]["p50_ms"]
    print(f"\n{kernel} {params}: {runs} fresh processes, after CUDA init (p50 = median, p90 = nearest rank)")
    for k, r in rows.items():
        print(f"  {k:<42} p50 {r['p50_ms']:10.2f} ms  p90 {r['p90_ms']:10.2f} ms   {r['p50_ms'] / ref:8.1f}x (a)")
    for k, r in rows.items():
        if "phases_p50_ms" in r:
            print(f"  {k[:3]}'s phases (p50 / p90 ms): " + ", ".join(
                f"{p} {v:.3f} / {r['phases_p90_ms'][p]:.3f}" for p, v in r["phases_p50_ms"].items()))
    a = rows["(a) jitd, cached"]
    print(f"  (a)'s jitd share (all but module_load and get_function): p50 {a['jitd_share_p50_ms']:.3f} ms, "
          f"p90 {a['jitd_share_p90_ms']:.3f} ms")
    sys.stdout.flush()


def measure(a, kernel, params, expr, source):
    """Every path's runs for one kernel: {path: [ms, or first_use's JSON line]}."""
    include = ["-I" + a.kernels, f"-I{CUDA}/include/cccl", f"-I{CUDA}/include"]
    pflags = sum((["-p", f"{k}={v}"] for k, v in params.items()), [])
    base = [a.first_use, "--endpoint", a.endpoint, "--kernel", kernel] + pflags
    rows = {}
    run_json(base)  # make sure it is cached
    rows["(a) jitd, cached"] = [run_doc(base) for _ in range(a.runs)]
    nonce = int(time.time())
    rows["(b) jitd, cold (daemon compiles)"] = [
        run_doc(base + ["--option", f"-DJITD_FIRST_USE_NONCE={nonce}{i}"]) for i in range(a.runs)]
    opts = json.dumps(DEFAULT_OPTIONS + include + ["-arch=sm_90"])
    src = os.path.join(a.kernels, source)
    cupy = [sys.executable, "-c", CUPY_SCRIPT, src, expr, opts]
    cold = []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as d:
            cold.append(run_json(cupy, env=dict(os.environ, CUPY_CACHE_DIR=d)))
    rows["(c) CuPy RawModule, cold"] = cold
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, CUPY_CACHE_DIR=d)
        run_json(cupy, env=env)
        rows["(c) CuPy RawModule, its disk cache warm"] = [run_json(cupy, env=env) for _ in range(a.runs)]
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
        run_doc(base + ["--mode", "nvrtc", "--kernels", a.kernels]) for _ in range(a.runs)]
    return rows


def summarize(runs_by_path):
    """{path: runs} -> {path: aggregate}, with (a)'s jitd share."""
    rows = {k: aggregate(v) for k, v in runs_by_path.items()}
    add_jitd_share(rows["(a) jitd, cached"])
    return rows


def self_test():
    def doc(ms, connect, get_binary, load):
        return {"ms": ms, "mode": "daemon", "phases_ms": {"connect": connect, "get_binary": get_binary,
                                                         "module_load": load, "get_function": 0.001}}
    cached = [doc(0.5 + i / 100, 0.1 + i / 1000, 0.3, 0.08 + i / 1000) for i in range(7)]
    rows = summarize({"(a) jitd, cached": cached, "(d) nvcc -cubin": [9.0, 1.0, 5.0, 3.0]})
    a, d = rows["(a) jitd, cached"], rows["(d) nvcc -cubin"]
    problems = [what for ok, what in [
        (a["p50_ms"] == 0.53 and a["p90_ms"] == 0.56 and a["median_ms"] == a["p50_ms"], f"(a) {a}"),
        (a["phases_p50_ms"]["connect"] == cached[3]["phases_ms"]["connect"]
         and a["phases_p90_ms"]["connect"] == cached[6]["phases_ms"]["connect"], "connect p50, p90"),
        (a["runs"] == cached and len(a["jitd_share_runs_ms"]) == 7, "every run kept whole"),
        (abs(a["jitd_share_p50_ms"] - (0.53 - 0.083 - 0.001)) < 1e-12, f"jitd share {a['jitd_share_p50_ms']}"),
        (d["p50_ms"] == 4.0 and d["p90_ms"] == 9.0 and "runs" not in d, f"(d) {d}"),
        (p90([2.0] + [1.0] * 9) == 1.0 and p90([1.0] * 9 + [2.0] * 2) == 2.0 and p90(list(range(20, 0, -1))) == 18
         and math.isnan(p90([])), "p90 rank"),
    ] if not ok]
    for what in problems:
        print("first_use self-test: FAILED:", what)
    if not problems:
        print("first_use self-test: ok (p50, p90, phases per run kept and aggregated, jitd share)")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--self-test", action="store_true", help="check the aggregation on fake runs (no GPU)")
    ap.add_argument("--first-use", help="the tests/gpu/first_use program")
    ap.add_argument("--endpoint")
    ap.add_argument("--kernels", help="the kernels directory")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not (a.first_use and a.endpoint and a.kernels):
        ap.error("--first-use, --endpoint and --kernels are required (or --self-test)")
    results = {}
    for kernel, params, expr, source in KERNELS:
        results[kernel] = summarize(measure(a, kernel, params, expr, source))
        print_kernel(kernel, params, a.runs, results[kernel])
        if a.json:  # after each kernel: a later failure keeps what was measured
            with open(a.json, "w") as f:
                json.dump(results, f, indent=2)
    return 0

if __name__ == "__main__":
    sys.exit(main())
