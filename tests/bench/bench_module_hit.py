#!/usr/bin/env python3
"""A module hit in a fresh process: from the request to a callable export.

  tests/bench/bench_module_hit.py [--build-dir build] [--rounds 15] [--json FILE]

Starts a daemon on examples/module_tree, builds one module once, then runs
fresh Python processes, alternated round by round, each timing its own
steps with time.perf_counter():

  import    `import tvm_ffi` alone: the floor every way of loading pays.
  jitd      `import tvm_ffi, jitd`, then jitd.load_module(...) to a callable
            export (the GetKernel on the local path, the private file
            written and checked, tvm_ffi.load_module). Target: the
            request-to-callable part <= 2 ms.
  hashing   the warm path of a load_jit-style loader, written here as a
            stand-in (not SGLang's code): SHA-256 over every file of the
            include trees (the kernel tree and tvm-ffi's headers) to decide
            the cached build is current, then tvm_ffi.load_module of it.

Prints median, min and max of each step and writes every round to --json.
Needs the Python client's venv (tests/python/run.sh makes BUILD/python-venv
with jitd and apache-tvm-ffi). No GPU: the export is fetched, not called.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREE = os.path.join(ROOT, "examples", "module_tree")
KERNEL, PARAMS, EXPORT = "activation.silu_and_mul", {"dtype": "bf16"}, "silu_and_mul"

JITD_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import tvm_ffi
t1 = time.perf_counter()
import jitd
t2 = time.perf_counter()
mod = jitd.load_module(sys.argv[1], endpoint=sys.argv[2], arch="sm_90a", **json.loads(sys.argv[3]))
fn = getattr(mod, sys.argv[4])
assert callable(fn)
t3 = time.perf_counter()
print(json.dumps({"import_tvm_ffi_ms": (t1 - t0) * 1e3, "import_jitd_ms": (t2 - t1) * 1e3,
                  "request_to_callable_ms": (t3 - t2) * 1e3}))
"""

HASHING_CHILD = r"""
import hashlib, json, os, sys, time
t0 = time.perf_counter()
import tvm_ffi
t1 = time.perf_counter()
h = hashlib.sha256()
for root in sys.argv[2:]:
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            h.update(p.encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
digest = h.hexdigest()
mod = tvm_ffi.load_module(sys.argv[1])
fn = getattr(mod, "silu_and_mul")
assert callable(fn)
t2 = time.perf_counter()
print(json.dumps({"import_tvm_ffi_ms": (t1 - t0) * 1e3, "request_to_callable_ms": (t2 - t1) * 1e3}))
"""

IMPORT_CHILD = r"""
import json, time
t0 = time.perf_counter()
import tvm_ffi
print(json.dumps({"import_tvm_ffi_ms": (time.perf_counter() - t0) * 1e3}))
"""


def child(python, code, *args, env):
    done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"bench_module_hit: child failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    python = os.path.join(build, "python-venv", "bin", "python")
    if not os.access(python, os.X_OK):
        sys.exit(f"bench_module_hit: no {python}: run tests/python/run.sh {build} once to make it")
    work = tempfile.mkdtemp(prefix="jitd-bench-hit-")
    endpoint = "unix:" + os.path.join(work, "jitd.sock")
    runtime = os.path.join(work, "run")
    os.makedirs(runtime, mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
    log = open(os.path.join(work, "jitd.log"), "w")
    daemon = subprocess.Popen([os.path.join(build, "daemon", "jitd"), "serve", "--listen", endpoint, "--cache-dir",
                               os.path.join(work, "cache"), "--kernels", TREE, "--arch", "sm_90a"],
                              stdout=log, stderr=subprocess.STDOUT)
    jitctl = os.path.join(build, "client", "jitctl")
    rounds = []
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([jitctl, "--endpoint", endpoint, "health"], capture_output=True).returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                sys.exit("bench_module_hit: jitd did not start")
            time.sleep(0.05)
        cached = os.path.join(work, "cached.so")  # what a load_jit-style cache would hold
        got = subprocess.run([jitctl, "--endpoint", endpoint, "get", KERNEL, "-p", "dtype=bf16", "--arch", "sm_90a",
                              "-o", cached], capture_output=True, text=True)
        if got.returncode != 0:
            sys.exit(f"bench_module_hit: the first build failed: {got.stdout}{got.stderr}")
        ffi_include = subprocess.run([python, "-c", "import os, tvm_ffi; print(os.path.join(os.path.dirname("
                                      "tvm_ffi.__file__), 'include'))"], capture_output=True, text=True,
                                     env=env).stdout.strip()
        params = json.dumps(PARAMS)
        child(python, JITD_CHILD, KERNEL, endpoint, params, EXPORT, env=env)  # the first load writes the file
        for r in range(args.rounds):
            steps = [("import", lambda: child(python, IMPORT_CHILD, env=env)),
                     ("jitd", lambda: child(python, JITD_CHILD, KERNEL, endpoint, params, EXPORT, env=env)),
                     ("hashing", lambda: child(python, HASHING_CHILD, cached, TREE, ffi_include, env=env))]
            if r % 2:
                steps.reverse()
            row = {"round": r + 1}
            for name, run in steps:
                row[name] = run()
            rounds.append(row)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    def stats(values):
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}

    figures = {
        "import tvm_ffi (ms)": stats([r["import"]["import_tvm_ffi_ms"] for r in rounds]),
        "import jitd after tvm_ffi (ms)": stats([r["jitd"]["import_jitd_ms"] for r in rounds]),
        "jitd: request to callable (ms)": stats([r["jitd"]["request_to_callable_ms"] for r in rounds]),
        "hashing stand-in: hash + load to callable (ms)": stats([r["hashing"]["request_to_callable_ms"]
                                                                 for r in rounds]),
    }
    print(f"{'figure':48} {'median':>8} {'min':>8} {'max':>8}")
    for name, f in figures.items():
        print(f"{name:48} {f['median']:8.2f} {f['min']:8.2f} {f['max']:8.2f}")
    jitd_ms = figures["jitd: request to callable (ms)"]["median"]
    print(f"target: jitd request to callable <= 2 ms: {'met' if jitd_ms <= 2 else 'NOT met'} ({jitd_ms:.2f} ms); "
          f"against the hashing stand-in: {jitd_ms / figures['hashing stand-in: hash + load to callable (ms)']['median']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "figures": figures}, f, indent=1)


if __name__ == "__main__":
    main()
