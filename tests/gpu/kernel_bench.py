#!/usr/bin/env python3
"""Kernel benchmark on the GPU host (issue 17): each of jitd's seven kernels,
served by the daemon and launched through CuPy RawModule on torch tensors,
against a device-to-device copy of the same bytes and against eager PyTorch.

For each kernel and shape (bf16; the serving shapes of issue 17 marked
"anchor", plus small and decode shapes, and rmsnorm at dims 2048/4096/8192
with every `threads` value):
  - the cubin's time: the median over 15 repetitions of CUDA events around
    20 back-to-back launches (one batch of 20 launches before, as warm-up),
    per launch, in µs; launch configs as docs/KERNELS.md says (element-wise:
    block 256, grid min(ceil(n/256), 132*16); rmsnorm: block = threads, grid
    = rows; align_block_size: grid 1, block 1024; align_single_token: grid 1,
    block 32);
  - bytes moved: every tensor the semantics read once plus every tensor they
    write once; GB/s = bytes / time;
  - % of copy: the cubin's GB/s over that of torch `dst.copy_(src)` moving the
    same bytes (src of bytes/2 bytes: bytes/2 read + bytes/2 written), timed
    the same way in the same run (the copy's GB/s is in the table too);
  - eager PyTorch's time for the same operation, timed the same way, and the
    speedup eager µs / jitd µs;
  - a check that the cubin computed the right thing on these inputs (the
    promise of KERNELS.md: bit-exact, or within its ulps), so that no row
    times a launch that did nothing.
Every case is fail-soft: an error is a row with the error, and the rest run.
The MoE alignment kernels go last: a trap there (a sticky CUDA error) would
end every case after it. Results are written after every case, so a kill
leaves the cases done so far.

    python3 tests/gpu/kernel_bench.py --jitctl PATH --endpoint unix:SOCK --work DIR \\
        [--report FILE.md] [--json FILE.json] [--budget-s 110] [--only SUBSTR]
    python3 tests/gpu/kernel_bench.py --list        # the cases and their bytes, no GPU
    python3 tests/gpu/kernel_bench.py --self-test   # standard library only, no GPU
    python3 tests/gpu/kernel_bench.py --dry-run --report F --json F
        # torch on the CPU, kernels emulated in torch: tests this script, not the kernels

Prints one line per case as it is measured, then the markdown table (also
written to --report), and writes every figure and the method to --json.
Exits 0 when every case was measured and checked, 1 otherwise (2: usage).
"""
import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import traceback

import gpu_common as gc

REPS = 15
INNER = 20
EPS = 1e-6
SEED = 20261202
ISSUE_SILU_US = 239.0  # issue 17: silu_and_mul 8192x14336 at 239 µs, "71%" of a copy
ISSUE_SILU_PCT = 71.0
ALIGN_GRIDS_4096 = (1, 4, 8, 16, 64)
ALIGN_GRIDS_256 = (1, 4, 8)


# ---------------------------------------------------------------- the cases

def C(kernel, shape, params=None, anchor=False, note=""):
    return {"kernel": kernel, "params": dict(params or {}), "shape": dict(shape), "anchor": anchor, "note": note}


def bench_cases():
    """Every case, in the order they run (the MoE alignment kernels last)."""
    bf16 = {"dtype": "bf16"}
    cases = [C("launch floor", {"batch": 1, "seq": 0, "dim": 3072}, bf16,
               note="modulate_scale_shift with seq=0 returns without writing: the cost of one CuPy launch; "
                    "eager: a 1-element add_; copy: 2 bytes")]
    mod = "diffusion.modulate_scale_shift"
    cases += [C(mod, {"batch": 1, "seq": 4096, "dim": 3072}, bf16, anchor=True),
              C(mod, {"batch": 1, "seq": 4608, "dim": 3072}, bf16),
              C(mod, {"batch": 2, "seq": 1024, "dim": 3072}, bf16),
              C(mod, {"batch": 1, "seq": 64, "dim": 3072}, bf16),
              C(mod, {"batch": 1, "seq": 17, "dim": 64}, bf16),
              C(mod, {"batch": 1, "seq": 4096, "dim": 3070}, bf16, note="dim not a multiple of 8: the scalar path")]
    res = "diffusion.residual_gate_add"
    for gate, shapes in (("full", [(4096, 3072, True), (64, 3072, False), (16, 3072, False), (17, 64, False)]),
                         ("broadcast", [(4096, 3072, True), (16, 3072, False)])):
        cases += [C(res, {"rows": r, "dim": d}, {"dtype": "bf16", "gate": gate}, anchor=a) for r, d, a in shapes]
    silu = "activation.silu_and_mul"
    cases += [C(silu, {"rows": 8192, "dim": 14336}, bf16, anchor=True,
                note="issue's 8192x14336 read as out [8192, 14336], in [8192, 28672] (see the notes)"),
              C(silu, {"rows": 8192, "dim": 7168}, bf16, note="the other reading: in [8192, 14336]"),
              C(silu, {"rows": 16, "dim": 14336}, bf16),
              C(silu, {"rows": 1, "dim": 14336}, bf16),
              C(silu, {"rows": 17, "dim": 64}, bf16)]
    topk = "moe.topk_sum"
    cases += [C(topk, {"rows": 4096, "topk": 8, "dim": 4096}, bf16, anchor=True),
              C(topk, {"rows": 256, "topk": 8, "dim": 4096}, bf16),
              C(topk, {"rows": 16, "topk": 8, "dim": 4096}, bf16),
              C(topk, {"rows": 1, "topk": 8, "dim": 4096}, bf16),
              C(topk, {"rows": 17, "topk": 8, "dim": 64}, bf16)]
    rms = "norm.rmsnorm"
    for dim in (2048, 4096, 8192):
        for threads in (128, 256, 512, 1024):
            cases.append(C(rms, {"rows": 8192, "dim": dim}, {"dtype": "bf16", "threads": str(threads)},
                           anchor=(dim == 4096)))
    for rows in (16, 1):
        for threads in (256, 512):
            cases.append(C(rms, {"rows": rows, "dim": 4096}, {"dtype": "bf16", "threads": str(threads)}))
    single = "moe.align_single_token"
    cases += [C(single, {"topk": 8, "block_size": 64, "num_experts": 256}),
              C(single, {"topk": 32, "block_size": 64, "num_experts": 256})]
    align = "moe.align_block_size"
    routing = {"topk": 8, "num_experts": 256, "block_size": 64}
    cases += [C(align, {"tokens": 4096, **routing}, anchor=True),
              C(align, {"tokens": 256, **routing}, anchor=True),
              C(align, {"tokens": 16, **routing}),
              C(align, {"tokens": 1, **routing}, note="one token: compare with align_single_token")]
    # The grid is the caller's choice (every grid gives the same outputs): the
    # rule's (above) against others, at the two anchor sizes.
    cases += [C(align, {"tokens": 4096, **routing, "grid": g}, note="grid chosen here, not by the rule")
              for g in ALIGN_GRIDS_4096]
    cases += [C(align, {"tokens": 256, **routing, "grid": g}, note="grid chosen here, not by the rule")
              for g in ALIGN_GRIDS_256]
    return cases


def short(kernel):
    return kernel.split(".")[-1]


def shape_label(case):
    s, k = case["shape"], case["kernel"]
    if k in ("moe.align_block_size",):
        grid = f", grid {s['grid']}" if "grid" in s else ""
        return f"{s['tokens']} tok x top-{s['topk']}, {s['num_experts']} exp, block {s['block_size']}{grid}"
    if k == "moe.align_single_token":
        return f"top-{s['topk']}, block {s['block_size']}"
    if k == "activation.silu_and_mul":
        return f"{s['rows']}x{s['dim']} (in {s['rows']}x{2 * s['dim']})"
    return "x".join(str(v) for v in s.values())


def params_label(case):
    return ", ".join(f"{k}={v}" for k, v in case["params"].items())


def bytes_moved(case):
    """Reads plus writes of the tensors, each once, per KERNELS.md's shapes."""
    s, k = case["shape"], case["kernel"]
    e = 2  # bf16
    if k == "launch floor":
        return 0
    if k == "diffusion.modulate_scale_shift":
        n = s["batch"] * s["seq"] * s["dim"]
        return e * (2 * n + 2 * s["batch"] * s["dim"])            # x, out; scale, shift
    if k == "diffusion.residual_gate_add":
        n = s["rows"] * s["dim"]
        gate = n if case["params"]["gate"] == "full" else s["dim"]
        return e * (3 * n + gate)                                  # residual, update, out; gate
    if k == "activation.silu_and_mul":
        return e * 3 * s["rows"] * s["dim"]                        # in [rows, 2 dim], out [rows, dim]
    if k == "moe.topk_sum":
        return e * (s["rows"] * s["topk"] * s["dim"] + s["rows"] * s["dim"])
    if k == "norm.rmsnorm":
        return e * (2 * s["rows"] * s["dim"] + s["dim"])           # x, out; weight
    if k == "moe.align_block_size":
        numel = s["tokens"] * s["topk"]
        return 4 * (numel + gc.align_max_pad(numel, s["num_experts"], s["block_size"])
                    + gc.align_expert_slots(numel, s["num_experts"], s["block_size"]) + 1)
    if k == "moe.align_single_token":
        return 4 * (s["topk"] + s["topk"] * s["block_size"] + s["topk"] + 1)
    raise ValueError(k)


EAGER_OPS = {
    "launch floor": "t.add_(1) on a 1-element tensor",
    "diffusion.modulate_scale_shift": "x * (1 + scale[:, None]) + shift[:, None]",
    "diffusion.residual_gate_add": "residual + update * gate",
    "activation.silu_and_mul": "F.silu(in[:, :dim]) * in[:, dim:]",
    "moe.topk_sum": "in.sum(dim=1) (sums in another order: for time only)",
    "norm.rmsnorm": "F.rms_norm(x, (dim,), weight, 1e-6)",
    "moe.align_block_size": "torch implementation of the semantics (scatter_add counts, stable sort, "
                            "scatter, searchsorted; torch_refs.torch_align_block_size)",
    "moe.align_single_token": "torch implementation of the semantics (stable sort, scatter; "
                              "torch_refs.torch_align_single_token)",
}

CHECKS = {
    "launch floor": "output untouched (the kernel returns at seq=0)",
    "diffusion.modulate_scale_shift": "bit-exact with eager",
    "diffusion.residual_gate_add": "bit-exact with eager",
    "activation.silu_and_mul": "<= 1 ulp and >= 99.9% bit-exact vs the fp64 formula",
    "moe.topk_sum": "bit-exact with the fp32 sum in k order",
    "norm.rmsnorm": "<= 2 ulp of the fp64 reference",
    "moe.align_block_size": "every output equal to the semantics (pure-Python reference)",
    "moe.align_single_token": "every output equal to the semantics (pure-Python reference)",
}


# ---------------------------------------------------------------- building a case

def build(case, backend, torch, gen):
    """(launch, eager, check, path, grid, block) for one case. `check` runs
    after the timing, on the output of the last launch."""
    import torch_refs as tr
    dev = backend.device
    bf16 = torch.bfloat16
    s, k = case["shape"], case["kernel"]

    def randn(shape, scale=2.0):
        return (torch.randn(shape, generator=gen, device=dev, dtype=torch.float32) * scale).to(bf16)

    def nan_like(t):
        return torch.full_like(t, float("nan"))

    def addr(*ts):
        return [t.data_ptr() for t in ts]

    if k == "launch floor":
        x = torch.zeros(8, dtype=bf16, device=dev)
        out = torch.full((8,), 7.0, dtype=bf16, device=dev)
        one = torch.zeros(1, dtype=bf16, device=dev)
        grid, block = (1, 1, 1), (gc.ELEMENTWISE_BLOCK, 1, 1)
        values = {"out": out, "x": x, "scale": x, "shift": x, "batch": s["batch"], "seq": s["seq"], "dim": s["dim"]}
        launch = backend.launcher("diffusion.modulate_scale_shift", case["params"], grid, block, values)

        def check():
            ok = bool((out == 7.0).all().item())
            return ok, "untouched" if ok else "the kernel wrote at seq=0"
        return launch, lambda: one.add_(1), check, "-", grid, block

    if k == "diffusion.modulate_scale_shift":
        b, l, d = s["batch"], s["seq"], s["dim"]
        x, scale, shift = randn((b, l, d)), randn((b, d)), randn((b, d))
        out = nan_like(x)
        grid, block = gc.elementwise_launch(x.numel())
        launch = backend.launcher(k, case["params"], grid, block,
                                  {"out": out, "x": x, "scale": scale, "shift": shift, "batch": b, "seq": l, "dim": d})
        eager = lambda: tr.eager_modulate(x, scale, shift)  # noqa: E731
        check = bit_check(tr, out, eager)
        return launch, eager, check, gc.vector_path(2, d, addr(out, x, scale, shift)), grid, block

    if k == "diffusion.residual_gate_add":
        r, d = s["rows"], s["dim"]
        residual, update = randn((r, d)), randn((r, d))
        gate = randn((r, d)) if case["params"]["gate"] == "full" else randn((d,))
        out = nan_like(residual)
        grid, block = gc.elementwise_launch(residual.numel())
        launch = backend.launcher(k, case["params"], grid, block, {"out": out, "residual": residual, "update": update,
                                                                    "gate": gate, "rows": r, "dim": d})
        eager = lambda: tr.eager_residual(residual, update, gate)  # noqa: E731
        return launch, eager, bit_check(tr, out, eager), gc.vector_path(2, d, addr(out, residual, update, gate)), \
            grid, block

    if k == "activation.silu_and_mul":
        r, d = s["rows"], s["dim"]
        inp = randn((r, 2 * d))
        out = torch.full((r, d), float("nan"), dtype=bf16, device=dev)
        grid, block = gc.elementwise_launch(out.numel())
        launch = backend.launcher(k, case["params"], grid, block, {"out": out, "in": inp, "rows": r, "dim": d})

        def check():
            worst, exact = tr.compare_bits(out, tr.ref_silu_and_mul(inp, d))
            return worst <= 1 and exact >= 0.999, f"max {worst} ulp, {100 * exact:.3f}% exact vs fp64 formula"
        return launch, (lambda: tr.eager_silu_and_mul(inp, d)), check, gc.vector_path(2, d, addr(out, inp)), grid, block

    if k == "moe.topk_sum":
        r, kk, d = s["rows"], s["topk"], s["dim"]
        inp = randn((r, kk, d))
        out = torch.full((r, d), float("nan"), dtype=bf16, device=dev)
        grid, block = gc.elementwise_launch(out.numel())
        launch = backend.launcher(k, case["params"], grid, block, {"out": out, "in": inp, "rows": r, "topk": kk,
                                                                    "dim": d})
        return launch, (lambda: tr.eager_topk_sum(inp)), bit_check(tr, out, lambda: tr.ref_topk_sum(inp)), \
            gc.vector_path(2, d, addr(out, inp)), grid, block

    if k == "norm.rmsnorm":
        r, d, threads = s["rows"], s["dim"], int(case["params"]["threads"])
        x = randn((r, d))
        weight = (1 + torch.randn((d,), generator=gen, device=dev) * 0.25).to(bf16)
        out = nan_like(x)
        grid, block = (r, 1, 1), (threads, 1, 1)
        launch = backend.launcher(k, case["params"], grid, block, {"out": out, "x": x, "weight": weight, "rows": r,
                                                                    "dim": d, "eps": EPS})

        def check():
            u = tr.ulps_from_f64(out, tr.ref_rmsnorm_f64(x, weight, EPS))
            worst = float(u.max().item())
            return worst <= 2.0, f"max {worst:.2f} ulp from fp64"
        return launch, (lambda: tr.eager_rmsnorm(x, weight, EPS)), check, gc.vector_path(2, d, addr(out, x, weight)), \
            grid, block

    if k == "moe.align_block_size":
        numel, E, bs = s["tokens"] * s["topk"], s["num_experts"], s["block_size"]
        ids = torch.randint(0, E, (numel,), generator=gen, device=dev, dtype=torch.int32)
        sorted_ids = torch.full((gc.align_max_pad(numel, E, bs),), -7, dtype=torch.int32, device=dev)
        expert_ids = torch.full((gc.align_expert_slots(numel, E, bs),), -7, dtype=torch.int32, device=dev)
        ntpp = torch.full((1,), -7, dtype=torch.int32, device=dev)
        grid, block = gc.align_block_size_launch(numel, s.get("grid"))
        launch = backend.launcher(k, case["params"], grid, block, {
            "topk_ids": ids, "numel": numel, "num_experts": E, "block_size": bs, "sorted_token_ids": sorted_ids,
            "expert_ids": expert_ids, "num_tokens_post_pad": ntpp})
        eager = lambda: tr.torch_align_block_size(ids, E, bs)  # noqa: E731

        def check():
            want = gc.ref_align_block_size(ids.tolist(), E, bs)
            return align_check(tr, (sorted_ids, expert_ids, ntpp), want, eager())
        return launch, eager, check, "-", grid, block

    if k == "moe.align_single_token":
        topk, bs, E = s["topk"], s["block_size"], s["num_experts"]
        ids = torch.randperm(E, generator=gen, device=dev)[:topk].to(torch.int32)
        sorted_ids = torch.full((topk * bs,), -7, dtype=torch.int32, device=dev)
        expert_ids = torch.full((topk,), -7, dtype=torch.int32, device=dev)
        ntpp = torch.full((1,), -7, dtype=torch.int32, device=dev)
        grid, block = gc.ALIGN_SINGLE_TOKEN_LAUNCH
        launch = backend.launcher(k, case["params"], grid, block, {
            "topk_ids": ids, "topk": topk, "block_size": bs, "sorted_token_ids": sorted_ids, "expert_ids": expert_ids,
            "num_tokens_post_pad": ntpp})
        eager = lambda: tr.torch_align_single_token(ids, bs)  # noqa: E731

        def check():
            want = gc.ref_align_single_token(ids.tolist(), bs)
            return align_check(tr, (sorted_ids, expert_ids, ntpp), want, eager())
        return launch, eager, check, "-", grid, block

    raise ValueError(f"no builder for {k}")


def bit_check(tr, out, want_fn):
    def check():
        worst, exact = tr.compare_bits(out, want_fn())
        return worst == 0, "bit-exact" if worst == 0 else f"max {worst} ulp, {100 * exact:.3f}% exact"
    return check


def align_check(tr, got, want, eager_got):
    names = ("sorted_token_ids", "expert_ids", "num_tokens_post_pad")
    want = (want[0], want[1], [want[2]])
    bad = [n for n, g, w in zip(names, got, want) if g.tolist() != w]
    eager_bad = [n for n, g, w in zip(names, eager_got, want) if g.tolist() != w]
    detail = "all outputs equal" if not bad else "differs: " + ", ".join(bad)
    if eager_bad:
        detail += f"; the torch implementation (eager) differs: {', '.join(eager_bad)}"
    return not bad, detail


# ---------------------------------------------------------------- running

class Terminated(Exception):
    pass


def measure(case, backend, torch, gen, copies, reps, inner):
    """One row; raises on any error (the caller records it)."""
    row = base_row(case)
    # Everything on the backend's stream (torch's pool streams do not wait
    # for the default stream), and the whole device idle between the steps.
    with backend.scope():
        launch, eager, check, path, grid, block = build(case, backend, torch, gen)
        backend.sync_all()
        row.update(path=path, grid=list(grid), block=list(block))
        us, runs = backend.time_us(launch, reps, inner)
        row.update(us=us, us_runs=runs)
        # The same launches replayed from a CUDA graph: what the GPU takes per
        # launch, without the host's launch rate (the launch floor row).
        try:
            graph_us, graph_runs = backend.graph_time_us(launch, reps, inner)
            row.update(graph_us=graph_us, graph_runs=graph_runs)
        except Exception as e:  # noqa: BLE001 - the row keeps its other figures
            row["graph_error"] = f"{type(e).__name__}: {str(e).strip()[:200]}"
            backend.sync_all()
        ok, detail = check()
        backend.sync_all()
        row.update(check_ok=bool(ok), check=detail)
        eager_us, eager_runs = backend.time_us(eager, reps, inner)
        row.update(eager_us=eager_us, eager_runs=eager_runs, speedup=eager_us / us if us > 0 else None)
        half = max(row["bytes"] // 2, 1)
        if half not in copies:
            src = torch.ones(half, dtype=torch.uint8, device=backend.device)
            dst = torch.empty_like(src)
            backend.sync_all()
            copies[half] = backend.time_us(lambda: dst.copy_(src), reps, inner)
            del src, dst
        backend.sync_all()
    copy_us, copy_runs = copies[half]
    row.update(copy_bytes=2 * half, copy_us=copy_us, copy_runs=copy_runs,
               copy_gbps=2 * half / copy_us / 1e3 if copy_us > 0 else None)
    if row["bytes"] > 0 and us > 0:
        row["gbps"] = row["bytes"] / us / 1e3
        row["pct_of_copy"] = 100.0 * row["gbps"] / row["copy_gbps"] if row["copy_gbps"] else None
    row["status"] = "measured"
    return row


def base_row(case):
    return {"kernel": short(case["kernel"]), "request": case["kernel"], "params": case["params"],
            "shape": case["shape"], "shape_label": shape_label(case), "anchor": case["anchor"], "note": case["note"],
            "bytes": bytes_moved(case), "eager_op": EAGER_OPS[case["kernel"]], "check_rule": CHECKS[case["kernel"]],
            "path": "-", "grid": None, "block": None, "us": None, "us_runs": [], "gbps": None, "copy_bytes": None,
            "copy_us": None, "copy_gbps": None, "copy_runs": [], "pct_of_copy": None, "eager_us": None,
            "eager_runs": [], "graph_us": None, "graph_runs": [], "speedup": None, "check_ok": None, "check": "", "error": "", "status": "not run"}


def method():
    return {
        "timing": f"median of {REPS} repetitions; each: a CUDA event, {INNER} back-to-back launches, a CUDA event, "
                  f"elapsed / {INNER}; one batch of {INNER} launches before as warm-up; torch and CuPy on one stream",
        "graph": f"the cubin's {INNER} launches captured once in a CUDA graph; median of {REPS} replays between CUDA "
                 f"events, elapsed / {INNER}: the GPU's time per launch, free of the host's launch rate",
        "bytes": "every tensor the semantics read, once, plus every tensor they write, once (bf16 2 B, int32 4 B)",
        "copy": "torch dst.copy_(src), uint8, src of bytes/2: bytes/2 read + bytes/2 written; same timing; "
                "% of copy = kernel GB/s / copy GB/s = copy µs / kernel µs",
        "eager": "eager PyTorch, same timing, outputs allocated by torch's caching allocator",
        "speedup": "eager µs / jitd µs (above 1: the cubin is faster)",
        "launch": "element-wise: block 256, grid min(ceil(n/256), 132*16); rmsnorm: block threads, grid rows; "
                  "align_block_size: block 1024, grid jitd.align_block_size_grid(numel) unless the shape names one; "
                  "align_single_token: grid 1, block 32",
        "inputs": f"bf16 randn*2 (rmsnorm weight 1+0.25*randn, eps {EPS}), seed {SEED}; routing ids uniform",
        "caveat": "a few-µs kernel is bounded by the host's launch rate (see the launch floor row); L2 (50 MB on "
                  "the H200) holds the small shapes, so their GB/s can pass the DRAM copy's",
    }


def silu_reading(rows):
    """What the issue's 239 µs for silu_and_mul 8192x14336 means under each
    reading, at this run's copy GB/s for the same bytes."""
    out = []
    for r in rows:
        if r["request"] == "activation.silu_and_mul" and r["shape"].get("rows") == 8192:
            implied = r["bytes"] / ISSUE_SILU_US / 1e3
            pct = 100.0 * implied / r["copy_gbps"] if r.get("copy_gbps") else None
            out.append({"shape": r["shape_label"], "bytes": r["bytes"], "gbps_at_239us": implied,
                        "pct_of_this_runs_copy": pct, "measured_us": r.get("us")})
    return out


def render(doc):
    """The markdown section for report.md."""
    rows = doc["rows"]
    if doc.get("setup_error"):
        return (f"**kernel_bench: no case ran: setup failed: {doc['setup_error']}** ({len(rows)} cases planned; "
                "the traceback is in kernel_bench.json).\n")
    lines = ["**Method.** " + "; ".join(f"{k}: {v}" for k, v in doc["method"].items()) + ".", ""]
    dev = doc.get("device") or {}
    if dev:
        lines += ["**Device.** " + ", ".join(f"{k} {v}" for k, v in dev.items()) + f"; backend: {doc['backend']}.",
                  ""]
    measured = sum(1 for r in rows if r["status"] == "measured")
    bad = [r for r in rows if r["status"] == "measured" and not r["check_ok"]]
    lines += [f"**{measured} of {len(rows)} cases measured, {len(bad)} failed their check, "
              f"{sum(1 for r in rows if r['error'])} errors, {sum(1 for r in rows if r['status'].startswith('not run'))}"
              f" not run** ({doc.get('elapsed_s', 0):.0f} s{'' if doc.get('finished') else ', INCOMPLETE'}).", ""]
    headers = ["kernel", "shape", "params", "path", "MB", "µs", "GB/s", "% of copy", "copy GB/s", "copy µs",
               "eager µs", "×eager", "graph µs", "check"]
    right = {4, 5, 6, 7, 8, 9, 10, 11, 12}

    def cells(r):
        if r["status"] != "measured":
            why = r["error"] or r["status"]
            return [r["kernel"], r["shape_label"], params_label_row(r), r["path"], gc.fmt(r["bytes"] / 1e6, 2),
                    "-", "-", "-", "-", "-", "-", "-", "-", f"**{why[:160]}**"]
        chk = r["check"] if r["check_ok"] else f"**BAD: {r['check']}**"
        return [r["kernel"] + (" ⚓" if r["anchor"] else ""), r["shape_label"], params_label_row(r), r["path"],
                gc.fmt(r["bytes"] / 1e6, 2), gc.fmt(r["us"], 2), gc.fmt(r["gbps"], 0), gc.fmt(r["pct_of_copy"], 0),
                gc.fmt(r["copy_gbps"], 0), gc.fmt(r["copy_us"], 2), gc.fmt(r["eager_us"], 2),
                gc.fmt(r["speedup"], 2), gc.fmt(r.get("graph_us"), 2), chk]

    anchors = [r for r in rows if r["anchor"]]
    if anchors:
        lines += ["### The reference shapes of issue 17 (⚓)", "", gc.md_table(headers, [cells(r) for r in anchors],
                                                                            right)]
    lines += ["### Every case", "", gc.md_table(headers, [cells(r) for r in rows], right)]
    lines += ["### Notes", ""]
    reading = silu_reading(rows)
    if reading:
        lines.append("- silu_and_mul \"8192x14336\": KERNELS.md's `in` is `[rows, 2 * dim]`. At the issue's "
                     f"{ISSUE_SILU_US:.0f} µs, the two readings would be:")
        for x in reading:
            lines.append(f"  - {x['shape']}: {x['bytes'] / 1e6:.1f} MB, {x['gbps_at_239us']:.0f} GB/s, "
                         f"{gc.fmt(x['pct_of_this_runs_copy'], 0)}% of this run's copy of those bytes "
                         f"(measured here: {gc.fmt(x['measured_us'], 1)} µs)")
        known = [x for x in reading if x["pct_of_this_runs_copy"] is not None]
        if known:
            best = min(known, key=lambda x: abs(x["pct_of_this_runs_copy"] - ISSUE_SILU_PCT))
            lines.append(f"  The issue's {ISSUE_SILU_PCT:.0f}% is closest to {best['shape']} in this run. The anchor "
                         "is out [8192, 14336], in [8192, 28672] (705 MB), chosen before the run: at an H200 "
                         "copy of about 4.1 TB/s, 239 µs for 705 MB is about 71%; for 352 MB it would be about 35%.")
    lines += ["- path: `vector` is the 16-byte path (dim a multiple of 8 and every pointer 16-byte aligned; torch "
              "allocations are 256-byte aligned), `scalar` the element path (KERNELS.md, Alignment).",
              "- eager: " + "; ".join(f"{short(k)}: `{v}`" for k, v in EAGER_OPS.items()) + ".",
              "- check (the cubin's output of the timed launches): " +
              "; ".join(f"{short(k)}: {v}" for k, v in CHECKS.items()) + ".",
              "- MB is 10^6 bytes and GB/s 10^9 bytes per second; ×eager above 1 means the cubin is faster.", ""]
    notes = [r for r in rows if r["note"]]
    for r in notes:
        lines.append(f"- {r['kernel']} {r['shape_label']}: {r['note']}")
    return "\n".join(lines) + "\n"


def params_label_row(r):
    return ", ".join(f"{k}={v}" for k, v in r["params"].items())


def one_line(r):
    if r["status"] != "measured":
        return f"{'ERR' if r['error'] else '---'} {r['kernel']} {r['shape_label']} {params_label_row(r)}: " \
               f"{r['error'] or r['status']}"
    return (f"{'ok ' if r['check_ok'] else 'BAD'} {r['kernel']} {r['shape_label']} {params_label_row(r)} "
            f"[{r['path']}]: {r['us']:.2f} µs, {gc.fmt(r['gbps'], 0)} GB/s, {gc.fmt(r['pct_of_copy'], 0)}% of copy "
            f"({gc.fmt(r['copy_gbps'], 0)} GB/s), eager {r['eager_us']:.2f} µs (x{gc.fmt(r['speedup'], 2)}); "
            f"{r['check']}")


def write_outputs(doc, a):
    if a.json:
        gc.write_whole(a.json, json.dumps(doc, indent=1) + "\n")
    if a.report:
        gc.write_whole(a.report, render(doc))


def run(a):
    cases = [c for c in bench_cases() if not a.only or any(s in c["kernel"] for s in a.only)]
    if a.max_mb is not None:
        cases = [c for c in cases if bytes_moved(c) <= a.max_mb * 1e6]
    t0 = time.monotonic()
    doc = {"method": method(), "backend": "dry-run" if a.dry_run else "cuda", "device": {}, "reps": a.reps,
           "inner": a.inner, "rows": [base_row(c) for c in cases], "finished": False, "elapsed_s": 0.0}
    try:
        import torch
        backend = gc.DryBackend(a, torch) if a.dry_run else gc.CudaBackend(a, torch)
        gen = torch.Generator(device=backend.device).manual_seed(SEED)
        doc["backend"] = backend.name
    except Exception as e:  # noqa: BLE001 - no torch, CuPy or device: say so in the report
        why = f"{type(e).__name__}: {e}"
        for r in doc["rows"]:
            r.update(status="error", error=f"setup: {why}"[:300])
        doc["setup_error"] = why
        doc["setup_traceback"] = traceback.format_exc()[-3000:]
        write_outputs(doc, a)
        print(f"kernel_bench: setup failed: {why}")
        print(f"kernel_bench: 0 passed, {len(cases)} failed (no case could run)")
        return 1
    try:
        doc["device"] = backend.describe()
    except Exception as e:  # noqa: BLE001 - fail soft: the description is not the benchmark
        doc["device"] = {"error": f"{type(e).__name__}: {e}"}
    copies = {}

    def on_term(signum, _frame):
        raise Terminated(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    failed = 0
    try:
        for i, case in enumerate(cases):
            if time.monotonic() - t0 > a.budget_s:
                doc["rows"][i]["status"] = f"not run (the {a.budget_s:.0f} s budget was spent)"
                failed += 1
                print(one_line(doc["rows"][i]), flush=True)
                continue
            try:
                row = measure(case, backend, torch, gen, copies, a.reps, a.inner)
            except Terminated:
                raise
            except Exception as e:  # noqa: BLE001 - one case's failure must not stop the rest
                row = base_row(case)
                row["status"] = "error"
                row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
                row["traceback"] = traceback.format_exc()[-2000:]
                with contextlib.suppress(Exception):
                    backend.sync_all()
            failed += row["status"] != "measured" or not row["check_ok"]
            doc["rows"][i] = row
            doc["elapsed_s"] = time.monotonic() - t0
            print(one_line(row), flush=True)
            write_outputs(doc, a)
        doc["finished"] = True
    except Terminated as e:
        for r in doc["rows"]:
            if r["status"] == "not run":
                r["status"] = f"not run (terminated: {e})"
        failed += 1
        print(f"kernel_bench: terminated ({e}); writing what was measured", flush=True)
    finally:
        doc["elapsed_s"] = time.monotonic() - t0
        write_outputs(doc, a)
    print()
    print(render(doc))
    measured = sum(1 for r in doc["rows"] if r["status"] == "measured")
    print(f"kernel_bench: {measured - sum(1 for r in doc['rows'] if r['status'] == 'measured' and not r['check_ok'])} "
          f"passed, {failed} failed ({measured} of {len(doc['rows'])} cases measured)")
    return 1 if failed else 0


# ---------------------------------------------------------------- self-test (no GPU, no torch)

def self_test(a):
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)

    sigs = gc.load_signatures(a.kernels)
    kinds = {k: [t for t, _ in v] for k, v in sigs.items()}
    expect(kinds.get("diffusion.modulate_scale_shift") == ["ptr"] * 4 + ["i64"] * 3, "modulate signature")
    expect(kinds.get("diffusion.residual_gate_add") == ["ptr"] * 4 + ["i64"] * 2, "residual signature")
    expect(kinds.get("moe.align_block_size") == ["ptr", "i64", "i32", "i32", "ptr", "ptr", "ptr"], "align signature")
    expect(kinds.get("moe.align_single_token") == ["ptr", "i32", "i32", "ptr", "ptr", "ptr"], "single signature")
    expect(kinds.get("moe.topk_sum") == ["ptr", "ptr", "i64", "i32", "i64"], "topk_sum signature (int32 topk)")
    expect(kinds.get("activation.silu_and_mul") == ["ptr", "ptr", "i64", "i64"], "silu signature")
    expect(kinds.get("norm.rmsnorm") == ["ptr", "ptr", "ptr", "i64", "i64", "f32"], "rmsnorm signature (float eps)")
    expect(len(sigs) == 7, f"7 kernels in kernels.toml, got {sorted(sigs)}")
    packed = gc.pack(sigs["moe.topk_sum"], {"out": 256, "in": 512, "rows": 3, "topk": 8, "dim": 64}, gc.FakeCp)
    expect(packed == (("u64", 256), ("u64", 512), ("i64", 3), ("i32", 8), ("i64", 64)), f"pack topk_sum: {packed}")
    packed = gc.pack(sigs["norm.rmsnorm"], {"out": 0, "x": 0, "weight": 0, "rows": 1, "dim": 2, "eps": 1e-6}, gc.FakeCp)
    expect(packed[-1] == ("f32", 1e-6), "pack rmsnorm eps as float32")
    for bad in ({"out": 0}, {"out": 0, "in": 0, "rows": 1, "topk": 2**31, "dim": 1}):
        try:
            gc.pack(sigs["moe.topk_sum"], bad, gc.FakeCp)
            problems.append(f"pack accepted {bad}")
        except ValueError:
            pass
    expect(gc.elementwise_launch(4096 * 3072) == ((2112, 1, 1), (256, 1, 1)), "elementwise grid cap")
    expect(gc.elementwise_launch(17 * 64) == ((5, 1, 1), (256, 1, 1)), "elementwise small grid")
    expect(gc.elementwise_launch(0)[0] == (1, 1, 1), "elementwise grid >= 1")
    expect(gc.vector_path(2, 3072, [0, 256, 512]) == "vector", "vector path")
    expect(gc.vector_path(2, 3070, [0, 256]) == "scalar", "scalar path: dim")
    expect(gc.vector_path(2, 3072, [0, 258]) == "scalar", "scalar path: pointer")

    cases = bench_cases()
    by = {(c["kernel"], tuple(c["shape"].values()), tuple(c["params"].values())): c for c in cases}
    silu = by[("activation.silu_and_mul", (8192, 14336), ("bf16",))]
    expect(bytes_moved(silu) == 3 * 8192 * 14336 * 2 == 704643072, "silu bytes")
    expect(bytes_moved(by[("diffusion.modulate_scale_shift", (1, 4096, 3072), ("bf16",))])
           == 2 * (2 * 4096 * 3072 + 2 * 3072), "modulate bytes")
    expect(bytes_moved(by[("diffusion.residual_gate_add", (4096, 3072), ("bf16", "full"))]) == 8 * 4096 * 3072,
           "residual full bytes")
    expect(bytes_moved(by[("diffusion.residual_gate_add", (4096, 3072), ("bf16", "broadcast"))])
           == 2 * (3 * 4096 * 3072 + 3072), "residual broadcast bytes")
    expect(bytes_moved(by[("moe.topk_sum", (4096, 8, 4096), ("bf16",))]) == 2 * 9 * 4096 * 4096, "topk bytes")
    expect(bytes_moved(by[("norm.rmsnorm", (8192, 4096), ("bf16", "256"))]) == 2 * (2 * 8192 * 4096 + 4096),
           "rmsnorm bytes")
    align = by[("moe.align_block_size", (4096, 8, 256, 64), ())]
    expect(bytes_moved(align) == 4 * (32768 + (32768 + 256 * 63) + -(-(32768 + 256 * 63) // 64) + 1), "align bytes")
    expect(sum(1 for c in cases if c["kernel"] == "norm.rmsnorm" and c["shape"]["rows"] == 8192) == 12,
           "rmsnorm: 3 dims x 4 threads")
    order = [c["kernel"] for c in cases]
    expect(order.index("moe.align_single_token") > order.index("norm.rmsnorm") and order[-1] == "moe.align_block_size",
           "the MoE alignment kernels last")

    # The report from fake figures: every case measured but one error and one not run.
    rows = []
    for i, c in enumerate(cases):
        r = base_row(c)
        if i == 3:
            r.update(status="error", error="CUDARuntimeError: cudaErrorIllegalAddress")
        elif i == 4:
            r.update(status="not run (the 110 s budget was spent)")
        else:
            us = 1.0 + i
            copy = 0.8 * us
            r.update(status="measured", path="vector", grid=[1, 1, 1], block=[256, 1, 1], us=us, us_runs=[us] * 15,
                     copy_bytes=max(r["bytes"] // 2, 1) * 2, copy_us=copy, copy_gbps=r["bytes"] / copy / 1e3,
                     eager_us=2 * us, speedup=2.0, check_ok=i != 5, check="bit-exact" if i != 5 else "max 3 ulp")
            if r["bytes"]:
                r.update(gbps=r["bytes"] / us / 1e3, pct_of_copy=80.0)
        rows.append(r)
    doc = {"method": method(), "backend": "self-test", "device": {"gpu": "fake"}, "reps": REPS, "inner": INNER,
           "rows": rows, "finished": True, "elapsed_s": 1.0}
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(json=os.path.join(tmp, "b.json"), report=os.path.join(tmp, "b.md"))
        write_outputs(doc, ns)
        back = json.load(open(ns.json))
        md = open(ns.report).read()
    expect(len(back["rows"]) == len(cases), "JSON rows")
    table_rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| kernel")]
    anchors = sum(1 for c in cases if c["anchor"])
    expect(len(table_rows) == len(cases) + anchors, f"markdown rows: {len(table_rows)} != {len(cases)} + {anchors}")
    expect(all(line.count(" | ") == 13 for line in table_rows), "14 cells in every row")
    expect("**CUDARuntimeError" in md and "**BAD: max 3 ulp**" in md and "not run (the 110 s budget" in md,
           "errors, bad checks and skipped cases show")
    expect("of this run's copy" in md and "704.6 MB" in md, "the silu reading note")
    for r in rows:
        one_line(r)
    reading = silu_reading(rows)
    expect(len(reading) == 2 and abs(reading[0]["gbps_at_239us"] - 2948.3) < 1, f"silu reading: {reading}")
    if a.self_test_out:  # fake inputs for check_report.sh's write_report.py test
        write_outputs(doc, argparse.Namespace(json=os.path.join(a.self_test_out, "kernel_bench.json"),
                                              report=os.path.join(a.self_test_out, "kernel_bench.md")))
    if problems:
        for p in problems:
            print("self-test: FAILED:", p)
        return 1
    print(f"kernel_bench self-test: ok ({len(cases)} cases, {anchors} anchors; signatures, packing, launch rules, "
          "bytes, report)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jitctl", help="the bundled jitctl (its wrapper)")
    ap.add_argument("--endpoint", help="the daemon, e.g. unix:/tmp/x/jitd.sock")
    ap.add_argument("--work", help="directory for the fetched cubins")
    ap.add_argument("--kernels", default=gc.DEFAULT_KERNELS, help="the kernels directory (kernels.toml's signatures)")
    ap.add_argument("--report", default="", help="write the markdown section here")
    ap.add_argument("--json", default="", help="write every figure and the method here")
    ap.add_argument("--budget-s", type=float, default=110.0, help="start no case after this many seconds")
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--inner", type=int, default=INNER)
    ap.add_argument("--only", action="append", default=[], help="only kernels whose name contains this (repeatable)")
    ap.add_argument("--max-mb", type=float, default=None, help="only cases moving at most this many MB")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--self-test-out", default="", help="with --self-test: also write its fake report and JSON here")
    ap.add_argument("--self-test", action="store_true", help="check this script without a GPU or torch")
    ap.add_argument("--dry-run", action="store_true", help="torch on the CPU, emulated kernels (no GPU, no CuPy)")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a)
    if a.list:
        for c in bench_cases():
            print(f"{'*' if c['anchor'] else ' '} {c['kernel']:32} {shape_label(c):44} {params_label(c):24} "
                  f"{bytes_moved(c) / 1e6:10.2f} MB")
        return 0
    if a.dry_run:
        a.reps = min(a.reps, 3)
        a.inner = min(a.inner, 2)
        if a.max_mb is None:
            a.max_mb = 40.0
    elif not (a.jitctl and a.endpoint and a.work):
        ap.error("--jitctl, --endpoint and --work are required (or --self-test, --list, --dry-run)")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
