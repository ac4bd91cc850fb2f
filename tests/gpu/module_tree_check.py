#!/usr/bin/env python3
"""Launches the module tree's kernels (examples/module_tree, built by its
check_build.sh) through tvm_ffi with torch tensors on a GPU, and holds each
to KERNELS.md's semantics: bit-exact with eager where KERNELS.md says so,
within its ulp bounds where it gives them.

  python3 tests/gpu/module_tree_check.py MODULE_DIR [--json FILE]
  python3 tests/gpu/module_tree_check.py --endpoint unix:/PATH [--json FILE]
  python3 tests/gpu/module_tree_check.py --endpoint unix:/PATH --adhoc [--json FILE]

MODULE_DIR holds <kernel>.<dtype>.so as check_build.sh writes them; with
--endpoint each module comes from a jitd daemon serving the tree instead,
through jitd.load_module (the path a server takes). With --adhoc, each module
is asked for as SGLang's load_jit builds one, its spec made here at run time
(files, wrappers with the dtype's C++ type, flags, read from the tree's
kernels.toml) through jitd.jit_loader over the tree's own files: the daemon
builds that ad-hoc spec (adhoc_modules = true). Needs torch with CUDA
and apache-tvm-ffi (and the jitd package with --endpoint). Prints one line per check and a summary;
exits 1 when one failed, 2 when it cannot run (no GPU, no tvm_ffi).

What each check is held to (the reference is said in each line):
  modulate_scale_shift, residual_gate_add  eager torch ops, bit for bit
  topk_sum       the formula evaluated in torch: fp32 sum in ascending j, one rounding
  silu_and_mul   the formula in fp64, rounded where it says: <= 1 ulp everywhere, equal on >= 99.9%
  rmsnorm        an fp64 reference: <= 2 ulp (bf16, fp16), <= 16 ulp (fp32)
"""
import argparse
import json
import os
import sys

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def ulps(out, ref, torch):
    """|out - ref| in units of the spacing of T at ref (per element)."""
    ref_abs = ref.abs()
    spacing = torch.nextafter(ref_abs, torch.full_like(ref_abs, float("inf"))) - ref_abs
    return ((out.float() - ref.float()).abs() / spacing.float()).nan_to_num(0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("module_dir", nargs="?")
    parser.add_argument("--endpoint", help="load each module from this jitd daemon (jitd.load_module)")
    parser.add_argument("--adhoc", action="store_true",
                        help="with --endpoint: ask for each module as a load_jit spec (jitd.jit_loader)")
    parser.add_argument("--json")
    args = parser.parse_args()
    if (args.module_dir is None) == (args.endpoint is None):
        parser.error("give MODULE_DIR or --endpoint")
    if args.adhoc and not args.endpoint:
        parser.error("--adhoc needs --endpoint")
    try:
        import torch
        import tvm_ffi
    except ImportError as e:
        print(f"module_tree_check: cannot run: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("module_tree_check: cannot run: no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(7)
    dev = "cuda"
    results = []

    def record(name, ok, detail):
        results.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)

    tree_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "module_tree")
    keys = {}

    def load_adhoc(kernel, dtype):
        """What a server's load_jit call would send: the spec built here."""
        import tomllib

        import jitd
        with open(os.path.join(tree_dir, "kernels.toml"), "rb") as f:
            manifest = tomllib.load(f)
        k = next(k for k in manifest["kernel"] if k["name"] == kernel)
        cpp = k["params"][0]["values"][dtype]
        files = [s.removeprefix("csrc/") for s in k["sources"]]
        wrappers = [(n, e.replace("{dtype}", cpp)) for n, e in k["exports"].items()]
        load_jit = jitd.jit_loader(tree_dir, files_dir="csrc", include_dirs=["csrc"], arch="sm_90a",
                                   endpoint=args.endpoint, timeout=600)
        module = load_jit(kernel, dtype, cuda_files=files, cuda_wrappers=wrappers, extra_cuda_cflags=k["options"])
        spec = jitd.jit.module_spec(kernel, dtype, tree=jitd.JitTree(tree_dir, "", "csrc", ("csrc",)),
                                    cuda_files=files, cuda_wrappers=wrappers, extra_cuda_cflags=k["options"],
                                    arch="sm_90a")
        keys[(kernel, dtype)] = jitd.modules._client_for(args.endpoint).get(spec, timeout=600).key  # the memo's
        return module

    def load(kernel, dtype):
        if args.endpoint and args.adhoc:
            return load_adhoc(kernel, dtype)
        if args.endpoint:
            import jitd
            return jitd.load_module(kernel, endpoint=args.endpoint, arch="sm_90a", dtype=dtype)
        path = os.path.join(args.module_dir, f"{kernel}.{dtype}.so")
        return tvm_ffi.load_module(path)

    shapes2 = [(1, 4096), (16, 4096), (33, 1000), (7, 3)]
    for dname in ("bf16", "fp16"):
        t = getattr(torch, DTYPES[dname])
        mod = load("diffusion.modulate_scale_shift", dname)
        for b, s, d in [(1, 1, 4096), (2, 1024, 3072), (3, 17, 1000)]:
            x = torch.randn(b, s, d, dtype=t, device=dev)
            scale = torch.randn(b, d, dtype=t, device=dev)
            shift = torch.randn(b, d, dtype=t, device=dev)
            out = torch.empty_like(x)
            mod.modulate_scale_shift(out, x, scale, shift)
            ref = x * (1 + scale[:, None]) + shift[:, None]
            record(f"modulate_scale_shift {dname} {b}x{s}x{d}", torch.equal(out, ref),
                   "vs eager x * (1 + scale[:, None]) + shift[:, None], bit for bit")
        mod = load("diffusion.residual_gate_add", dname)
        for rows, d in shapes2:
            res = torch.randn(rows, d, dtype=t, device=dev)
            upd = torch.randn(rows, d, dtype=t, device=dev)
            for kind, gate in (("full", torch.randn(rows, d, dtype=t, device=dev)),
                               ("broadcast", torch.randn(d, dtype=t, device=dev))):
                out = torch.empty_like(res)
                mod.residual_gate_add(out, res, upd, gate)
                record(f"residual_gate_add {dname} {kind} {rows}x{d}", torch.equal(out, res + upd * gate),
                       "vs eager residual + update * gate, bit for bit")

    for dname in ("bf16", "fp16", "fp32"):
        t = getattr(torch, DTYPES[dname])
        mod = load("moe.topk_sum", dname)
        for rows, topk, d in [(1, 8, 4096), (64, 8, 2048), (5, 3, 1000)]:
            x = torch.randn(rows, topk, d, dtype=t, device=dev)
            out = torch.empty(rows, d, dtype=t, device=dev)
            mod.topk_sum(out, x)
            acc = torch.zeros(rows, d, dtype=torch.float32, device=dev)
            for j in range(topk):
                acc = acc + x[:, j].float()
            record(f"topk_sum {dname} {rows}x{topk}x{d}", torch.equal(out, acc.to(t)),
                   "vs the formula in torch (fp32, ascending j, one rounding), bit for bit")

        mod = load("activation.silu_and_mul", dname)
        for rows, d in shapes2:
            x = torch.randn(rows, 2 * d, dtype=t, device=dev) * 4
            out = torch.empty(rows, d, dtype=t, device=dev)
            # On a side stream: the launch must use torch's current stream.
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                mod.silu_and_mul(out, x)
            side.synchronize()
            a, b = x[:, :d].double(), x[:, d:]
            silu = (a / (1 + torch.exp(-a))).to(t)
            ref = (silu.float() * b.float()).to(t)
            u = ulps(out, ref, torch)
            equal = (out == ref).float().mean().item()
            record(f"silu_and_mul {dname} {rows}x{d} (side stream)", u.max().item() <= 1 and equal >= 0.999,
                   f"vs the formula in fp64: max {u.max().item():.0f} ulp, {100 * equal:.3f}% equal "
                   "(bound: 1 ulp, 99.9%)")

        mod = load("norm.rmsnorm", dname)
        bound = 16 if dname == "fp32" else 2
        for rows, d in [(1, 4096), (16, 4096), (33, 8192), (300, 2048), (4, 100)]:
            x = torch.randn(rows, d, dtype=t, device=dev)
            w = torch.randn(d, dtype=t, device=dev)
            out = torch.empty_like(x)
            mod.rmsnorm(out, x, w, 1e-6)
            xd = x.double()
            ref = (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).to(t)
            u = ulps(out, ref, torch).max().item()
            record(f"rmsnorm {dname} {rows}x{d}", u <= bound, f"vs fp64: max {u:.0f} ulp (bound {bound})")

    # A wrong dtype is refused with the export's words, before any launch.
    mod = load("activation.silu_and_mul", "bf16")
    try:
        mod.silu_and_mul(torch.empty(2, 4, dtype=torch.float16, device=dev),
                         torch.empty(2, 8, dtype=torch.float16, device=dev))
        record("silu_and_mul refuses fp16 in the bf16 module", False, "no error raised")
    except TypeError as e:
        record("silu_and_mul refuses fp16 in the bf16 module", "bfloat16" in str(e), f"TypeError: {e}")

    torch.cuda.synchronize()
    failed = [r for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)} of {len(results)} checks passed on {torch.cuda.get_device_name()} "
          f"(torch {torch.__version__}, tvm_ffi {getattr(tvm_ffi, '__version__', '?')})")
    if args.adhoc:
        # The declared module of each unit has the ad-hoc spec's key: asked
        # for by name now, it is a hit, not a build.
        import jitd
        client = jitd.modules._client_for(args.endpoint)
        for (kernel, dtype), key in sorted(keys.items()):
            declared = client.get_kernel(kernel, "sm_90a", dtype=dtype, timeout=600)
            record(f"{kernel} {dtype}: the declared module is the ad-hoc one",
                   declared.key == key and declared.origin in ("memory", "disk"),
                   f"key {declared.key[:12]} (ad-hoc {key[:12]}), from {declared.origin}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "results": results}, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
