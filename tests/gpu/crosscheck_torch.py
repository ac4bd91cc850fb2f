#!/usr/bin/env python3
"""All seven kernels on the GPU against three kinds of reference (issue 17, item
4; GPU host only).

The cubins jitd serves (`jitctl --json get -o FILE`) are loaded once each with
CuPy RawModule and launched by their lowered name on torch tensors, then held
to what docs/KERNELS.md promises. Each case is tagged with the kind of its
reference (REFERENCES), and the summary line counts the cases by tag:
  eager      eager PyTorch ops (the two diffusion kernels);
  formula    jitd's own formulas of KERNELS.md, written in tests/gpu/torch_refs.py
             and evaluated in torch (topk_sum, silu_and_mul, rmsnorm);
  semantics  a pure-Python reference of the MoE alignment semantics
             (gpu_common.ref_align_*: the two align kernels).
  modulate_scale_shift, residual_gate_add  bit-exact with eager PyTorch
                                           (`x * (1 + scale[:, None]) + shift[:, None]`,
                                           `residual + update * gate`), bf16 and fp16
  topk_sum       bit-exact with the fp32 sum in k order (j = 0..topk-1, from
                 in[:, 0] itself, rounded once); eager `in.sum(dim=1)` shown, not held
  silu_and_mul   within 1 ulp and >= 99.9% bit-exact of R(R(s(a)) * b), s in fp64
                 rounded to fp32 (KERNELS.md: "the tests' bound"); eager
                 `F.silu(a) * b` shown (max ulps, exact fraction), not held
  rmsnorm        within 2 ulp (bf16, fp16) / 16 ulp (fp32) of a float64 torch
                 reference; eager `F.rms_norm` shown (max ulps, exact fraction)
  align_block_size    every output equal to the semantics (a pure-Python
                      reference); the torch implementation kernel_bench.py
                      times as "eager" checked against it too (shown)
  align_single_token  equal to the semantics and to align_block_size's output
                      (this cubin, on the GPU) cut to topk*block and topk entries
Inputs: randn*2 with ±0 and the smallest subnormal mixed in; every finite bf16
and fp16 value for silu_and_mul; element-wise kernels also with every array
one element off 16-byte alignment (the scalar path). Fail-soft: an error is a
failed case and the rest run; the MoE alignment kernels run last (a trap is a
sticky CUDA error). crosscheck.py (diffusion, the C++ client's dumps) stays.

    python3 tests/gpu/crosscheck_torch.py --jitctl PATH --endpoint unix:SOCK --work DIR \\
        [--report FILE.md] [--json FILE.json]
    python3 tests/gpu/crosscheck_torch.py --self-test   # no GPU (torch optional)
    python3 tests/gpu/crosscheck_torch.py --dry-run     # torch on the CPU, emulated kernels

Prints one line per case and a summary line, e.g. `crosscheck_torch: 222 of 222
cross-checks passed: 30 against eager PyTorch ops, 102 against jitd's formulas
evaluated in torch, 90 against a Python reference of the MoE semantics`;
writes a summary table (and every case) to --report and every figure to --json.
Exits 1 when a case fails what KERNELS.md promises (or errors), else 0.
"""
import argparse
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback

import gpu_common as gc

SEED = 20261203
RMS_ULPS = {"bf16": 2.0, "fp16": 2.0, "fp32": 16.0}
ALIGN_OTHER_GRIDS = (1, 7, 64)  # besides the rule's grid: one block, an odd count, the most allowed
ALIGN_OTHER_THREADS = (1024, 512, 32)  # besides the rule's block: 1024, 512, the fewest that hold the experts
SILU_MAX_ULPS, SILU_MIN_EXACT = 1, 0.999
DIFFUSION_SHAPES = [(1, 4096, 3072), (1, 512, 3072), (2, 1024, 3072), (1, 17, 64)]
# The kind of reference a case is held to (its row's "reference" tag): the
# words of the summary line, and the table's short label. A row without a
# tag (a part that broke before its cases) counts as "none".
REFERENCES = {
    "eager": ("against eager PyTorch ops", "eager PyTorch op"),
    "formula": ("against jitd's formulas evaluated in torch", "jitd's formula in torch"),
    "semantics": ("against a Python reference of the MoE semantics", "Python MoE semantics"),
}


class Terminated(Exception):
    pass


class Checker:
    """Runs the cases, one line each, and keeps every figure."""

    def __init__(self, backend, torch, a):
        import torch_refs
        self.b, self.torch, self.tr, self.a = backend, torch, torch_refs, a
        self.dev = backend.device
        self.gen = torch.Generator(device=self.dev).manual_seed(SEED)
        self.rows = []
        self.t0 = time.monotonic()

    # -- inputs
    def tensor(self, shape, dtype, misalign=False, scale=2.0, specials=True):
        torch = self.torch
        n = 1
        for s in shape:
            n *= s
        src = torch.randn((n,), generator=self.gen, device=self.dev, dtype=torch.float32) * scale
        src = src.to(dtype)
        if specials and n:
            self.sprinkle(src)
        if not misalign:
            return src.view(shape).clone()
        buf = torch.empty((n + 1,), dtype=dtype, device=self.dev)
        t = buf[1:].view(shape)
        t.copy_(src.view(shape))
        return t

    def sprinkle(self, flat):
        """±0 and ± the smallest subnormal at every 97th element."""
        torch = self.torch
        if flat.dtype == torch.float32:
            bits = torch.tensor([0, -2**31, 1, -2**31 + 1], dtype=torch.int32)
        else:
            bits = torch.tensor([0, -2**15, 1, -2**15 + 1], dtype=torch.int16)
        specials = bits.view(flat.dtype).to(self.dev)
        idx = torch.arange(0, flat.numel(), 97, device=self.dev)
        flat[idx] = specials[torch.arange(idx.numel(), device=self.dev) % 4]

    def output(self, shape, dtype, misalign=False):
        torch = self.torch
        n = 1
        for s in shape:
            n *= s
        buf = torch.full((n + (1 if misalign else 0),), float("nan"), dtype=dtype, device=self.dev)
        return (buf[1:] if misalign else buf).view(shape)

    # -- bookkeeping
    def case(self, kernel, dtype, shape, params, rule, reference, fn):
        """One case held to `rule`; `reference` (a REFERENCES key) is the kind
        of reference `fn` compares with, tagged on the row before it runs so
        that a case that errors still counts under its kind."""
        if reference not in REFERENCES:
            raise ValueError(f"{kernel}: unknown reference kind {reference!r}")
        row = {"kernel": kernel.split(".")[-1], "request": kernel, "dtype": dtype, "shape": shape,
               "params": params, "rule": rule, "reference": reference, "path": "-", "ok": False, "max_ulps": None,
               "exact_fraction": None, "eager_max_ulps": None, "eager_exact_fraction": None, "detail": "", "error": ""}
        try:
            with self.b.scope():  # inputs, launch and references in order on one stream
                fn(row)
                self.b.sync_all()
        except Terminated:
            raise
        except Exception as e:  # noqa: BLE001 - one case's failure must not stop the rest
            row["ok"] = False
            row["error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
            row["traceback"] = traceback.format_exc()[-2000:]
            with contextlib.suppress(Exception):
                self.b.sync_all()
        self.rows.append(row)
        print(line(row), flush=True)
        write_outputs(self.doc(False), self.a)

    def doc(self, finished):
        return {"backend": self.b.name, "rows": self.rows, "finished": finished,
                "elapsed_s": time.monotonic() - self.t0,
                "summary": summarize(self.rows)}

    def launch(self, kernel, params, grid, block, values):
        self.b.launcher(kernel, params, grid, block, values)()

    # -- the kernels
    def too_big(self, *dims):
        """--dry-run (the CPU) skips the serving shapes."""
        n = 1
        for d in dims:
            n *= d
        return self.a.dry_run and n > 2**22

    def diffusion(self):
        tr = self.tr
        for dname in ("bf16", "fp16"):
            dt = tr.DTYPES[dname]
            for shape in DIFFUSION_SHAPES + [(1, 512, 3072, "misaligned")]:
                b, l, d = shape[:3]
                mis = len(shape) > 3
                if self.too_big(b, l, d):
                    continue

                def mod(row, b=b, l=l, d=d, mis=mis, dt=dt):
                    x, scale, shift = (self.tensor((b, l, d), dt, mis), self.tensor((b, d), dt, mis),
                                       self.tensor((b, d), dt, mis))
                    out = self.output((b, l, d), dt, mis)
                    row["path"] = gc.vector_path(x.element_size(), d, [t.data_ptr() for t in (out, x, scale, shift)])
                    grid, block = gc.elementwise_launch(out.numel())
                    self.launch("diffusion.modulate_scale_shift", {"dtype": row["dtype"]}, grid, block,
                                {"out": out, "x": x, "scale": scale, "shift": shift, "batch": b, "seq": l, "dim": d})
                    exact_vs(row, tr, out, tr.eager_modulate(x, scale, shift))
                self.case("diffusion.modulate_scale_shift", dname, f"{b}x{l}x{d}" + (" +1 elem" if mis else ""),
                          {}, "bit-exact with eager", "eager", mod)
            for gate in ("full", "broadcast"):
                for shape in DIFFUSION_SHAPES + [(1, 512, 3072, "misaligned")]:
                    rows, d = shape[0] * shape[1], shape[2]
                    mis = len(shape) > 3
                    if self.too_big(rows, d):
                        continue

                    def res(row, rows=rows, d=d, mis=mis, dt=dt, gate=gate):
                        r, u = self.tensor((rows, d), dt, mis), self.tensor((rows, d), dt, mis)
                        g = self.tensor((rows, d) if gate == "full" else (d,), dt, mis)
                        out = self.output((rows, d), dt, mis)
                        row["path"] = gc.vector_path(r.element_size(), d, [t.data_ptr() for t in (out, r, u, g)])
                        grid, block = gc.elementwise_launch(out.numel())
                        self.launch("diffusion.residual_gate_add", {"dtype": row["dtype"], "gate": gate}, grid, block,
                                    {"out": out, "residual": r, "update": u, "gate": g, "rows": rows, "dim": d})
                        exact_vs(row, tr, out, tr.eager_residual(r, u, g))
                    self.case("diffusion.residual_gate_add", dname, f"{rows}x{d}" + (" +1 elem" if mis else ""),
                              {"gate": gate}, "bit-exact with eager", "eager", res)

    def topk_sum(self):
        tr = self.tr
        shapes = [(4096, 8, 4096), (16, 8, 4096), (7, 2, 3072), (1, 1, 64), (33, 32, 130), (5, 3, 7),
                  (64, 8, 4096, "misaligned")]
        for dname in ("bf16", "fp16", "fp32"):
            dt = tr.DTYPES[dname]
            for shape in shapes:
                rows, k, d = shape[:3]
                mis = len(shape) > 3
                if (dname == "fp32" and rows * k * d > 2**26) or self.too_big(rows, k, d):
                    continue

                def fn(row, rows=rows, k=k, d=d, mis=mis, dt=dt):
                    inp = self.tensor((rows, k, d), dt, mis)
                    out = self.output((rows, d), dt, mis)
                    row["path"] = gc.vector_path(inp.element_size(), d, [out.data_ptr(), inp.data_ptr()])
                    grid, block = gc.elementwise_launch(out.numel())
                    self.launch("moe.topk_sum", {"dtype": row["dtype"]}, grid, block,
                                {"out": out, "in": inp, "rows": rows, "topk": k, "dim": d})
                    exact_vs(row, tr, out, tr.ref_topk_sum(inp))
                    eager_vs(row, tr, out, tr.eager_topk_sum(inp))
                self.case("moe.topk_sum", dname, f"{rows}x{k}x{d}" + (" +1 elem" if mis else ""), {},
                          "bit-exact with the fp32 sum in k order", "formula", fn)

    def silu_and_mul(self):
        torch, tr = self.torch, self.tr
        shapes = [(8192, 14336), (64, 4096), (16, 3072), (7, 130), (3, 7), (64, 4096, "misaligned")]
        rule = f"<= {SILU_MAX_ULPS} ulp and >= {100 * SILU_MIN_EXACT:.1f}% bit-exact vs the fp64 formula"
        for dname in ("bf16", "fp16", "fp32"):
            dt = tr.DTYPES[dname]
            cases = [s for s in shapes if (s[0] != 8192 or dname == "bf16") and not self.too_big(s[0], 2 * s[1])]
            if dname != "fp32":
                cases.append("every finite input")
            for shape in cases:
                def fn(row, shape=shape, dt=dt):
                    if shape == "every finite input":
                        bits = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16)
                        a = bits.view(dt).to(self.dev)
                        a = a[torch.isfinite(a)]
                        d = a.numel() - a.numel() % 8
                        a = a[:d]
                        inp = torch.cat([a, self.tensor((d,), dt, specials=False)]).view(1, 2 * d)
                        rows, mis = 1, False
                    else:
                        rows, d = shape[:2]
                        mis = len(shape) > 2
                        inp = self.tensor((rows, 2 * d), dt, mis)
                    out = self.output((rows, d), dt, mis)
                    row["path"] = gc.vector_path(inp.element_size(), d, [out.data_ptr(), inp.data_ptr()])
                    grid, block = gc.elementwise_launch(out.numel())
                    self.launch("activation.silu_and_mul", {"dtype": row["dtype"]}, grid, block,
                                {"out": out, "in": inp, "rows": rows, "dim": d})
                    worst, exact = tr.compare_bits(out, tr.ref_silu_and_mul(inp, d))
                    row.update(max_ulps=worst, exact_fraction=exact,
                               ok=worst <= SILU_MAX_ULPS and exact >= SILU_MIN_EXACT)
                    eager_vs(row, tr, out, tr.eager_silu_and_mul(inp, d))
                label = shape if isinstance(shape, str) else f"{shape[0]}x{shape[1]} (in {shape[0]}x{2 * shape[1]})" \
                    + (" +1 elem" if len(shape) > 2 else "")
                self.case("activation.silu_and_mul", dname, label, {}, rule, "formula", fn)

    def rmsnorm(self):
        tr = self.tr
        shapes = [(8192, 4096), (33, 8192), (64, 5120), (7, 3072), (513, 127), (64, 4096, "misaligned")]
        eps = 1e-6
        for dname in ("bf16", "fp16", "fp32"):
            dt = tr.DTYPES[dname]
            for threads in (128, 256, 512, 1024):
                for shape in shapes:
                    if (shape[0] == 8192 and dname != "bf16") or self.too_big(*shape[:2]):
                        continue

                    def fn(row, shape=shape, dt=dt, threads=threads):
                        rows, d = shape[:2]
                        mis = len(shape) > 2
                        x = self.tensor((rows, d), dt, mis)
                        if rows > 2:
                            x[1].zero_()  # a row of zeros gives zeros
                        w = self.tensor((d,), dt, mis, scale=0.25, specials=False)
                        w += 1
                        out = self.output((rows, d), dt, mis)
                        row["path"] = gc.vector_path(x.element_size(), d, [t.data_ptr() for t in (out, x, w)])
                        self.launch("norm.rmsnorm", {"dtype": row["dtype"], "threads": str(threads)}, (rows, 1, 1),
                                    (threads, 1, 1), {"out": out, "x": x, "weight": w, "rows": rows, "dim": d,
                                                      "eps": eps})
                        u = tr.ulps_from_f64(out, tr.ref_rmsnorm_f64(x, w, eps))
                        worst = float(u.max().item())
                        zero_row = rows <= 2 or bool((out[1] == 0).all().item())
                        row.update(max_ulps=round(worst, 3), ok=worst <= RMS_ULPS[row["dtype"]] and zero_row,
                                   exact_fraction=None)
                        if not zero_row:
                            row["detail"] = "the zero row is not zeros"
                        eager_vs(row, tr, out, tr.eager_rmsnorm(x, w, eps))
                    label = f"{shape[0]}x{shape[1]}" + (" +1 elem" if len(shape) > 2 else "")
                    self.case("norm.rmsnorm", dname, label, {"threads": threads},
                              f"<= {RMS_ULPS[dname]:g} ulp of the fp64 reference", "formula", fn)

    def align_single_token(self):
        torch, tr = self.torch, self.tr
        rng = random.Random(SEED)
        cases = [(k, bs, e, False) for k in (1, 2, 8, 32) for bs in (16, 64, 128) for e in (64, 256)]
        cases += [(8, 64, 256, True), (32, 16, 64, True)]
        for topk, bs, experts, negative in cases:
            ids = rng.sample(range(experts), topk)
            if negative:
                for i in range(0, topk, 3):
                    ids[i] = -1 - i

            def fn(row, ids=ids, topk=topk, bs=bs, experts=experts):
                dev_ids = torch.tensor(ids, dtype=torch.int32, device=self.dev)
                got = [torch.full((n,), -7, dtype=torch.int32, device=self.dev) for n in (topk * bs, topk, 1)]
                grid, block = gc.ALIGN_SINGLE_TOKEN_LAUNCH
                self.launch("moe.align_single_token", {}, grid, block, {
                    "topk_ids": dev_ids, "topk": topk, "block_size": bs, "sorted_token_ids": got[0],
                    "expert_ids": got[1], "num_tokens_post_pad": got[2]})
                want = gc.ref_align_single_token(ids, bs)
                # align_block_size on the same ids, this cubin, cut (KERNELS.md: the outputs equal it)
                full = [torch.full((n,), -7, dtype=torch.int32, device=self.dev) for n in (
                    gc.align_max_pad(topk, experts, bs), gc.align_expert_slots(topk, experts, bs), 1)]
                grid, block = gc.align_block_size_launch(topk, experts)
                self.launch("moe.align_block_size", {}, grid, block, {
                    "topk_ids": dev_ids, "numel": topk, "num_experts": experts, "block_size": bs,
                    "sorted_token_ids": full[0], "expert_ids": full[1], "num_tokens_post_pad": full[2]})
                cut = (full[0].tolist()[:topk * bs], full[1].tolist()[:topk], full[2].tolist())
                eager = tr.torch_align_single_token(dev_ids, bs)
                equal_outputs(row, got, (want[0], want[1], [want[2]]), eager, extra=("align_block_size cut", cut))
            self.case("moe.align_single_token", "int32", f"top-{topk}, block {bs}" + (", negative ids" if negative
                                                                                     else ""),
                      {"experts": experts}, "equal to the semantics and to align_block_size cut", "semantics", fn)

    def align_block_size(self):
        torch, tr = self.torch, self.tr
        rng = random.Random(SEED + 1)
        cases = [(t, k, e, bs, "") for t in (1, 7, 64, 513, 4096) for k in (1, 8) for e in (8, 64, 256)
                 for bs in (16, 64)]
        cases += [(513, 8, 64, 128, "unused"), (300, 4, 64, 16, "out of range"), (64, 8, 1024, 16, ""),
                  (4096, 8, 256, 64, "skewed")]
        for tokens, topk, experts, bs, kind in cases:
            numel = tokens * topk
            if kind == "unused":  # a quarter of the experts get nothing
                ids = [rng.randrange(experts * 3 // 4) for _ in range(numel)]
            elif kind == "out of range":
                ids = [rng.randrange(-3, experts + 3) for _ in range(numel)]
            elif kind == "skewed":  # one hot expert
                ids = [5 if rng.random() < 0.5 else rng.randrange(experts) for _ in range(numel)]
            else:
                ids = [rng.randrange(experts) for _ in range(numel)]

            def fn(row, ids=ids, numel=numel, experts=experts, bs=bs):
                dev_ids = torch.tensor(ids, dtype=torch.int32, device=self.dev)

                def run(grid, threads=None):
                    got = [torch.full((n,), -7, dtype=torch.int32, device=self.dev) for n in (
                        gc.align_max_pad(numel, experts, bs), gc.align_expert_slots(numel, experts, bs), 1)]
                    g, block = gc.align_block_size_launch(numel, experts, grid, threads)
                    self.launch("moe.align_block_size", {}, g, block, {
                        "topk_ids": dev_ids, "numel": numel, "num_experts": experts, "block_size": bs,
                        "sorted_token_ids": got[0], "expert_ids": got[1], "num_tokens_post_pad": got[2]})
                    return got
                want = gc.ref_align_block_size(ids, experts, bs)
                want = (want[0], want[1], [want[2]])
                equal_outputs(row, run(None), want, tr.torch_align_block_size(dev_ids, experts, bs))
                # Every grid gives the same outputs (KERNELS.md): also one block,
                # an odd count, and the most the kernel allows.
                for grid in ALIGN_OTHER_GRIDS:
                    if below_total(run(grid), want[2][0]) != below_total(want, want[2][0]):
                        row["ok"] = False
                        row["exact_fraction"] = 0.0
                        row["detail"] += f"; grid {grid} differs"
                # And every block (KERNELS.md): 1024 threads, whatever the rule
                # picks, and the fewest that hold the experts.
                for threads in ALIGN_OTHER_THREADS:
                    # at least one per expert: the rule at no entries is the fewest that hold them
                    threads = max(threads, gc.LAUNCH_RULES.align_block_size_threads(experts, 0))
                    if below_total(run(None, threads), want[2][0]) != below_total(want, want[2][0]):
                        row["ok"] = False
                        row["exact_fraction"] = 0.0
                        row["detail"] += f"; block {threads} differs"
            self.case("moe.align_block_size", "int32", f"{tokens} tok x top-{topk}, {experts} exp, block {bs}"
                      + (f", {kind}" if kind else ""), {"grid": "rule, " + ", ".join(map(str, ALIGN_OTHER_GRIDS)),
                                                             "block": "rule, 1024, 512, the fewest threads"},
                      "every output equal to the semantics, at every grid and block", "semantics", fn)


def exact_vs(row, tr, got, want):
    worst, exact = tr.compare_bits(got, want)
    row.update(max_ulps=worst, exact_fraction=exact, ok=worst == 0)


def eager_vs(row, tr, got, eager):
    worst, exact = tr.compare_bits(got, eager.to(got.dtype))
    row.update(eager_max_ulps=worst, eager_exact_fraction=exact)


def below_total(outputs, total):
    """(sorted_token_ids, expert_ids, num_tokens_post_pad) as lists, the
    sorted ids cut to the padded total: KERNELS.md defines no position past
    it (the kernels do not write there)."""
    lists = [o.tolist() if hasattr(o, "tolist") else list(o) for o in outputs]
    return [lists[0][:total], lists[1], lists[2]]


def equal_outputs(row, got, want, eager, extra=None):
    names = ("sorted_token_ids", "expert_ids", "num_tokens_post_pad")
    total = want[2][0]
    want = below_total(want, total)
    got_lists = below_total(got, total)
    bad = [n for n, g, w in zip(names, got_lists, want) if g != w]
    if extra:
        label, other = extra
        bad += [f"{n} != {label}" for n, g, w in zip(names, got_lists, below_total(other, total)) if g != w]
    eager_bad = [n for n, g, w in zip(names, below_total(eager, total), want) if g != w]
    row["ok"] = not bad
    row["exact_fraction"] = 1.0 if not bad else 0.0
    row["eager_exact_fraction"] = 1.0 if not eager_bad else 0.0
    row["detail"] = "equal" if not bad else "differs: " + ", ".join(bad)
    if bad:
        n = next(i for i, (g, w) in enumerate(zip(got_lists[0], want[0])) if g != w) if got_lists[0] != want[0] else -1
        if n >= 0:
            row["detail"] += f" (sorted_token_ids[{n}]: got {got_lists[0][n]}, want {want[0][n]})"
    if eager_bad:
        row["detail"] += f"; the torch implementation differs: {', '.join(eager_bad)}"


def line(r):
    head = "ok " if r["ok"] else ("ERR" if r["error"] else "BAD")
    p = " ".join(f"{k}={v}" for k, v in r["params"].items())
    parts = [f"{head} {r['kernel']} {r['dtype']} {r['shape']}{' ' + p if p else ''} [{r['path']}]"]
    if r["error"]:
        return parts[0] + f": {r['error']}"
    figs = []
    if r["max_ulps"] is not None:
        figs.append(f"max {r['max_ulps']} ulp")
    if r["exact_fraction"] is not None:
        figs.append(f"{100 * r['exact_fraction']:.3f}% exact")
    figs.append(f"({r['rule']})")
    if r["eager_max_ulps"] is not None:
        figs.append(f"eager: max {r['eager_max_ulps']} ulp, {100 * r['eager_exact_fraction']:.3f}% exact")
    elif r["eager_exact_fraction"] is not None:
        figs.append(f"torch implementation {'equal' if r['eager_exact_fraction'] == 1 else 'DIFFERS'}")
    if r["detail"]:
        figs.append(r["detail"])
    return parts[0] + ": " + ", ".join(figs)


def summary_line(rows, incomplete=False):
    """`crosscheck_torch: P of N cross-checks passed[, F failed]: n against
    ..., ...`: the cases counted by their rows' reference tags."""
    passed = sum(1 for r in rows if r["ok"])
    head = f"crosscheck_torch: {passed} of {len(rows)} cross-checks passed"
    if passed < len(rows):
        head += f", {len(rows) - passed} failed"
    if incomplete:
        head += ", INCOMPLETE (terminated before every case ran)"
    parts = []
    for kind in list(REFERENCES) + ["none"]:
        tagged = [r for r in rows if (r.get("reference") in REFERENCES and r["reference"] == kind)
                  or (kind == "none" and r.get("reference") not in REFERENCES)]
        if not tagged:
            continue
        ok = sum(1 for r in tagged if r["ok"])
        words = REFERENCES[kind][0] if kind in REFERENCES else "with no reference (a part that broke before its cases)"
        parts.append(f"{len(tagged)} {words}" + ("" if ok == len(tagged) else f" ({ok} passed)"))
    return head + (": " + ", ".join(parts) if parts else "")


def reference_label(kind):
    return REFERENCES[kind][1] if kind in REFERENCES else "-"


def summarize(rows):
    groups = {}
    for r in rows:
        key = (r["kernel"], r["dtype"])
        g = groups.setdefault(key, {"kernel": r["kernel"], "dtype": r["dtype"], "rule": r["rule"],
                                    "reference": r.get("reference", "-"), "cases": 0,
                                    "passed": 0, "errors": 0, "max_ulps": None, "min_exact": None,
                                    "eager_max_ulps": None, "eager_min_exact": None})
        g["cases"] += 1
        g["passed"] += bool(r["ok"])
        g["errors"] += bool(r["error"])
        for src, dst, pick in (("max_ulps", "max_ulps", max), ("exact_fraction", "min_exact", min),
                               ("eager_max_ulps", "eager_max_ulps", max),
                               ("eager_exact_fraction", "eager_min_exact", min)):
            if r[src] is not None:
                g[dst] = r[src] if g[dst] is None else pick(g[dst], r[src])
    return list(groups.values())


def render(doc):
    rows = doc["rows"]
    if doc.get("setup_error"):
        return f"**crosscheck_torch: no case ran: setup failed: {doc['setup_error']}**\n"
    lines = [f"**{summary_line(rows)}** ({doc.get('elapsed_s', 0):.0f} s, backend {doc['backend']}"
             f"{'' if doc.get('finished') else ', INCOMPLETE'}).", ""]
    headers = ["kernel", "dtype", "held to", "against", "cases", "passed", "errors", "max ulp", "min exact %",
               "eager max ulp", "eager min exact %"]

    def pct(v):
        return "-" if v is None else f"{100 * v:.3f}"
    table = [[g["kernel"], g["dtype"], g["rule"], reference_label(g["reference"]), g["cases"],
              g["passed"] if g["passed"] == g["cases"] else f"**{g['passed']}**", g["errors"],
              gc.fmt(g["max_ulps"], 2), pct(g["min_exact"]), gc.fmt(g["eager_max_ulps"], 2),
              pct(g["eager_min_exact"])] for g in doc["summary"]]
    lines.append(gc.md_table(headers, table, right={4, 5, 6, 7, 8, 9, 10}))
    lines.append("against: the kind of reference a case is held to. eager PyTorch op: torch's own eager ops "
                 "(the diffusion kernels); jitd's formula in torch: KERNELS.md's formula for the kernel as this "
                 "project wrote it in tests/gpu/torch_refs.py (the fp32 sum in k order, silu and rmsnorm in "
                 "fp64), evaluated with torch; Python MoE semantics: this project's pure-Python reference of "
                 "the MoE alignment semantics (tests/gpu/gpu_common.py). Neither of the last two is a PyTorch op.")
    lines.append("")
    lines.append("eager: PyTorch's own op, shown, never held (KERNELS.md promises no equality with it for "
                 "topk_sum, silu_and_mul, rmsnorm); for the align kernels, whether the torch implementation "
                 "of the semantics written in this project (tests/gpu/torch_refs.py), which kernel_bench.py "
                 "times as eager, gives the same outputs (100 = equal). Ulps: between two values of the type, "
                 "or from the fp64 value in units of the type's spacing there (rmsnorm).")
    lines.append("")
    bad = [r for r in rows if not r["ok"]]
    if bad:
        lines += ["### Failed cases", ""] + [f"- `{line(r)}`" for r in bad[:40]] + [""]
    lines += ["<details><summary>Every case</summary>", "", "```"] + [line(r) for r in rows] + ["```", "",
                                                                                               "</details>", ""]
    return "\n".join(lines)


def write_outputs(doc, a):
    if a.json:
        gc.write_whole(a.json, json.dumps(doc, indent=1) + "\n")
    if a.report:
        gc.write_whole(a.report, render(doc))


def run(a):
    try:
        import torch
        backend = gc.DryBackend(a, torch) if a.dry_run else gc.CudaBackend(a, torch)
        checker = Checker(backend, torch, a)
    except Exception as e:  # noqa: BLE001 - no torch, CuPy or device: say so
        why = f"{type(e).__name__}: {e}"
        doc = {"backend": "none", "rows": [], "finished": False, "elapsed_s": 0, "summary": [], "setup_error": why,
               "setup_traceback": traceback.format_exc()[-3000:]}
        write_outputs(doc, a)
        print(f"crosscheck_torch: setup failed: {why}")
        print("crosscheck_torch: no cross-check ran: setup failed")
        return 1

    def on_term(signum, _frame):
        raise Terminated(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    parts = [checker.diffusion, checker.topk_sum, checker.silu_and_mul, checker.rmsnorm, checker.align_single_token,
             checker.align_block_size]
    if a.only:
        parts = [p for p in parts if any(s in p.__name__ for s in a.only)]
    terminated = False
    try:
        for part in parts:
            try:
                part()
            except Terminated:
                raise
            except Exception as e:  # noqa: BLE001 - a broken part (not a case) still lets the rest run
                checker.rows.append({"kernel": part.__name__, "request": part.__name__, "dtype": "-", "shape": "-",
                                     "params": {}, "rule": "-", "reference": "none", "path": "-", "ok": False,
                                     "max_ulps": None,
                                     "exact_fraction": None, "eager_max_ulps": None, "eager_exact_fraction": None,
                                     "detail": "", "error": f"{type(e).__name__}: {e}"[:300],
                                     "traceback": traceback.format_exc()[-2000:]})
                print(line(checker.rows[-1]), flush=True)
    except Terminated as e:
        terminated = True
        print(f"crosscheck_torch: terminated ({e}); writing what was checked", flush=True)
    doc = checker.doc(not terminated)
    write_outputs(doc, a)
    failed = terminated or not all(r["ok"] for r in checker.rows)
    print()
    print(gc.md_table(["kernel", "dtype", "against", "cases", "passed", "max ulp", "eager max ulp"],
                      [[g["kernel"], g["dtype"], reference_label(g["reference"]), g["cases"], g["passed"],
                        gc.fmt(g["max_ulps"], 2), gc.fmt(g["eager_max_ulps"], 2)] for g in doc["summary"]]))
    print(summary_line(checker.rows, incomplete=terminated))
    return 1 if failed else 0


def self_test_references(expect, problems):
    """The MoE references by hand and single == block cut; ulps on raw bits."""
    # align_block_size by hand: E=4, block 2; ids 5 and -1 out of range.
    s, e, t = gc.ref_align_block_size([2, 0, 2, 1, 5, -1], 4, 2)
    expect((s, e, t) == ([1, 6, 3, 6, 0, 2, 6, 6, 6, 6], [0, 1, 2, -1, -1], 6), f"align by hand: {s} {e} {t}")
    s, e, t = gc.ref_align_block_size([0, 0, 0], 2, 4)  # max_pad 3 + 2*3 = 9, 3 slots
    expect((s, e, t) == ([0, 1, 2, 3, 3, 3, 3, 3, 3], [0, -1, -1], 4), f"align one expert: {s} {e} {t}")
    s, e, t = gc.ref_align_single_token([5, 2, 9], 4)
    expect((s, e, t) == ([1, 3, 3, 3, 0, 3, 3, 3, 2, 3, 3, 3], [2, 5, 9], 12), f"single by hand: {s} {e} {t}")
    s, e, t = gc.ref_align_single_token([5, -1, 2], 2)
    expect((s, e, t) == ([2, 3, 0, 3, 3, 3], [2, 5, -1], 4), f"single, a negative id: {s} {e} {t}")
    rng = random.Random(1)
    for _ in range(300):  # KERNELS.md: single == align_block_size cut, negative ids included
        experts, bs = rng.choice([8, 64, 256]), rng.choice([1, 16, 64, 128])
        topk = rng.randint(0, min(32, experts))
        ids = rng.sample(range(experts), topk)
        for i in range(topk):
            if rng.random() < 0.2:
                ids[i] = -rng.randint(1, 5)
        one = gc.ref_align_single_token(ids, bs)
        full = gc.ref_align_block_size(ids, experts, bs)
        if (one[0], one[1], one[2]) != (full[0][:topk * bs], full[1][:topk], full[2]):
            problems.append(f"single != block cut for ids {ids} block {bs}")
            break
    # ulps on raw bits (bf16): neighbours, ±0, across zero.
    one_bits = gc.bf16_bits_from_f32(1.0)
    expect(one_bits == 0x3f80 and gc.bf16_value(0x3f81) > 1.0, "bf16 bits of 1.0")
    key = lambda b: gc.ordered_key(b, 16)  # noqa: E731
    expect(key(0x3f81) - key(0x3f80) == 1, "neighbours 1 ulp apart")
    expect(key(0x8000) == key(0x0000) == 0, "+0 and -0 are 0 apart")
    expect(key(0x0001) - key(0x8001) == 2, "± the smallest subnormal 2 apart")
    expect(key(0xbf80) == -key(0x3f80), "negative mirrors positive")
    expect(gc.ordered_key(0x80000001, 32) == -1, "fp32 keys")
    expect(gc.bf16_bits_from_f32(1.0 + 2**-8) == 0x3f80 and gc.bf16_bits_from_f32(1.0 + 3 * 2**-8) == 0x3f82,
           "bf16 round to nearest even")
    expect(abs(gc.ulps_from_f64(1.0, 1.0 + 2**-8, 8, -126) - 0.5) < 1e-12, "half an ulp at 1")
    expect(gc.ulps_from_f64(0.0, 0.0, 8, -126) == 0.0, "0 from 0")
    expect(abs(gc.ulps_from_f64(2**-133, 0.0, 8, -126) - 1.0) < 1e-12, "one subnormal step from 0 (bf16)")
    expect(gc.ulps_from_f64(float("inf"), 1.0, 8, -126) == float("inf"), "inf from finite")


def self_test_report(expect):
    """The report and the summary line from fake cases of every reference
    kind; returns the fake document (check_report.sh's input)."""
    rows = []
    for i, (k, dt, ok, err, ref) in enumerate([
            ("topk_sum", "bf16", True, "", "formula"), ("topk_sum", "bf16", False, "", "formula"),
            ("rmsnorm", "fp32", True, "", "formula"),
            ("align_block_size", "int32", False, "CUDADriverError: launch failed", "semantics"),
            ("modulate_scale_shift", "bf16", True, "", "eager")]):
        rows.append({"kernel": k, "request": "x." + k, "dtype": dt, "shape": f"{i}x8", "params": {"threads": 256},
                     "rule": "r", "reference": ref, "path": "vector", "ok": ok, "max_ulps": 0 if ok else 3,
                     "exact_fraction": 1.0, "eager_max_ulps": 2, "eager_exact_fraction": 0.9, "detail": "",
                     "error": err})
    doc = {"backend": "self-test", "rows": rows, "finished": True, "elapsed_s": 1.0, "summary": summarize(rows)}
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(json=os.path.join(tmp, "c.json"), report=os.path.join(tmp, "c.md"))
        write_outputs(doc, ns)
        md = open(ns.report).read()
        back = json.load(open(ns.json))
    want = ("crosscheck_torch: 3 of 5 cross-checks passed, 2 failed: 1 against eager PyTorch ops, 3 against "
            "jitd's formulas evaluated in torch (2 passed), 1 against a Python reference of the MoE semantics "
            "(0 passed)")
    expect(want in md and summary_line(rows) == want, f"summary line: {summary_line(rows)}")
    every = [dict(r, ok=True) for r in rows]
    expect(summary_line(every) == "crosscheck_torch: 5 of 5 cross-checks passed: 1 against eager PyTorch ops, "
           "3 against jitd's formulas evaluated in torch, 1 against a Python reference of the MoE semantics",
           f"summary line, all passed: {summary_line(every)}")
    broken = every[:1] + [dict(rows[0], reference="none", ok=False)]
    expect(summary_line(broken, incomplete=True) == "crosscheck_torch: 1 of 2 cross-checks passed, 1 failed, "
           "INCOMPLETE (terminated before every case ran): 1 against jitd's formulas evaluated in torch, 1 with no "
           "reference (a part that broke before its cases) (0 passed)", f"summary line, broken part: "
           f"{summary_line(broken, incomplete=True)}")
    expect(len(back["summary"]) == 4 and back["summary"][0]["cases"] == 2 and back["summary"][0]["passed"] == 1
           and back["summary"][0]["reference"] == "formula", f"summary groups: {back['summary']}")
    expect("| jitd's formula in torch |" in md and "| Python MoE semantics |" in md, "the against column")
    expect("### Failed cases" in md and "launch failed" in md, "failed cases listed")
    return doc


def self_test_torch(expect, problems):
    """The torch references against the pure-Python ones, where torch is
    installed (it is on the GPU host; here maybe not)."""
    torch_note = "torch part skipped (no torch here)"
    try:
        import torch  # noqa: F401
    except ImportError:
        torch = None
    if torch is not None:
        import torch_refs as tr
        vals = [1.0, 1.0 + 2**-8, -3.0e-39, 0.0, 65504.0, 2**-140, -7.25, 1e30]
        got = torch.tensor([gc.bf16_value(gc.bf16_bits_from_f32(v)) for v in vals], dtype=torch.float32).bfloat16()
        want = torch.tensor([v * (1 + 2**-11) for v in vals], dtype=torch.float64)
        tu = tr.ulps_from_f64(got, want).tolist()
        pu = [gc.ulps_from_f64(float(g), float(w), 8, -126) for g, w in zip(got.float().tolist(), want.tolist())]
        expect(all(abs(x - y) < 1e-9 for x, y in zip(tu, pu)), f"torch ulps_from_f64 {tu} != {pu}")
        expect(gc.bf16_bits_from_f32(1.0 + 3 * 2**-8) == int(torch.tensor(1.0 + 3 * 2**-8).bfloat16().view(
            torch.int16).item()) & 0xffff, "bf16 rounding agrees with torch")
        a16 = torch.tensor([1.0, -0.0, 2**-133], dtype=torch.float32).bfloat16()
        b16 = torch.tensor([1.0078125, 0.0, -(2**-133)], dtype=torch.float32).bfloat16()
        expect(tr.ulps_between(a16, b16).tolist() == [1, 0, 2], f"ulps_between {tr.ulps_between(a16, b16).tolist()}")
        rng = random.Random(2)
        for _ in range(50):
            experts, bs = rng.choice([1, 8, 64]), rng.choice([1, 16, 64])
            ids = [rng.randrange(-2, experts + 2) for _ in range(rng.randint(0, 300))]
            want = gc.ref_align_block_size(ids, experts, bs)
            got = tr.torch_align_block_size(torch.tensor(ids, dtype=torch.int32), experts, bs)
            if (got[0].tolist(), got[1].tolist(), got[2].tolist()) != (want[0], want[1], [want[2]]):
                problems.append(f"torch_align_block_size differs for {ids} E={experts} bs={bs}")
                break
            topk = rng.randint(0, min(32, experts))
            sids = rng.sample(range(experts), topk)
            if topk:
                sids[0] = -1
            want = gc.ref_align_single_token(sids, bs)
            got = tr.torch_align_single_token(torch.tensor(sids, dtype=torch.int32), bs)
            if (got[0].tolist(), got[1].tolist(), got[2].tolist()) != (want[0], want[1], [want[2]]):
                problems.append(f"torch_align_single_token differs for {sids} bs={bs}")
                break
        torch_note = f"torch part ok (torch {torch.__version__})"
    return torch_note


def self_test(a):
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)

    self_test_references(expect, problems)
    doc = self_test_report(expect)
    torch_note = self_test_torch(expect, problems)
    if a.self_test_out:  # fake inputs for check_report.sh's write_report.py test
        write_outputs(doc, argparse.Namespace(json=os.path.join(a.self_test_out, "crosscheck_torch.json"),
                                              report=os.path.join(a.self_test_out, "crosscheck_torch.md")))
    if problems:
        for p in problems:
            print("self-test: FAILED:", p)
        return 1
    print(f"crosscheck_torch self-test: ok (references by hand and single == block cut x300, ulps, report; "
          f"{torch_note})")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jitctl")
    ap.add_argument("--endpoint")
    ap.add_argument("--work", help="directory for the fetched cubins")
    ap.add_argument("--kernels", default=gc.DEFAULT_KERNELS, help="the kernels directory (kernels.toml's signatures)")
    ap.add_argument("--report", default="", help="write the markdown summary here")
    ap.add_argument("--json", default="", help="write every case here")
    ap.add_argument("--only", action="append", default=[], help="only the parts whose name contains this")
    ap.add_argument("--self-test-out", default="", help="with --self-test: also write its fake report and JSON here")
    ap.add_argument("--self-test", action="store_true", help="check this script without a GPU")
    ap.add_argument("--dry-run", action="store_true", help="torch on the CPU, emulated kernels (no GPU, no CuPy)")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a)
    if not a.dry_run and not (a.jitctl and a.endpoint and a.work):
        ap.error("--jitctl, --endpoint and --work are required (or --self-test, --dry-run)")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
