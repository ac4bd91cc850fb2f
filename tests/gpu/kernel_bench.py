#!/usr/bin/env python3
"""Kernel benchmark on the GPU host (issue 17): each of jitd's seven kernels,
served by the daemon and launched through CuPy RawModule on torch tensors,
against a device-to-device copy of the same bytes, the run's peak copy and
eager PyTorch.

For each kernel and shape (bf16; the serving shapes of issue 17 marked
"anchor", decode sizes off the anchors marked "serving", small shapes, and
rmsnorm at dims 2048 to 32768 with every `threads` value):
  - the cubin's time: the median over 15 repetitions of CUDA events around
    20 back-to-back launches (one batch of 20 launches before, as warm-up),
    per launch, in µs; and the same 20 launches replayed from a CUDA graph
    (the GPU's time). Launch configs as docs/KERNELS.md says (element-wise:
    block 256, grid min(ceil(n/256), 132*16); rmsnorm: block = threads, grid
    = rows; align_block_size: the rule's block and grid; align_single_token:
    grid 1, block 32);
  - bytes moved: every tensor the semantics read once plus every tensor they
    write once (align_block_size: what it must write, up to its count);
    GB/s = bytes / time;
  - % of copy: the cubin's GB/s over that of torch `dst.copy_(src)` moving the
    same bytes (bytes/2 read + bytes/2 written), timed the same way in the
    same run; % of peak: over the run's peak copy GB/s (a 256 MiB copy, or
    any faster copy of at least 256 MB: smaller ones may come from L2);
  - eager PyTorch's time for the same operation, timed the same way, and the
    speedup eager µs / jitd µs;
  - a check that the cubin computed the right thing on these inputs (the
    promise of KERNELS.md: bit-exact, or within its ulps), so that no row
    times a launch that did nothing.
The launch floor (silu_and_mul at rows=0 returns at once; of the kernels it has
the fewest arguments, so the least for the host to pack) is timed as
the kernels are at several points of the run (the start, after the
element-wise kernels, before the MoE kernels, the end, and just before each
serving shape: the decode sizes, which the host's launch rate bounds as it
bounds the floor, and whose rate drifts through a run); its row is the
minimum of the samples, and the report lists any kernel row below it.
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

Prints one line per case as it is measured, then the markdown (also written
to --report; kernel_bench_report.py renders it), and writes every figure and
the method to --json.
Exits 0 when every case was measured and checked, 1 otherwise (2: usage).
"""
import argparse
import collections
import contextlib
import functools
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback

import gpu_common as gc
import kernel_bench_report as kr

REPS = 15
INNER = 20
EPS = 1e-6
SEED = 20261202
ALIGN_GRIDS_4096 = (1, 4, 8, 16, 64)
ALIGN_GRIDS_256 = (1, 4, 16)
DECODE = ((16, 4096), (1, 4096))  # rows x dim off the anchors
RMS_THREADS = (128, 256, 512, 1024)
PEAK_COPY_MIB = 256
# Where the floor is sampled besides the start and the end: before the first
# case of these kernels.
FLOOR_POINTS = (("after the element-wise kernels", ("norm.rmsnorm",)),
                ("before the MoE kernels", ("moe.align_single_token", "moe.align_block_size")))


# ---------------------------------------------------------------- the cases

def C(kernel, shape, params=None, anchor=False, note="", serving=False):
    return {"kernel": kernel, "params": dict(params or {}), "shape": dict(shape), "anchor": anchor,
            "serving": serving, "note": note}


def bench_cases():
    """Every case, in the order they run (the MoE alignment kernels last)."""
    bf16 = {"dtype": "bf16"}
    cases = [C(kr.FLOOR, {"rows": 0, "dim": 3072}, bf16,
               note="silu_and_mul with rows=0 returns without writing: the cost of one CuPy launch of the "
                    "kernel with the fewest arguments (4), the "
                    "minimum of its samples through the run; eager: a 1-element add_; copy: 2 bytes")]
    mod = "diffusion.modulate_scale_shift"
    cases += [C(mod, {"batch": 1, "seq": 4096, "dim": 3072}, bf16, anchor=True),
              C(mod, {"batch": 1, "seq": 4608, "dim": 3072}, bf16),
              C(mod, {"batch": 2, "seq": 1024, "dim": 3072}, bf16, serving=True),
              C(mod, {"batch": 1, "seq": 64, "dim": 3072}, bf16),
              C(mod, {"batch": 1, "seq": 16, "dim": 4096}, bf16, serving=True),
              C(mod, {"batch": 1, "seq": 1, "dim": 4096}, bf16, serving=True),
              C(mod, {"batch": 1, "seq": 17, "dim": 64}, bf16),
              C(mod, {"batch": 1, "seq": 4096, "dim": 3070}, bf16, note="dim not a multiple of 8: the scalar path")]
    res = "diffusion.residual_gate_add"
    for gate, shapes in (("full", [(4096, 3072), (64, 3072), (16, 3072), *DECODE, (17, 64)]),
                         ("broadcast", [(4096, 3072), (16, 3072)])):
        cases += [C(res, {"rows": r, "dim": d}, {"dtype": "bf16", "gate": gate}, anchor=(r, d) == (4096, 3072),
                    serving=gate == "full" and (r, d) in DECODE) for r, d in shapes]
    silu = "activation.silu_and_mul"
    cases += [C(silu, {"rows": 8192, "dim": 14336}, bf16, anchor=True,
                note="issue's 8192x14336 read as out [8192, 14336], in [8192, 28672] (see the notes)"),
              C(silu, {"rows": 8192, "dim": 7168}, bf16, note="the other reading: in [8192, 14336]"),
              C(silu, {"rows": 16, "dim": 14336}, bf16),
              C(silu, {"rows": 1, "dim": 14336}, bf16)]
    cases += [C(silu, {"rows": r, "dim": d}, bf16, serving=True) for r, d in DECODE]
    cases += [C(silu, {"rows": 17, "dim": 64}, bf16)]
    topk = "moe.topk_sum"
    cases += [C(topk, {"rows": 4096, "topk": 8, "dim": 4096}, bf16, anchor=True),
              C(topk, {"rows": 256, "topk": 8, "dim": 4096}, bf16)]
    cases += [C(topk, {"rows": r, "topk": 8, "dim": d}, bf16, serving=True) for r, d in DECODE]
    cases += [C(topk, {"rows": 17, "topk": 8, "dim": 64}, bf16)]
    return cases + rmsnorm_cases() + align_cases()


def rmsnorm_cases():
    """Every threads value at dims 2048-8192 (where the rule was fitted) and
    16384/32768 (its 512 and 1024 bands); the decode rows at the rule's
    threads and two others."""
    rms, cases = "norm.rmsnorm", []
    for rows, dims in ((8192, (2048, 4096, 8192)), (4096, (16384, 32768))):
        for dim in dims:
            cases += [C(rms, {"rows": rows, "dim": dim}, {"dtype": "bf16", "threads": str(t)}, anchor=(dim == 4096))
                      for t in RMS_THREADS]
    for rows, dim in DECODE:
        rule = gc.LAUNCH_RULES.rmsnorm_threads(dim)
        cases += [C(rms, {"rows": rows, "dim": dim}, {"dtype": "bf16", "threads": str(t)}, serving=(t == rule))
                  for t in sorted({rule, 256, 512})]
    return cases


def align_cases():
    single = "moe.align_single_token"
    cases = [C(single, {"topk": 8, "block_size": 64, "num_experts": 256}),
             C(single, {"topk": 32, "block_size": 64, "num_experts": 256})]
    align = "moe.align_block_size"
    routing = dict(kr.PEER_ALIGN_ROUTING)  # top-8, 256 experts, block 64
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
    # The block too: 1024 threads (what KERNELS.md first specified) and 512
    # against the rule's, at the rule's grid.
    cases += [C(align, {"tokens": t, **routing, "threads": n}, note="block chosen here, not by the rule")
              for t in (1, 256) for n in (512, 1024)]
    # The peer's largest size, last: a trap at a size new to this run ends
    # no case before it.
    return cases + [C(align, {"tokens": 16384, **routing})]


def floor_points(kernels, serving=()):
    """[(i, label)]: a floor sample before kernels[i]; i = len(kernels) is the
    end. serving[i] true: kernels[i] is a serving shape, sampled beside."""
    points = [(0, "start")]
    for label, first in FLOOR_POINTS:
        i = next((i for i, k in enumerate(kernels) if k in first), None)
        if i is not None and i not in dict(points):
            points.append((i, label))
    for i, beside in enumerate(serving):
        if beside and i not in dict(points):
            points.append((i, f"before {kernels[i].split('.')[-1]} (serving shape {i})"))
    return sorted(points) + [(len(kernels), "end")]


def shape_label(case):
    s, k = case["shape"], case["kernel"]
    if k in ("moe.align_block_size",):
        grid = f", grid {s['grid']}" if "grid" in s else ""
        grid += f", {s['threads']} threads" if "threads" in s else ""
        return f"{s['tokens']} tok x top-{s['topk']}, {s['num_experts']} exp, block {s['block_size']}{grid}"
    if k == "moe.align_single_token":
        return f"top-{s['topk']}, block {s['block_size']}"
    if k == "activation.silu_and_mul":
        return f"{s['rows']}x{s['dim']} (in {s['rows']}x{2 * s['dim']})"
    return "x".join(str(v) for v in s.values())


def params_label(case):
    return ", ".join(f"{k}={v}" for k, v in case["params"].items())


@functools.lru_cache(maxsize=None)
def routing_ids(tokens, topk, num_experts):
    """align_block_size's input: tokens x topk expert ids, uniform, fixed by
    SEED and the shape (pure Python: its count, so its bytes, are known
    before the run)."""
    rng = random.Random(f"{SEED}:{tokens}:{topk}:{num_experts}")
    return tuple(rng.randrange(num_experts) for _ in range(tokens * topk))


def align_count(shape):
    """num_tokens_post_pad for routing_ids: each expert's count rounded up to block_size."""
    bs = shape["block_size"]
    counts = collections.Counter(routing_ids(shape["tokens"], shape["topk"], shape["num_experts"]))
    return sum(-(-c // bs) * bs for e, c in counts.items() if 0 <= e < shape["num_experts"])


def bytes_moved(case):
    """Reads plus writes of the tensors, each once, per KERNELS.md's shapes."""
    s, k = case["shape"], case["kernel"]
    e = 2  # bf16
    if k == kr.FLOOR:
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
    if k == "moe.align_block_size":  # ids; sorted ids and expert ids up to the count; the count
        count = align_count(s)
        return 4 * (s["tokens"] * s["topk"] + count + count // s["block_size"] + 1)
    if k == "moe.align_single_token":
        return 4 * (s["topk"] + s["topk"] * s["block_size"] + s["topk"] + 1)
    raise ValueError(k)


# ---------------------------------------------------------------- building a case

class Inputs:
    """A case's tensors on the backend's device, from the run's generator."""

    def __init__(self, torch, gen, dev):
        self.torch, self.gen, self.dev = torch, gen, dev

    def randn(self, shape, scale=2.0):
        t = self.torch
        return (t.randn(shape, generator=self.gen, device=self.dev, dtype=t.float32) * scale).to(t.bfloat16)

    def full(self, shape, value, dtype=None):
        return self.torch.full(shape, value, dtype=dtype or self.torch.bfloat16, device=self.dev)

    @staticmethod
    def addr(*ts):
        return [t.data_ptr() for t in ts]


def build(case, backend, torch, gen):
    """(launch, eager, check, path, grid, block) for one case. `check` runs
    after the timing, on the output of the last launch."""
    import torch_refs as tr
    return BUILDERS[case["kernel"]](case, backend, Inputs(torch, gen, backend.device), tr)


def build_floor(case, backend, t, tr):
    s = case["shape"]
    x, out, one = t.full((8,), 0.0), t.full((8,), 7.0), t.full((1,), 0.0)
    grid, block = (1, 1, 1), (gc.ELEMENTWISE_BLOCK, 1, 1)
    values = {"out": out, "in": x, "rows": s["rows"], "dim": s["dim"]}
    launch = backend.launcher("activation.silu_and_mul", case["params"], grid, block, values)

    def check():
        ok = bool((out == 7.0).all().item())
        return ok, "untouched" if ok else "the kernel wrote at rows=0"
    return launch, lambda: one.add_(1), check, "-", grid, block


def build_modulate(case, backend, t, tr):
    b, l, d = (case["shape"][n] for n in ("batch", "seq", "dim"))
    x, scale, shift = t.randn((b, l, d)), t.randn((b, d)), t.randn((b, d))
    out = t.full((b, l, d), float("nan"))
    grid, block = gc.elementwise_launch(x.numel())
    launch = backend.launcher(case["kernel"], case["params"], grid, block,
                              {"out": out, "x": x, "scale": scale, "shift": shift, "batch": b, "seq": l, "dim": d})
    eager = lambda: tr.eager_modulate(x, scale, shift)  # noqa: E731
    return launch, eager, bit_check(tr, out, eager), gc.vector_path(2, d, t.addr(out, x, scale, shift)), grid, block


def build_residual(case, backend, t, tr):
    r, d = case["shape"]["rows"], case["shape"]["dim"]
    residual, update = t.randn((r, d)), t.randn((r, d))
    gate = t.randn((r, d)) if case["params"]["gate"] == "full" else t.randn((d,))
    out = t.full((r, d), float("nan"))
    grid, block = gc.elementwise_launch(residual.numel())
    launch = backend.launcher(case["kernel"], case["params"], grid, block, {
        "out": out, "residual": residual, "update": update, "gate": gate, "rows": r, "dim": d})
    eager = lambda: tr.eager_residual(residual, update, gate)  # noqa: E731
    return launch, eager, bit_check(tr, out, eager), gc.vector_path(2, d, t.addr(out, residual, update, gate)), \
        grid, block


def build_silu(case, backend, t, tr):
    r, d = case["shape"]["rows"], case["shape"]["dim"]
    inp, out = t.randn((r, 2 * d)), t.full((r, d), float("nan"))
    grid, block = gc.elementwise_launch(out.numel())
    launch = backend.launcher(case["kernel"], case["params"], grid, block, {"out": out, "in": inp, "rows": r, "dim": d})

    def check():
        worst, exact = tr.compare_bits(out, tr.ref_silu_and_mul(inp, d))
        return worst <= 1 and exact >= 0.999, f"max {worst} ulp, {100 * exact:.3f}% exact vs fp64 formula"
    return launch, (lambda: tr.eager_silu_and_mul(inp, d)), check, gc.vector_path(2, d, t.addr(out, inp)), grid, block


def build_topk(case, backend, t, tr):
    r, kk, d = (case["shape"][n] for n in ("rows", "topk", "dim"))
    inp, out = t.randn((r, kk, d)), t.full((r, d), float("nan"))
    grid, block = gc.elementwise_launch(out.numel())
    launch = backend.launcher(case["kernel"], case["params"], grid, block,
                              {"out": out, "in": inp, "rows": r, "topk": kk, "dim": d})
    return launch, (lambda: tr.eager_topk_sum(inp)), bit_check(tr, out, lambda: tr.ref_topk_sum(inp)), \
        gc.vector_path(2, d, t.addr(out, inp)), grid, block


def build_rmsnorm(case, backend, t, tr):
    r, d, threads = case["shape"]["rows"], case["shape"]["dim"], int(case["params"]["threads"])
    x, out = t.randn((r, d)), t.full((r, d), float("nan"))
    weight = (1 + t.torch.randn((d,), generator=t.gen, device=t.dev) * 0.25).to(t.torch.bfloat16)
    grid, block = (r, 1, 1), (threads, 1, 1)
    launch = backend.launcher(case["kernel"], case["params"], grid, block,
                              {"out": out, "x": x, "weight": weight, "rows": r, "dim": d, "eps": EPS})

    def check():
        worst = float(tr.ulps_from_f64(out, tr.ref_rmsnorm_f64(x, weight, EPS)).max().item())
        return worst <= 2.0, f"max {worst:.2f} ulp from fp64"
    return launch, (lambda: tr.eager_rmsnorm(x, weight, EPS)), check, gc.vector_path(2, d, t.addr(out, x, weight)), \
        grid, block


def build_align(case, backend, t, tr):
    s, i32 = case["shape"], t.torch.int32
    numel, E, bs = s["tokens"] * s["topk"], s["num_experts"], s["block_size"]
    ids = t.torch.tensor(routing_ids(s["tokens"], s["topk"], E), dtype=i32, device=t.dev)
    out = (t.full((gc.align_max_pad(numel, E, bs),), -7, i32), t.full((gc.align_expert_slots(numel, E, bs),), -7, i32),
           t.full((1,), -7, i32))
    grid, block = gc.align_block_size_launch(numel, E, s.get("grid"), s.get("threads"))
    launch = backend.launcher(case["kernel"], case["params"], grid, block, {
        "topk_ids": ids, "numel": numel, "num_experts": E, "block_size": bs, "sorted_token_ids": out[0],
        "expert_ids": out[1], "num_tokens_post_pad": out[2]})
    eager = lambda: tr.torch_align_block_size(ids, E, bs)  # noqa: E731
    return launch, eager, lambda: align_check(out, gc.ref_align_block_size(ids.tolist(), E, bs), eager(), bs), "-", \
        grid, block


def build_single(case, backend, t, tr):
    s, i32 = case["shape"], t.torch.int32
    topk, bs, E = s["topk"], s["block_size"], s["num_experts"]
    ids = t.torch.randperm(E, generator=t.gen, device=t.dev)[:topk].to(i32)
    out = (t.full((topk * bs,), -7, i32), t.full((topk,), -7, i32), t.full((1,), -7, i32))
    grid, block = gc.ALIGN_SINGLE_TOKEN_LAUNCH
    launch = backend.launcher(case["kernel"], case["params"], grid, block, {
        "topk_ids": ids, "topk": topk, "block_size": bs, "sorted_token_ids": out[0], "expert_ids": out[1],
        "num_tokens_post_pad": out[2]})
    eager = lambda: tr.torch_align_single_token(ids, bs)  # noqa: E731
    return launch, eager, lambda: align_check(out, gc.ref_align_single_token(ids.tolist(), bs), eager(), bs), "-", \
        grid, block


BUILDERS = {kr.FLOOR: build_floor, "diffusion.modulate_scale_shift": build_modulate,
            "diffusion.residual_gate_add": build_residual, "activation.silu_and_mul": build_silu,
            "moe.topk_sum": build_topk, "norm.rmsnorm": build_rmsnorm, "moe.align_block_size": build_align,
            "moe.align_single_token": build_single}


def bit_check(tr, out, want_fn):
    def check():
        worst, exact = tr.compare_bits(out, want_fn())
        return worst == 0, "bit-exact" if worst == 0 else f"max {worst} ulp, {100 * exact:.3f}% exact"
    return check


def align_check(got, want, eager_got, block_size):
    """The outputs where the kernel must write them (KERNELS.md): the count,
    sorted_token_ids below it and expert_ids below count / block_size, each
    equal to the reference `want`; nothing past the count is compared."""
    names = ("sorted_token_ids", "expert_ids", "num_tokens_post_pad")
    count = want[2]
    lengths = (count, count // block_size, 1)
    want = (list(want[0][:count]), list(want[1][:count // block_size]), [count])

    def differs(outs):
        return [n for n, g, w, m in zip(names, outs, want, lengths) if g[:m].tolist() != w]
    bad, eager_bad = differs(got), differs(eager_got)
    detail = f"equal below the count ({count})" if not bad else "differs: " + ", ".join(bad)
    if eager_bad:
        detail += f"; the torch implementation (eager) differs: {', '.join(eager_bad)}"
    return not bad, detail


# ---------------------------------------------------------------- measuring

class Terminated(Exception):
    pass


def copy_figures(backend, torch, copies, nbytes, reps, inner):
    """torch dst.copy_(src) moving nbytes (nbytes/2 read, nbytes/2 written),
    timed once per size per run (kept in `copies`)."""
    half = max(nbytes // 2, 1)
    if half not in copies:
        with backend.scope():
            src = torch.ones(half, dtype=torch.uint8, device=backend.device)
            dst = torch.empty_like(src)
            backend.sync_all()
            copies[half] = backend.time_us(lambda: dst.copy_(src), reps, inner)
            del src, dst
            backend.sync_all()
    us, runs = copies[half]
    return {"copy_bytes": 2 * half, "copy_us": us, "copy_runs": runs,
            "copy_gbps": 2 * half / us / 1e3 if us > 0 else None}


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
        # launch, without the host's launch rate (see the launch floor).
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
        backend.sync_all()
    row.update(copy_figures(backend, torch, copies, row["bytes"], reps, inner))
    if row["bytes"] > 0 and us > 0:
        row["gbps"] = row["bytes"] / us / 1e3
        row["pct_of_copy"] = 100.0 * row["gbps"] / row["copy_gbps"] if row["copy_gbps"] else None
    row["status"] = "measured"
    return row


def error_text(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"


class FloorProbe:
    """The empty launch, built once (its cubin fetched, loaded and launched
    before the first sample), then sampled as measure() times a kernel:
    back-to-back, graph and eager, each after its warm-up batch."""

    def __init__(self, case, backend, torch, gen, reps, inner):
        self.backend, self.reps, self.inner = backend, reps, inner
        with backend.scope():
            self.launch, self.eager, self.check, self.path, self.grid, self.block = build(case, backend, torch, gen)
            backend.sync_all()
            backend.time_us(self.launch, 1, inner)  # the run's first launches, untimed
            backend.sync_all()

    def sample(self, at, elapsed_s):
        s, b = {"at": at, "elapsed_s": round(elapsed_s, 3)}, self.backend
        try:
            with b.scope():
                b.sync_all()
                s["us"], s["us_runs"] = b.time_us(self.launch, self.reps, self.inner)
                s["graph_us"], s["graph_runs"] = b.graph_time_us(self.launch, self.reps, self.inner)
                ok, s["check"] = self.check()
                s["check_ok"] = bool(ok)
                s["eager_us"], _ = b.time_us(self.eager, self.reps, self.inner)
                b.sync_all()
        except Terminated:
            raise
        except Exception as e:  # noqa: BLE001 - a sample that fails is kept with its error
            s["error"] = error_text(e)
            with contextlib.suppress(Exception):
                b.sync_all()
        return s


def base_row(case):
    row = {"kernel": kr.short(case["kernel"]), "request": case["kernel"], "params": case["params"],
           "shape": case["shape"], "shape_label": shape_label(case), "anchor": case["anchor"],
           "serving": case["serving"], "note": case["note"], "bytes": bytes_moved(case),
           "eager_op": kr.EAGER_OPS[case["kernel"]], "check_rule": kr.CHECKS[case["kernel"]], "path": "-",
           "grid": None, "block": None, "us": None, "us_runs": [], "gbps": None, "copy_bytes": None, "copy_us": None,
           "copy_gbps": None, "copy_runs": [], "pct_of_copy": None, "pct_of_peak_copy": None, "eager_us": None,
           "eager_runs": [], "graph_us": None, "graph_runs": [], "speedup": None, "check_ok": None, "check": "",
           "error": "", "status": "not run"}
    if case["kernel"] == "moe.align_block_size":
        row["num_tokens_post_pad"] = align_count(case["shape"])
    return row


def method(peak_mib=PEAK_COPY_MIB):
    return {
        "timing": f"median of {REPS} repetitions; each: a CUDA event, {INNER} back-to-back launches, a CUDA event, "
                  f"elapsed / {INNER}; one batch of {INNER} launches before as warm-up; torch and CuPy on one stream",
        "graph": f"the cubin's {INNER} launches captured once in a CUDA graph; median of {REPS} replays between CUDA "
                 f"events, elapsed / {INNER}: the GPU's time per launch, free of the host's launch rate",
        "floor": "the empty launch (silu_and_mul, rows=0) timed as above, back-to-back and in a graph, at "
                 "the start, after the element-wise kernels, before the MoE kernels and at the end; the floor row "
                 "is the minimum of each figure over the samples",
        "bytes": "every tensor the semantics read, once, plus every tensor they write, once (bf16 2 B, int32 4 B); "
                 "align_block_size: ids read, then sorted ids and expert ids up to num_tokens_post_pad, and the count",
        "copy": "torch dst.copy_(src), uint8, src of bytes/2: bytes/2 read + bytes/2 written; same timing; "
                "% of copy = kernel GB/s / copy GB/s = copy µs / kernel µs",
        "peak copy": f"a {peak_mib} MiB copy (same method), or a row's copy of at least 256 MB that was faster "
                     "(smaller copies may come from L2 and do not count); % of peak = kernel GB/s / peak copy GB/s",
        "eager": "eager PyTorch, same timing, outputs allocated by torch's caching allocator (align kernels: a torch "
                 "reimplementation of the semantics in tests/gpu/torch_refs.py, not a peer kernel)",
        "speedup": "eager µs / jitd µs (above 1: the cubin is faster)",
        "launch": "element-wise: block 256, grid min(ceil(n/256), 132*16); rmsnorm: block threads, grid rows; "
                  "align_block_size: block jitd.align_block_size_threads(num_experts, numel), grid "
                  "jitd.align_block_size_grid(numel), unless the shape names them; "
                  "align_single_token: grid 1, block 32",
        "inputs": f"bf16 randn*2 (rmsnorm weight 1+0.25*randn, eps {EPS}), seed {SEED}; routing ids uniform "
                  "(align_block_size: Python's random, seeded by the seed and the shape)",
        "caveat": "a few-µs kernel is bounded by the host's launch rate (see the launch floor); L2 (50-60 MB on "
                  "the H100 and H200) holds the small shapes, so their GB/s can pass the DRAM copy's",
    }


# ---------------------------------------------------------------- running

def write_outputs(doc, a):
    kr.derive(doc)
    if a.json:
        gc.write_whole(a.json, json.dumps(doc, indent=1) + "\n")
    if a.report:
        gc.write_whole(a.report, kr.render(doc))


class Bench:
    """One run after its setup: the cases, the floor samples between them,
    the peak copy, every copy measured (by size), the document."""

    def __init__(self, a, doc, backend, torch, gen, t0):
        self.a, self.doc, self.backend, self.torch, self.gen, self.t0 = a, doc, backend, torch, gen, t0
        self.copies, self.probe = {}, None
        self.floor = next((r for r in doc["rows"] if r["request"] == kr.FLOOR), None)

    def elapsed(self):
        return time.monotonic() - self.t0

    def record(self, line, item):
        """Writes the document (its whole-run figures derived), then prints line(item)."""
        self.doc["elapsed_s"] = self.elapsed()
        write_outputs(self.doc, self.a)
        print(line(item), flush=True)

    def floor_sample(self, at, case):
        """One floor sample (the probe built at the first)."""
        if self.floor is None or self.floor["error"]:
            return
        if self.probe is None:
            try:
                self.probe = FloorProbe(case, self.backend, self.torch, self.gen, self.a.reps, self.a.inner)
                self.floor.update(path=self.probe.path, grid=list(self.probe.grid), block=list(self.probe.block))
                self.floor.update(copy_figures(self.backend, self.torch, self.copies, 0, self.a.reps, self.a.inner))
            except Terminated:
                raise
            except Exception as e:  # noqa: BLE001 - no floor; the kernels still run
                self.floor.update(status="error", error=error_text(e), traceback=traceback.format_exc()[-2000:])
                self.record(kr.one_line, self.floor)
                return
        sample = self.probe.sample(at, self.elapsed())
        self.doc["floor_samples"].append(sample)
        self.record(kr.floor_sample_line, sample)

    def peak_copy(self):
        src = self.a.peak_copy_mib * 2**20
        try:
            figures = copy_figures(self.backend, self.torch, self.copies, 2 * src, self.a.reps, self.a.inner)
            self.doc["peak_copy"] = {"src_bytes": src, "bytes": figures["copy_bytes"], "us": figures["copy_us"],
                                     "runs": figures["copy_runs"], "gbps": figures["copy_gbps"]}
        except Terminated:
            raise
        except Exception as e:  # noqa: BLE001 - the peak falls back to the rows' copies
            self.doc["peak_copy"] = {"src_bytes": src, "error": error_text(e)}
            with contextlib.suppress(Exception):
                self.backend.sync_all()
        self.record(lambda big: f"peak copy: {src / 2**20:.0f} MiB, " + (
            f"{big['us']:.2f} µs, {big['gbps']:.0f} GB/s" if "gbps" in big else big["error"]), self.doc["peak_copy"])

    def case(self, i, case):
        if self.elapsed() > self.a.budget_s:
            self.doc["rows"][i]["status"] = f"not run (the {self.a.budget_s:.0f} s budget was spent)"
            print(kr.one_line(self.doc["rows"][i]), flush=True)
            return
        try:
            row = measure(case, self.backend, self.torch, self.gen, self.copies, self.a.reps, self.a.inner)
        except Terminated:
            raise
        except Exception as e:  # noqa: BLE001 - one case's failure must not stop the rest
            row = base_row(case)
            row.update(status="error", error=error_text(e), traceback=traceback.format_exc()[-2000:])
            with contextlib.suppress(Exception):
                self.backend.sync_all()
        self.doc["rows"][i] = row
        self.record(kr.one_line, row)

    def all_cases(self, cases):
        """The kernels in order; the floor sampled at floor_points; the peak copy after the first sample."""
        floor_case = next((c for c in cases if c["kernel"] == kr.FLOOR), None)
        order = [i for i, c in enumerate(cases) if c["kernel"] != kr.FLOOR]
        points = floor_points([cases[i]["kernel"] for i in order], [cases[i]["serving"] for i in order])
        for j, i in enumerate(order + [None]):
            for _, label in (p for p in points if p[0] == j):
                self.floor_sample(label, floor_case)
            if j == 0:
                self.peak_copy()
            if i is not None:
                self.case(i, cases[i])


def start(a, doc, cases):
    """(backend, torch, gen), or None after writing why there is none."""
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
        return None
    try:
        doc["device"] = backend.describe()
    except Exception as e:  # noqa: BLE001 - fail soft: the description is not the benchmark
        doc["device"] = {"error": f"{type(e).__name__}: {e}"}
    return backend, torch, gen


def run(a):
    cases = [c for c in bench_cases() if not a.only or any(s in c["kernel"] for s in a.only)]
    if a.max_mb is not None:
        cases = [c for c in cases if bytes_moved(c) <= a.max_mb * 1e6]
    t0 = time.monotonic()
    doc = {"method": method(a.peak_copy_mib), "backend": "dry-run" if a.dry_run else "cuda", "device": {},
           "reps": a.reps, "inner": a.inner, "rows": [base_row(c) for c in cases], "floor_samples": [],
           "peak_copy": None, "finished": False, "elapsed_s": 0.0}
    setup = start(a, doc, cases)
    if setup is None:
        return 1
    bench = Bench(a, doc, *setup, t0)

    def on_term(signum, _frame):
        raise Terminated(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    terminated = False
    try:
        bench.all_cases(cases)
        doc["finished"] = True
    except Terminated as e:
        terminated = True
        for r in doc["rows"]:
            if r["status"] == "not run":
                r["status"] = f"not run (terminated: {e})"
        print(f"kernel_bench: terminated ({e}); writing what was measured", flush=True)
    finally:
        doc["elapsed_s"] = time.monotonic() - t0
        write_outputs(doc, a)
    print()
    print(kr.render(doc))
    measured = [r for r in doc["rows"] if r["status"] == "measured"]
    passed = sum(1 for r in measured if r["check_ok"])
    failed = len(doc["rows"]) - passed + terminated
    print(f"kernel_bench: {passed} passed, {failed} failed ({len(measured)} of {len(doc['rows'])} cases measured)")
    return 1 if failed else 0


# ---------------------------------------------------------------- self-test (no GPU, no torch)

def self_test_units(a, expect):
    """Signatures, packing and launch rules."""
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
            expect(False, f"pack accepted {bad}")
        except ValueError:
            pass
    expect(gc.elementwise_launch(4096 * 3072) == ((2112, 1, 1), (256, 1, 1)), "elementwise grid cap")
    expect(gc.elementwise_launch(17 * 64) == ((5, 1, 1), (256, 1, 1)), "elementwise small grid")
    expect(gc.elementwise_launch(0)[0] == (1, 1, 1), "elementwise grid >= 1")
    expect(gc.vector_path(2, 3072, [0, 256, 512]) == "vector", "vector path")
    expect(gc.vector_path(2, 3070, [0, 256]) == "scalar", "scalar path: dim")
    expect(gc.vector_path(2, 3072, [0, 258]) == "scalar", "scalar path: pointer")


class FakeOut(list):
    """A list that slices to itself and has tolist(): stands in for a tensor in align_check."""

    def __getitem__(self, i):
        got = list.__getitem__(self, i)
        return FakeOut(got) if isinstance(i, slice) else got

    def tolist(self):
        return list(self)


def self_test_cases(expect, cases):
    """The cases, their bytes, the floor points and the align check's contract."""
    by = {(c["kernel"], tuple(c["shape"].values()), tuple(c["params"].values())): c for c in cases}
    expect(len(by) == len(cases), "no case twice")
    expect(bytes_moved(by[("activation.silu_and_mul", (8192, 14336), ("bf16",))]) == 704643072, "silu bytes")
    expect(bytes_moved(by[("diffusion.modulate_scale_shift", (1, 4096, 3072), ("bf16",))])
           == 2 * (2 * 4096 * 3072 + 2 * 3072), "modulate bytes")
    expect(bytes_moved(by[("diffusion.residual_gate_add", (4096, 3072), ("bf16", "full"))]) == 8 * 4096 * 3072,
           "residual full bytes")
    expect(bytes_moved(by[("diffusion.residual_gate_add", (4096, 3072), ("bf16", "broadcast"))])
           == 2 * (3 * 4096 * 3072 + 3072), "residual broadcast bytes")
    expect(bytes_moved(by[("moe.topk_sum", (4096, 8, 4096), ("bf16",))]) == 2 * 9 * 4096 * 4096, "topk bytes")
    expect(bytes_moved(by[("norm.rmsnorm", (8192, 4096), ("bf16", "256"))]) == 2 * (2 * 8192 * 4096 + 4096),
           "rmsnorm bytes")
    for tokens in (1, 16, 256, 4096, 16384):
        shape = {"tokens": tokens, **kr.PEER_ALIGN_ROUTING}
        ids = routing_ids(tokens, 8, 256)
        count = gc.ref_align_block_size(ids, 256, 64)[2]
        expect(align_count(shape) == count and count % 64 == 0 and 8 * tokens <= count, f"align count {tokens}")
        expect(bytes_moved(by[("moe.align_block_size", tuple(shape.values()), ())])
               == 4 * (8 * tokens + count + count // 64 + 1), f"align bytes at {tokens} tokens (up to the count)")
    expect(routing_ids(4096, 8, 256) == routing_ids.__wrapped__(4096, 8, 256), "routing ids fixed by the seed")
    rms = [(c["shape"]["rows"], c["shape"]["dim"], c["params"]["threads"])
           for c in cases if c["kernel"] == "norm.rmsnorm"]
    expect(all((n, d, str(t)) in rms for n, ds in ((8192, (2048, 4096, 8192)), (4096, (16384, 32768)))
               for d in ds for t in RMS_THREADS), "rmsnorm: 5 dims x 4 threads")
    served = {(kr.short(c["kernel"]), tuple(c["shape"].values())) for c in cases if c["serving"]}
    want = {(k, (r, *([8] if k == "topk_sum" else []), d)) for k in ("residual_gate_add", "silu_and_mul", "topk_sum",
                                                                       "rmsnorm") for r, d in DECODE}
    want |= {("modulate_scale_shift", s) for s in ((1, 1, 4096), (1, 16, 4096), (2, 1024, 3072))}
    expect(served == want, f"serving shapes: {sorted(served ^ want)}")
    rule = str(gc.LAUNCH_RULES.rmsnorm_threads(4096))
    expect(all(c["params"].get("threads", rule) == rule for c in cases if c["serving"]), "rmsnorm at the rule")
    order = [c["kernel"] for c in cases]
    expect(order[0] == kr.FLOOR and order.index("moe.align_single_token") > order.index("norm.rmsnorm")
           and order[-1] == "moe.align_block_size", "the floor first, the MoE alignment kernels last")
    points = floor_points(order[1:])
    expect([p[1] for p in points] == ["start", "after the element-wise kernels", "before the MoE kernels", "end"]
           and order[1:][points[1][0]] == "norm.rmsnorm" and points[-1][0] == len(order) - 1, f"points {points}")
    serving = [c["serving"] for c in cases[1:]]
    beside = floor_points(order[1:], serving)
    expect({i for i, s in enumerate(serving) if s} <= {i for i, _ in beside}
           and set(points) <= set(beside) and len(beside) == len(points) + sum(serving)
           and len({label for _, label in beside}) == len(beside), f"points beside the serving shapes: {beside}")
    expect([p[1] for p in floor_points(["moe.align_block_size"])] == ["start", "end"], "points: one MoE case")
    want = ([3, 0, 1, 9, 9, 9], [5, 7, -1], 4)  # count 4, block 2: 4 sorted ids and 2 expert ids
    good = (FakeOut([3, 0, 1, 9, -7, -7]), FakeOut([5, 7, -7]), FakeOut([4]))
    expect(align_check(good, want, good, 2) == (True, "equal below the count (4)"), "align: past the count ignored")
    bad = (FakeOut([3, 0, 9, 1, 9, 9]), FakeOut([5, 7, -1]), FakeOut([4]))
    expect(not align_check(bad, want, good, 2)[0], "align: strict below the count")
    expect(not align_check((good[0], good[1], FakeOut([6])), want, good, 2)[0], "align: the count itself")


def fake_doc(cases):
    """A document from fake figures: every case measured but one error, one
    not run and one bad check; four floor samples; a peak copy."""
    rows = []
    for i, c in enumerate(cases):
        r = base_row(c)
        if i == 3:
            r.update(status="error", error="CUDARuntimeError: cudaErrorIllegalAddress")
        elif i == 4:
            r.update(status="not run (the 110 s budget was spent)")
        elif i > 0:
            us = 10.0 + i
            copy = 0.8 * us
            r.update(status="measured", path="vector", grid=[1, 1, 1], block=[256, 1, 1], us=us, us_runs=[us] * 15,
                     graph_us=us - 2, copy_bytes=max(r["bytes"] // 2, 1) * 2, copy_us=copy,
                     copy_gbps=r["bytes"] / copy / 1e3, eager_us=2 * us, speedup=2.0, check_ok=i != 5,
                     check="bit-exact" if i != 5 else "max 3 ulp")
            if r["bytes"]:
                r.update(gbps=r["bytes"] / us / 1e3, pct_of_copy=80.0)
        rows.append(r)
    samples = [{"at": at, "elapsed_s": 0.1 * n, "us": us, "us_runs": [us] * 15, "graph_us": g, "graph_runs": [g] * 15,
                "check_ok": True, "check": "untouched", "eager_us": 9.0}
               for n, (at, us, g) in enumerate((("start", 10.7, 1.2), ("after the element-wise kernels", 6.1, 0.8),
                                                ("before the MoE kernels", 6.3, 0.9)))]
    samples.append({"at": "end", "elapsed_s": 1.0, "error": "CUDARuntimeError: cudaErrorLaunchFailure"})
    return {"method": method(), "backend": "self-test", "device": {"gpu": "fake"}, "reps": REPS, "inner": INNER,
            "rows": rows, "floor_samples": samples, "finished": True, "elapsed_s": 1.0,
            "peak_copy": {"src_bytes": 2**28, "bytes": 2**29, "us": 160.0, "runs": [160.0], "gbps": 2**29 / 160e3}}


def table_rows(md, heading):
    """The data rows of the first table under `heading`."""
    lines = md.splitlines()
    rows = []
    for line in lines[lines.index(heading) + 1:] if heading in lines else []:
        if line.startswith("### "):
            break
        if line.startswith("| "):
            rows.append(line)
    return rows[1:]


def self_test_report(a, expect, cases):
    doc = fake_doc(cases)
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(json=os.path.join(tmp, "b.json"), report=os.path.join(tmp, "b.md"))
        write_outputs(doc, ns)
        back = json.load(open(ns.json))
        md = open(ns.report).read()
    expect(len(back["rows"]) == len(cases), "JSON rows")
    floor = back["rows"][0]
    expect(floor["us"] == 6.1 and floor["graph_us"] == 0.8 and floor["floor_at"] == "after the element-wise kernels"
           and floor["check_ok"] and "1 of 4" not in floor["check"] and "end: CUDARuntimeError" in floor["check"],
           f"the floor row is the minimum of the samples: {floor}")
    expect(back["floor"]["below"] == [] and "no kernel row is below the floor" in md, "floor self-check: none below")
    peak = max([2**29 / 160e3] + [r["copy_gbps"] for r in back["rows"]
                                  if r["copy_gbps"] and r["copy_bytes"] >= kr.DRAM_COPY_BYTES])
    expect(back["peak_copy_gbps"] == peak and all(
        r["pct_of_peak_copy"] is None or abs(r["pct_of_peak_copy"] - 100 * r["gbps"] / peak) < 1e-9
        for r in back["rows"]), "peak copy and % of peak")
    anchors = sum(1 for c in cases if c["anchor"])
    every, anchored = table_rows(md, "### Every case"), table_rows(md, "### The reference shapes of issue 17 (⚓)")
    expect(len(every) == len(cases) and len(anchored) == anchors, f"markdown rows: {len(every)}, {len(anchored)}")
    expect(all(line.count(" | ") == 14 for line in every + anchored), "15 cells in every row")
    expect(len(table_rows(md, "### Serving shapes off the anchors")) == sum(1 for c in cases if c["serving"]),
           "the serving-shape rows")
    rule = table_rows(md, "### rmsnorm thread rule")
    expect(len(rule) == 7 and any(line.startswith("| 4096x32768 |") for line in rule), f"rmsnorm rule rows: {rule}")
    target = table_rows(md, "### align_block_size against SGLang's kernel (target)")
    expect(len(target) == 5 and "| 43.44 |" in target[-1] and "was not run here" in md, f"align target: {target}")
    expect("**CUDARuntimeError" in md and "**BAD: max 3 ulp**" in md and "not run (the 110 s budget" in md,
           "errors, bad checks and skipped cases show")
    expect("of this run's copy" in md and "704.6 MB" in md, "the silu reading note")
    for r in back["rows"]:
        kr.one_line(r)
    for s in doc["floor_samples"]:
        kr.floor_sample_line(s)
    reading = kr.silu_reading(back["rows"])
    expect(len(reading) == 2 and abs(reading[0]["gbps_at_239us"] - 2948.3) < 1, f"silu reading: {reading}")
    doc["rows"][7].update(us=5.0, graph_us=0.5)
    md = kr.render(doc)
    expect(len(doc["floor"]["below"]) == 1 and "1 kernel rows below the floor" in md, "floor self-check: one below")
    if a.self_test_out:  # fake inputs for check_report.sh's write_report.py test
        write_outputs(fake_doc(cases), argparse.Namespace(
            json=os.path.join(a.self_test_out, "kernel_bench.json"),
            report=os.path.join(a.self_test_out, "kernel_bench.md")))
    return anchors


def self_test(a):
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)

    cases = bench_cases()
    self_test_units(a, expect)
    self_test_cases(expect, cases)
    anchors = self_test_report(a, expect, cases)
    if problems:
        for p in problems:
            print("self-test: FAILED:", p)
        return 1
    print(f"kernel_bench self-test: ok ({len(cases)} cases, {anchors} anchors; signatures, packing, launch rules, "
          "bytes, floor points, align check, report)")
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
    ap.add_argument("--peak-copy-mib", type=int, default=None,
                    help=f"the peak copy's source, MiB ({PEAK_COPY_MIB}; 16 with --dry-run)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--self-test-out", default="", help="with --self-test: also write its fake report and JSON here")
    ap.add_argument("--self-test", action="store_true", help="check this script without a GPU or torch")
    ap.add_argument("--dry-run", action="store_true", help="torch on the CPU, emulated kernels (no GPU, no CuPy)")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a)
    if a.list:
        for c in bench_cases():
            mark = "*" if c["anchor"] else "s" if c["serving"] else " "
            print(f"{mark} {c['kernel']:32} {shape_label(c):44} {params_label(c):24} {bytes_moved(c) / 1e6:10.2f} MB")
        return 0
    if a.peak_copy_mib is None:
        a.peak_copy_mib = 16 if a.dry_run else PEAK_COPY_MIB
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
