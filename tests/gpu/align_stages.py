#!/usr/bin/env python3
"""Where moe.align_block_size spends its time, stage by stage, on a GPU.

Compiles kernels/moe/align_block_size.cu with CuPy (NVRTC, the same source
jitd serves), and variants of it that stop after a stage or leave one out,
then times each in a CUDA graph (median of 15 replays of 20 launches) at
1, 16, 256, 4096 and 16384 tokens x top-8, 256 experts, block 64, with the
grid and block jitd's rules pick. Differences between variants say what a stage costs;
the outputs of the variants are not checked (they are incomplete on purpose).

    python3 tests/gpu/align_stages.py [--out FILE.json] [--source FILE.cu|FILE.patch]
        [--compare OLD.cu] [--tokens 1,256] [--grids 2,4] [--variants full,before]
"""
import argparse
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKENS = (1, 16, 256, 512, 1024, 4096, 16384)
TOPK, EXPERTS, BLOCK_SIZE = 8, 256, 64
REPS, INNER = 15, 20
DEFAULT_SOURCE = os.path.join(ROOT, "kernels", "moe", "align_block_size.cu")
sys.path.insert(0, HERE)
from gpu_common import LAUNCH_RULES  # noqa: E402

RULE = None  # a variant's threads: the block jitd.align_block_size_threads picks at each size

# name -> [(text in the source, text put before it)]: a return before a
# stage stops there; "skip" variants guard one loop with `if (false)`.
STAGES = {
    "full": [],
    "empty (returns at once)": [("  const int block_threads = static_cast<int>(blockDim.x);", "  if (true) return;\n")],
    # After the launch checks (the shared arrays are never used, so unallocated).
    "stop after the launch checks": [("  const int tid = static_cast<int>(threadIdx.x);\n  const int lane = lane_id();\n"
                                      "  const int warp = warp_id();\n  const int block = static_cast<int>(blockIdx.x);",
                                      "  if (true) return;\n")],
    "stop before counts": [("  // 1. Counts:", "  if (true) return;\n")],
    "stop before o_e": [("  // 2. o_e:", "  if (true) return;\n")],
    "stop before padding": [("  // 3. Everything that is not", "  if (true) return;\n")],
    "stop before scatter": [("  // 4. The chunk's token indices", "  if (true) return;\n")],
    # The one-block path (align_one_block), grids of one block at small sizes.
    "1-block: stop at entry": [("  int32_t ids[kAlignSmallSteps];\n#pragma unroll\n  for (int k = 0; k < kAlignSmallSteps; ++k) ids[k]",
                                "  if (true) return;\n")],
    "1-block: stop after zeroing its row": [("  __syncwarp();\n\n  // 1. Ranks in index order", "  if (true) return;\n")],
    "1-block: stop before ranks": [("  // 1. Ranks in index order", "  if (true) return;\n")],
    "1-block: stop before the ranks' barrier": [("  sync_working(threads);\n\n  // 2. Column e:", "  if (true) return;\n")],
    "1-block: stop before o_e": [("  // 2. Column e:", "  if (true) return;\n")],
    "1-block: stop before writes": [("  // 3. Block b of the grid writes", "  if (true) return;\n")],
    "1-block: stop before the token writes": [("#pragma unroll\n  for (int k = 0; k < kAlignSmallSteps; ++k) {\n    const int32_t e = ids[k];\n    if (is_expert(e, num_experts)) {\n      const int32_t pos", "  if (true) return;\n")],
}
# Stops of the patches in tests/gpu/candidates/ that the served kernel
# lacks, name -> [(text in the patched source, text put before it)]. (The
# candidates measured and not taken are kept with their runs in
# docs/gpu-runs: 2026-12-06-align-candidate-h100, 2026-12-06-align-by-expert-h100,
# 2026-12-07-align-match-any-h100, 2026-12-07-align-row-zeroing-h100.)
CANDIDATE_STAGES = {}
SKIPS = {
    "no expert_ids": ("  for (int32_t k = first; k < slots; k += step) {", "  if (false)\n"),
}
# Builds of the whole kernel with other compile-time settings: name -> options.
SETTINGS = {f"{k} entries per thread": (f"-DSGLANG_ALIGN_ENTRIES_PER_THREAD={k}",) for k in (2, 8)}
# Variants launched with another block than the rule's (every block that
# holds the experts gives the same outputs): name -> (variant, threads); and
# built for at most 512 threads (the array sizes and loop bounds a block of
# 512 needs), launched with 512: name -> (variant, threads).
NARROW = {f"{base} at {t} threads": (base, t) for base in ("full", "empty (returns at once)") for t in (1024, 512)}
THREADS_ANCHOR = "inline constexpr int kAlignThreads = 1024;"
BUILT_NARROW = {"full built for 512 threads": ("full", 512)}


def reference(ids, experts, block_size):
    """(sorted ids below the padded total, expert_ids, total) by KERNELS.md."""
    count = [0] * experts
    for e in ids:
        if 0 <= e < experts:
            count[e] += 1
    offset, total = [], 0
    for c in count:
        offset.append(total)
        total += -(-c // block_size) * block_size
    sorted_ids = [len(ids)] * total
    placed = [0] * experts
    for i, e in enumerate(ids):
        if 0 <= e < experts:
            sorted_ids[offset[e] + placed[e]] = i
            placed[e] += 1
    slots = -(-(len(ids) + experts * (block_size - 1)) // block_size)
    expert_ids = [-1] * slots
    for e, c in enumerate(count):
        for pos in range(offset[e], offset[e] + -(-c // block_size) * block_size, block_size):
            expert_ids[pos // block_size] = e
    return sorted_ids, expert_ids, total


def grid_for(numel):
    """The grid the clients' rule picks (jitd.align_block_size_grid)."""
    return LAUNCH_RULES.align_block_size_grid(numel)


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def apply_patch(text, patch, name):
    """`text` with the one-file unified diff `patch` applied; exits naming the
    hunk whose context or removed lines no longer match `text`."""
    old = text.splitlines(keepends=True)
    out, at = [], 0
    lines = patch.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = HUNK.match(lines[i])
        i += 1
        if not m:
            continue  # the description and the file names before the hunks
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        if start < at:
            raise SystemExit(f"{name}: hunks out of order at line {start + 1}")
        out += old[at:start]
        at = start
        while i < len(lines) and not lines[i].startswith("@@"):
            tag, body = lines[i][:1], lines[i][1:]
            i += 1
            if tag in " -":
                if at >= len(old) or old[at] != body:
                    raise SystemExit(f"{name}: the hunk at line {start + 1} no longer matches the kernel "
                                     f"(line {at + 1}): remake the candidate against it")
                at += 1
            if tag in " +":
                out.append(body)
    return "".join(out + old[at:])


def load_source(path):
    """The kernel source at `path`: a .cu file as it is, or a .patch applied
    to the committed kernel."""
    text = open(path).read()
    if path.endswith(".patch"):
        return apply_patch(open(DEFAULT_SOURCE).read(), text, path)
    return text


def variants(source, strict):
    """name -> (source text, extra compile options). With `strict` (the
    committed kernel) every stop must be in the source; otherwise (another
    --source) the stops it lacks are left out, and said so."""
    out = {}
    for name, patches in (STAGES if strict else {**STAGES, **CANDIDATE_STAGES}).items():
        text = source
        if any(anchor not in text for anchor, _ in patches):
            if strict:
                raise SystemExit(f"align_stages: '{patches[0][0]}' is not in the source: update STAGES")
            print(f"align_stages: '{name}' has no stop point in this source; left out", flush=True)
            continue
        for anchor, before in patches:
            text = text.replace(anchor, before + anchor, 1)
        out[name] = (text, (), RULE)
    for name, (anchor, before) in SKIPS.items():
        if anchor not in source:
            raise SystemExit(f"align_stages: '{anchor}' is not in the source: update SKIPS")
        out[name] = (source.replace(anchor, before + anchor, 1), (), RULE)
    for name, options in SETTINGS.items():
        if "SGLANG_ALIGN_ENTRIES_PER_THREAD" in source:
            out[name] = (source, options, RULE)
    for name, (base, threads) in NARROW.items():
        if base in out:
            out[name] = (out[base][0], (), threads)
    for name, (base, threads) in BUILT_NARROW.items():
        if base in out and THREADS_ANCHOR in out[base][0]:
            text = out[base][0].replace(THREADS_ANCHOR, f"inline constexpr int kAlignThreads = {threads};")
            out[name] = (text, (), threads)
    return out


def graph_us(torch, stream, fn):
    with torch.cuda.stream(stream):
        fn()
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            for _ in range(INNER):
                fn()
        graph.replay()
        stream.synchronize()
        runs = []
        for _ in range(REPS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            graph.replay()
            end.record(stream)
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1000.0 / INNER)
    return statistics.median(runs), min(runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the figures here as JSON")
    ap.add_argument("--source", default=DEFAULT_SOURCE)
    ap.add_argument("--compare", help="an earlier align_block_size.cu, timed whole as the variant 'before'")
    ap.add_argument("--compare-threads", type=int, default=1024,
                    help="the block 'before' is launched with (default 1024: kernels before 512-thread "
                         "blocks took only 1024)")
    ap.add_argument("--tokens", help="comma-separated token counts (default: %s)" % ",".join(map(str, TOKENS)))
    ap.add_argument("--grids", help="comma-separated grids to time at every size, beside 1 and the rule's")
    ap.add_argument("--variants", help="comma-separated variant names to time (default: all)")
    a = ap.parse_args()
    tokens_list = [int(t) for t in a.tokens.split(",")] if a.tokens else list(TOKENS)
    extra_grids = {int(g) for g in a.grids.split(",")} if a.grids else set()
    import cupy as cp
    import torch
    source = load_source(a.source)
    include = os.path.join(ROOT, "kernels")
    arch = "sm_%d%d" % torch.cuda.get_device_capability()
    stream = torch.cuda.Stream()
    cp_stream = cp.cuda.ExternalStream(stream.cuda_stream)
    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = []
    todo = variants(source, strict=os.path.samefile(a.source, DEFAULT_SOURCE))
    if a.compare:
        todo = {"before": (open(a.compare).read(), (), a.compare_threads), **todo}
    if a.variants:
        wanted = a.variants.split(",")
        unknown = [v for v in wanted if v not in todo]
        if unknown:
            raise SystemExit(f"align_stages: no variant {unknown}; there are: {', '.join(todo)}")
        todo = {k: v for k, v in todo.items() if k in wanted}
    for name, (text, extra, threads) in todo.items():
        module = cp.RawModule(code=text, options=("-std=c++17", f"-I{include}", f"--gpu-architecture={arch}", *extra),
                              name_expressions=["sglang::moe::align_block_size_kernel"])
        kernel = module.get_function("sglang::moe::align_block_size_kernel")
        for tokens, grid in [(t, g) for t in tokens_list for g in sorted({grid_for(t * TOPK), 1} | extra_grids)]:
            numel = tokens * TOPK
            ids = torch.randint(0, EXPERTS, (numel,), dtype=torch.int32, device="cuda", generator=gen)
            max_pad = numel + EXPERTS * (BLOCK_SIZE - 1)
            sorted_ids = torch.empty(max_pad, dtype=torch.int32, device="cuda")
            expert_ids = torch.empty((max_pad + BLOCK_SIZE - 1) // BLOCK_SIZE, dtype=torch.int32, device="cuda")
            count = torch.empty(1, dtype=torch.int32, device="cuda")
            args = (ids.data_ptr(), cp.int64(numel), cp.int32(EXPERTS), cp.int32(BLOCK_SIZE),
                    sorted_ids.data_ptr(), expert_ids.data_ptr(), count.data_ptr())
            args = tuple(cp.uint64(x) if isinstance(x, int) else x for x in args)

            block = LAUNCH_RULES.align_block_size_threads(EXPERTS, numel) if threads is RULE else threads

            def launch():
                with cp_stream:
                    kernel((grid,), (block,), args)

            med, low = graph_us(torch, stream, launch)
            check = "-"
            if name in ("before", "full") or name in SETTINGS or {**NARROW, **BUILT_NARROW}.get(name, ("",))[0] == "full":
                # complete kernels: outputs checked
                sorted_ids.fill_(-7)
                expert_ids.fill_(-7)
                launch()
                torch.cuda.synchronize()
                want = reference(ids.tolist(), EXPERTS, BLOCK_SIZE)
                total = int(count.item())
                ok = (total == want[2] and sorted_ids[:total].tolist() == want[0]
                      and expert_ids.tolist() == want[1])
                check = "ok" if ok else "BAD"
            rows.append({"variant": name, "tokens": tokens, "grid": grid, "threads": block, "graph_us": med,
                         "graph_us_min": low, "check": check})
            print(f"{name:22s} {tokens:6d} tok grid {grid:2d} x {block:4d}: {med:7.2f} us (min {low:.2f}) {check}",
                  flush=True)
    doc = {"gpu": torch.cuda.get_device_name(0), "arch": arch, "reps": REPS, "inner": INNER, "rows": rows}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
