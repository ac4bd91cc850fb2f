#!/usr/bin/env python3
"""Cross-checks jitd's cubins with libraries nobody here wrote (GPU host only).

For the two diffusion kernels, in bf16 and fp16, on every shape KERNELS.md
lists, the cubin jitd served (fetched with `jitctl get`) is loaded with CuPy's
RawModule from its path, launched by the lowered name jitd returned on torch
tensors, and compared bit for bit with eager PyTorch:
    modulate_scale_shift: x * (1 + scale[:, None]) + shift[:, None]
    residual_gate_add:    residual + update * gate
When the C++ GPU test dumped its own outputs (JITD_GPU_DUMP_DIR), the same
inputs through CuPy must give exactly those bytes too: the same cubin loaded
two ways, one answer.

    python3 tests/gpu/crosscheck.py --jitctl PATH --endpoint unix:SOCK --work DIR [--dump DIR]
Prints one line per case and a summary line that counts the cases by the
kind of their reference (REFERENCES), e.g. `crosscheck: 36 of 36 cross-checks
passed: 30 against eager PyTorch ops, 6 against the C++ client's output and
eager PyTorch ops`; exits 1 on any mismatch.
"""
import argparse
import json
import os
import subprocess
import sys

import cupy as cp
import torch

SHAPES = [(1, 4096, 3072), (1, 512, 3072), (1, 4608, 3072), (2, 1024, 3072), (1, 17, 64)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
BLOCK = 256
# The kind of reference a case is held to: the words of the summary line.
REFERENCES = {
    "eager": "against eager PyTorch ops",
    "cpp_dump": "against the C++ client's output and eager PyTorch ops",
}


class Tally:
    """Cases and failures per kind of reference."""

    def __init__(self):
        self.cases = {kind: 0 for kind in REFERENCES}
        self.failed = {kind: 0 for kind in REFERENCES}

    def add(self, kind, ok):
        self.cases[kind] += 1
        self.failed[kind] += not ok

    def any_failed(self):
        return any(self.failed.values())

    def line(self):
        """`crosscheck: P of N cross-checks passed[, F failed]: n against ...`"""
        total, failed = sum(self.cases.values()), sum(self.failed.values())
        head = f"crosscheck: {total - failed} of {total} cross-checks passed" + (f", {failed} failed" if failed else "")
        parts = [f"{n} {REFERENCES[kind]}" + (f" ({n - self.failed[kind]} passed)" if self.failed[kind] else "")
                 for kind, n in self.cases.items() if n]
        return head + (": " + ", ".join(parts) if parts else "")


def fetch(jitctl, endpoint, work, kernel, params):
    """Cubin path and the single lowered name, from `jitctl --json get`."""
    name = kernel + "".join(f"_{k}-{v}" for k, v in sorted(params.items()))
    path = os.path.join(work, name + ".cubin")
    cmd = [jitctl, "--endpoint", endpoint, "--json", "get", kernel, "-o", path]
    for k, v in sorted(params.items()):
        cmd += ["-p", f"{k}={v}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    symbols = doc.get("symbols", [])
    lowered = [s.get("loweredName") or s.get("lowered_name") for s in symbols]
    if len(lowered) != 1 or not lowered[0]:
        raise SystemExit(f"{kernel}: expected one lowered name, got {symbols}")
    return path, lowered[0], doc.get("key", "")


def launch(fn, n, args):
    grid = min((n + BLOCK - 1) // BLOCK, 132 * 16)
    fn((grid,), (BLOCK,), args)
    cp.cuda.runtime.deviceSynchronize()


def ptr(t):
    return cp.uint64(t.data_ptr())


def same_bits(a, b):
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def randn(shape, dtype, gen):
    t = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) * 2
    return t.to(dtype)


def modulate_case(fn, dtype, shape, gen):
    b, l, d = shape
    x = randn((b, l, d), dtype, gen)
    scale = randn((b, d), dtype, gen)
    shift = randn((b, d), dtype, gen)
    out = torch.empty_like(x)
    launch(fn, x.numel(), (ptr(out), ptr(x), ptr(scale), ptr(shift), cp.int64(b), cp.int64(l), cp.int64(d)))
    ref = x * (1 + scale[:, None]) + shift[:, None]
    return same_bits(out, ref), (x, scale, shift, out)


def residual_case(fn, dtype, shape, broadcast, gen):
    b, l, d = shape
    rows = b * l
    residual = randn((rows, d), dtype, gen)
    update = randn((rows, d), dtype, gen)
    gate = randn((d,), dtype, gen) if broadcast else randn((rows, d), dtype, gen)
    out = torch.empty_like(residual)
    launch(fn, residual.numel(), (ptr(out), ptr(residual), ptr(update), ptr(gate), cp.int64(rows), cp.int64(d)))
    ref = residual + update * gate
    return same_bits(out, ref), (residual, update, gate, out)


def eager_cases(a, gen, tally):
    """The two diffusion kernels on every shape, bit for bit against eager."""
    for dname, dtype in DTYPES.items():
        path, lowered, key = fetch(a.jitctl, a.endpoint, a.work, "diffusion.modulate_scale_shift", {"dtype": dname})
        fn = cp.RawModule(path=path).get_function(lowered)
        for shape in SHAPES:
            ok, _ = modulate_case(fn, dtype, shape, gen)
            tally.add("eager", ok)
            print(f"{'ok ' if ok else 'BAD'} modulate_scale_shift {dname} {shape} vs eager (CuPy RawModule, {lowered})")
        for gate in ("full", "broadcast"):
            path, lowered, key = fetch(a.jitctl, a.endpoint, a.work, "diffusion.residual_gate_add",
                                       {"dtype": dname, "gate": gate})
            fn = cp.RawModule(path=path).get_function(lowered)
            for shape in SHAPES:
                ok, _ = residual_case(fn, dtype, shape, gate == "broadcast", gen)
                tally.add("eager", ok)
                print(f"{'ok ' if ok else 'BAD'} residual_gate_add {dname} gate={gate} {shape} vs eager")


def dump_case(a, meta, tally):
    """One case the C++ GPU test dumped: the same inputs through CuPy must
    give the C++ client's bytes, and eager's."""
    dtype = DTYPES[meta["dtype"]]
    params = {"dtype": meta["dtype"]}
    if "gate" in meta:
        params["gate"] = meta["gate"]
    path, lowered, _ = fetch(a.jitctl, a.endpoint, a.work, meta["kernel"], params)
    fn = cp.RawModule(path=path).get_function(lowered)
    raw = open(os.path.join(a.dump, meta["name"] + ".inputs"), "rb").read()
    tensors, offset = [], 0
    for shape in meta["input_shapes"]:
        n = 1
        for s in shape:
            n *= s
        buf = torch.frombuffer(bytearray(raw[offset:offset + 2 * n]), dtype=torch.int16).to("cuda")
        tensors.append(buf.view(dtype).reshape(shape))
        offset += 2 * n
    cpp_out = torch.frombuffer(bytearray(open(os.path.join(a.dump, meta["name"] + ".output"), "rb").read()),
                               dtype=torch.int16).to("cuda")
    out = torch.empty_like(tensors[0])
    if meta["kernel"] == "diffusion.modulate_scale_shift":
        b, l, d = meta["input_shapes"][0]
        launch(fn, out.numel(), (ptr(out), ptr(tensors[0]), ptr(tensors[1]), ptr(tensors[2]), cp.int64(b),
                                 cp.int64(l), cp.int64(d)))
        eager = tensors[0] * (1 + tensors[1][:, None]) + tensors[2][:, None]
    else:
        rows, d = meta["input_shapes"][0]
        launch(fn, out.numel(), (ptr(out), ptr(tensors[0]), ptr(tensors[1]), ptr(tensors[2]), cp.int64(rows),
                                 cp.int64(d)))
        eager = tensors[0] + tensors[1] * tensors[2]
    ok_cpp = torch.equal(out.view(torch.int16).flatten(), cpp_out)
    ok_eager = same_bits(out, eager)
    tally.add("cpp_dump", ok_cpp and ok_eager)
    print(f"{'ok ' if ok_cpp and ok_eager else 'BAD'} {meta['name']}: CuPy == C++ client: {ok_cpp}, "
          f"== eager: {ok_eager}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jitctl", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--work", required=True, help="directory for the fetched cubins")
    ap.add_argument("--dump", default="", help="the C++ GPU test's JITD_GPU_DUMP_DIR")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    gen = torch.Generator(device="cuda").manual_seed(20261130)
    tally = Tally()
    eager_cases(a, gen, tally)
    if a.dump:
        for entry in sorted(os.listdir(a.dump)):
            if entry.endswith(".json"):
                dump_case(a, json.load(open(os.path.join(a.dump, entry))), tally)
    print(tally.line())
    return 1 if tally.any_failed() else 0

if __name__ == "__main__":
    sys.exit(main())
