#!/usr/bin/env python3
"""A fresh Python process's first get_kernel of a cached kernel: the local path against gRPC.

Starts a jitd of this build on a temporary cache and socket, compiles
diffusion.modulate_scale_shift (bf16, sm_90) once, then starts fresh Python
processes that each time ``jitd.Client(endpoint)`` plus that one
``get_kernel`` with ``time.perf_counter()``, alternating ``local_path=True``
(the default) with ``local_path=False`` (a gRPC channel and one call). Prints
p50, p90 and the ratio of the p50s, and writes them as JSON with --json.
The process start and ``import jitd`` are not timed.

    build/python-venv/bin/python tests/bench/python_first_use.py [--jitd build/daemon/jitd]
        [--rounds 15] [--json FILE]

Needs the package installed in the interpreter (tests/python/run.sh makes
build/python-venv with it); no GPU.
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
KERNEL = "diffusion.modulate_scale_shift"
PARAMS = {"dtype": "bf16"}
ARCH = "sm_90"

CHILD = r"""
import json, sys, time
import jitd
endpoint, local = sys.argv[1], sys.argv[2] == "1"
start = time.perf_counter()
client = jitd.Client(endpoint, local_path=local)
k = client.get_kernel(%r, %r, params=%r)
took = time.perf_counter() - start
assert k.cubin and k.origin in ("memory", "disk"), k.origin
print(json.dumps({"ms": took * 1e3, "origin": k.origin, "local_answers": client.counters.local_answers}))
""" % (KERNEL, ARCH, PARAMS)


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 1)) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jitd", default=os.path.join(ROOT, "build", "daemon", "jitd"))
    ap.add_argument("--rounds", type=int, default=15, help="fresh processes per path (default 15)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="jitd-pyfirst.")
    endpoint = "unix:" + os.path.join(work, "jitd.sock")
    log = open(os.path.join(work, "jitd.log"), "w")
    daemon = subprocess.Popen([a.jitd, "--listen", endpoint, "--cache-dir", os.path.join(work, "cache"),
                               "--kernels", os.path.join(ROOT, "kernels"), "--arch", ARCH],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        import jitd
        client = jitd.Client(endpoint)
        client.wait_until_serving(timeout=60)
        client.get_kernel(KERNEL, ARCH, params=PARAMS)  # compiles it once
        samples = {True: [], False: []}
        for _ in range(a.rounds):
            for local in (True, False):
                out = subprocess.run([sys.executable, "-c", CHILD, endpoint, "1" if local else "0"],
                                     check=True, capture_output=True, text=True)
                got = json.loads(out.stdout)
                if local and got["local_answers"] != 1:
                    raise SystemExit(f"python_first_use: the local path did not answer: {got}")
                samples[local].append(got["ms"])
        rows = {}
        for local, name in ((True, "local path (default)"), (False, "gRPC (local_path=False)")):
            v = samples[local]
            rows[name] = {"p50_ms": statistics.median(v), "p90_ms": nearest_rank(v, 0.9), "samples_ms": v}
        local, grpc_ = rows["local path (default)"], rows["gRPC (local_path=False)"]
        ratio = local["p50_ms"] / grpc_["p50_ms"]
        print(f"{KERNEL} {PARAMS} @{ARCH}, cached: jitd.Client() + one get_kernel in a fresh process, "
              f"{a.rounds} processes each, alternating (p90 = nearest rank)")
        for name, r in rows.items():
            print(f"  {name:26s} p50 {r['p50_ms']:7.2f} ms  p90 {r['p90_ms']:7.2f} ms")
        print(f"  local path / gRPC, p50: {ratio:.3f}x")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"kernel": KERNEL, "params": PARAMS, "arch": ARCH, "rounds": a.rounds, "rows": rows,
                           "ratio_p50": ratio, "python": sys.version.split()[0]}, f, indent=1)
        return 0
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
