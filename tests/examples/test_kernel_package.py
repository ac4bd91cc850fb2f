#!/usr/bin/env python3
"""examples/kernel-package as a kernel team uses it.

1. Its CI script lints the tree (JUnit report, parsed here) and writes a lock.
2. `jitd warm --lock` fills a cache with exactly the locked instantiations.
3. A daemon serves the package beside the shipped tree with the lock: the
   locked instantiations are disk hits, anything else of the package is
   refused naming the lock, and the shipped tree (not locked) serves as usual.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET

DEADLINE_S = 120


def run(cmd, expect=0, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S, env=env)
    out = proc.stdout + proc.stderr
    if expect is not None and proc.returncode != expect:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}, expected {expect}:\n{out}")
    return proc.returncode, out


def check(condition, what):
    if not condition:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


def lint_and_lock(args, out):
    env = dict(os.environ, JITD=args.jitd, ARCHS="sm_90")
    run([os.path.join(args.package, "ci.sh"), out], env=env)
    suites = ET.parse(os.path.join(out, "lint.xml")).getroot()
    check(suites.tag == "testsuites" and suites.get("failures") == "0", "the JUnit report parses and has no failure")
    compile_all = [s for s in suites if s.get("name") == "compile-all"]
    check(len(compile_all) == 1 and compile_all[0].get("tests") == "3", "compile-all has a case per instantiation")
    with open(os.path.join(out, "example.lock"), "rb") as f:
        lock = tomllib.load(f)
    check(lock["tree"] == "example" and lock["namespace"] == "example", "the lock names its tree and namespace")
    entries = {(e["kernel"], e["params"], e["arch"]): e["key"] for e in lock["instantiation"]}
    check(len(entries) == 3, "the lock lists the 3 instantiations")
    return entries


def wait_serving(args, endpoint, daemon):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            sys.exit(f"FAIL: jitd exited {daemon.returncode}")
        code, _ = run([args.jitctl, "--endpoint", endpoint, "health"], expect=None)
        if code == 0:
            return
        time.sleep(0.1)
    sys.exit("FAIL: jitd did not serve in time")


def get(args, endpoint, kernel, *flags, expect=0):
    code, out = run([args.jitctl, "--endpoint", endpoint, "--json", "get", kernel, *flags], expect=expect)
    return json.loads(out) if code == 0 else out


def serve_and_use(args, tmp, tree, lock_file, entries):
    endpoint = f"unix:{tmp}/jitd.sock"
    log = open(os.path.join(tmp, "jitd.log"), "w")
    daemon = subprocess.Popen(
        [args.jitd, "--listen", endpoint, "--cache-dir", f"{tmp}/cache", "--workers", "2",
         "--kernels", f"sglang={args.shipped}", "--kernels", f"example={tree}", "--lock", lock_file],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(args, endpoint, daemon)
        hit = get(args, endpoint, "example/act.gelu_tanh", "-p", "dtype=bf16", "--arch", "sm_90")
        check(hit["key"] == entries[("act.gelu_tanh", "dtype=bf16", "sm_90")], "the served key is the locked key")
        check(hit["source"] == "DISK", "a locked instantiation warmed by the lock is a disk hit")
        bare = get(args, endpoint, "act.gelu_tanh", "-p", "dtype=fp16", "--arch", "sm_90")
        check(bare["source"] in ("DISK", "MEMORY"), "the bare name works while one tree has it")
        refused = get(args, endpoint, "example/act.gelu_tanh", "-p", "dtype=bf16", "--arch", "sm_100a", expect=1)
        check("is not in " + lock_file in refused and "FAILED_PRECONDITION" in refused,
              "an instantiation outside the lock is refused naming the lock")
        shipped = get(args, endpoint, "diffusion.modulate_scale_shift", "-p", "dtype=bf16", "--arch", "sm_90")
        check(shipped["source"] == "COMPILED", "the shipped tree beside it is served, unlocked")
        _, kernels = run([args.jitctl, "--endpoint", endpoint, "kernels"])
        check("8 kernels (sglang 7, example 1)" in kernels, "jitctl kernels counts kernels by tree")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=DEADLINE_S)
        log.close()
    check(daemon.returncode == 0, "jitd drains and exits 0")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    for flag in ("--jitd", "--jitctl", "--package", "--shipped"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jitd-example-") as tmp:
        entries = lint_and_lock(args, os.path.join(tmp, "ci"))
        tree = os.path.join(args.package, "kernels")
        lock_file = os.path.join(tmp, "ci", "example.lock")
        _, warmed = run([args.jitd, "warm", "--cache-dir", f"{tmp}/cache", "--kernels", f"example={tree}",
                         "--lock", lock_file])
        check("3 compiled" in warmed, "jitd warm --lock compiles exactly the 3 locked instantiations")
        serve_and_use(args, tmp, tree, lock_file, entries)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
