"""The words, the markdown and the whole-run figures of kernel_bench.py
(standard library only: its --self-test and --list need no torch).

- EAGER_OPS and CHECKS: what each case's eager figure runs and what its
  check holds the cubin to;
- `derive(doc)`: the figures that need the whole run so far, recomputed at
  every write: the launch-floor row as the minimum of its samples, the floor
  and the kernel rows below it (doc["floor"]), the run's peak copy
  (doc["peak_copy_gbps"]) and each row's % of it (row["pct_of_peak_copy"]);
- `render(doc)`: the markdown section: method, device, summary, the floor
  and its self-check, the anchors, the serving shapes off the anchors,
  rmsnorm's thread rule, align_block_size against the peer's target, every
  case, notes;
- `one_line(row)`: the line printed as each case is measured.

Not a program: imported by kernel_bench.py.
"""
import gpu_common as gc

FLOOR = "launch floor"
ISSUE_SILU_US = 239.0  # issue 17: silu_and_mul 8192x14336 at 239 µs, "71%" of a copy
ISSUE_SILU_PCT = 71.0
# SGLang's moe_align_block_size at top-8, 256 experts, block 64: µs per
# launch in CUDA graphs on an H100, measured outside this project. A target:
# the peer is not run here, and nothing of it is reimplemented here.
PEER_ALIGN_TARGET_US = {1: 4.36, 16: 4.46, 256: 4.85, 4096: 13.64, 16384: 43.44}
PEER_ALIGN_ROUTING = {"topk": 8, "num_experts": 256, "block_size": 64}

EAGER_OPS = {
    FLOOR: "t.add_(1) on a 1-element tensor",
    "diffusion.modulate_scale_shift": "x * (1 + scale[:, None]) + shift[:, None]",
    "diffusion.residual_gate_add": "residual + update * gate",
    "activation.silu_and_mul": "F.silu(in[:, :dim]) * in[:, dim:]",
    "moe.topk_sum": "in.sum(dim=1) (sums in another order: for time only)",
    "norm.rmsnorm": "F.rms_norm(x, (dim,), weight, 1e-6)",
    "moe.align_block_size": "a torch reimplementation of the semantics written in this project "
                            "(tests/gpu/torch_refs.py torch_align_block_size: scatter_add counts, stable sort, "
                            "scatter, searchsorted), not a peer kernel",
    "moe.align_single_token": "a torch reimplementation of the semantics written in this project "
                              "(tests/gpu/torch_refs.py torch_align_single_token: stable sort, scatter), "
                              "not a peer kernel",
}

ALIGN_RULE = ("sorted_token_ids below num_tokens_post_pad, expert_ids below num_tokens_post_pad / block_size, "
              "and the count, each equal to the semantics (pure-Python reference); past the count nothing is "
              "compared (the kernel need not write there)")
CHECKS = {
    FLOOR: "output untouched at every sample (the kernel returns at rows=0)",
    "diffusion.modulate_scale_shift": "bit-exact with eager",
    "diffusion.residual_gate_add": "bit-exact with eager",
    "activation.silu_and_mul": "<= 1 ulp and >= 99.9% bit-exact vs the fp64 formula",
    "moe.topk_sum": "bit-exact with the fp32 sum in k order",
    "norm.rmsnorm": "<= 2 ulp of the fp64 reference",
    "moe.align_block_size": ALIGN_RULE,
    "moe.align_single_token": ALIGN_RULE,
}

HEADERS = ["kernel", "shape", "params", "path", "MB", "µs", "GB/s", "% of copy", "% of peak", "copy GB/s",
           "copy µs", "eager µs", "×eager", "graph µs", "check"]
RIGHT = set(range(4, 14))


def short(kernel):
    return kernel.split(".")[-1]


def params_label_row(r):
    return ", ".join(f"{k}={v}" for k, v in r["params"].items())


# ---------------------------------------------------------------- whole-run figures

def derive(doc):
    """Recomputes the floor and the peak copy figures of `doc` in place."""
    floor_row(doc)
    floor_check(doc)
    peak_copy(doc)
    return doc


def floor_row(doc):
    """The launch-floor row from doc["floor_samples"]: the minimum of each
    figure over the samples that were timed, each from where it was taken."""
    row = next((r for r in doc["rows"] if r["request"] == FLOOR), None)
    samples = doc.get("floor_samples") or []
    timed = [s for s in samples if s.get("us") is not None]
    if row is None or not samples:
        return
    if not timed:
        row.update(status="error", error=f"every floor sample failed; the first ({samples[0]['at']}): "
                                         f"{samples[0].get('error', '')}"[:300])
        return
    best = min(timed, key=lambda s: s["us"])
    graphs = [s for s in timed if s.get("graph_us") is not None]
    gbest = min(graphs, key=lambda s: s["graph_us"]) if graphs else {}
    eagers = [s["eager_us"] for s in timed if s.get("eager_us") is not None]
    checked = [s for s in timed if s.get("check_ok") is not None]
    written = [s["at"] for s in checked if not s["check_ok"]]
    failed = [f"{s['at']}: {s['error']}" for s in samples if s.get("error")]
    check = f"written at rows=0 ({', '.join(written)})" if written else \
        f"untouched at {len(checked)} of {len(samples)} samples"
    row.update(status="measured", error="", us=best["us"], us_runs=best["us_runs"], floor_at=best["at"],
               graph_us=gbest.get("graph_us"), graph_runs=gbest.get("graph_runs", []),
               graph_floor_at=gbest.get("at"), eager_us=min(eagers) if eagers else None,
               check_ok=bool(checked) and not written,
               check=check + (f"; samples that failed: {'; '.join(failed)}" if failed else ""))
    row["speedup"] = row["eager_us"] / row["us"] if row["eager_us"] and row["us"] > 0 else None


def floor_check(doc):
    """doc["floor"]: the floor's two figures and every kernel row whose µs
    or graph µs is below them (there should be none)."""
    row = next((r for r in doc["rows"] if r["request"] == FLOOR), None)
    if row is None:
        return
    measured = row["status"] == "measured"
    us = row["us"] if measured else None
    graph_us = row.get("graph_us") if measured else None
    below = []
    for r in doc["rows"]:
        if r is row or r["status"] != "measured":
            continue
        which = [k for k, f in (("us", us), ("graph_us", graph_us))
                 if f is not None and r.get(k) is not None and r[k] < f]
        if which:
            below.append({"kernel": r["kernel"], "shape_label": r["shape_label"], "params": r["params"],
                          "us": r["us"], "graph_us": r.get("graph_us"), "below_in": which})
    doc["floor"] = {"us": us, "us_at": row.get("floor_at"), "graph_us": graph_us,
                    "graph_us_at": row.get("graph_floor_at"), "samples": len(doc.get("floor_samples") or []),
                    "below": below}


# Copies of fewer bytes than this may be served from L2 (50-60 MB on the
# H100 and H200) and pass what device memory sustains: they do not count
# towards the peak.
DRAM_COPY_BYTES = 256 * 10**6


def peak_copy(doc):
    """doc["peak_copy_gbps"]: the run's peak device-memory copy: the big copy,
    and any row's copy of at least DRAM_COPY_BYTES that was faster; each
    row's GB/s as a % of it. doc["largest_copy_gbps"]: the fastest copy of
    any size (small ones may come from L2), for reference only."""
    best, source = None, ""
    big = doc.get("peak_copy") or {}
    if big.get("gbps"):
        best, source = big["gbps"], f"the {big['src_bytes'] / 2**20:.0f} MiB copy"
    copies = [r for r in doc["rows"] if r.get("copy_gbps")]
    for r in copies:
        if r["copy_bytes"] >= DRAM_COPY_BYTES and (best is None or r["copy_gbps"] > best):
            best = r["copy_gbps"]
            source = f"the copy beside {r['kernel']} {r['shape_label']} ({r['copy_bytes'] / 1e6:.2f} MB)"
    doc["largest_copy_gbps"] = max([r["copy_gbps"] for r in copies] + ([big["gbps"]] if big.get("gbps") else []),
                                   default=None)
    doc["peak_copy_gbps"], doc["peak_copy_from"] = best, source
    for r in doc["rows"]:
        r["pct_of_peak_copy"] = 100.0 * r["gbps"] / best if r.get("gbps") and best else None


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


# ---------------------------------------------------------------- markdown

def render(doc):
    """The markdown section for report.md."""
    rows = doc["rows"]
    if doc.get("setup_error"):
        return (f"**kernel_bench: no case ran: setup failed: {doc['setup_error']}** ({len(rows)} cases planned; "
                "the traceback is in kernel_bench.json).\n")
    derive(doc)
    lines = ["**Method.** " + "; ".join(f"{k}: {v}" for k, v in doc["method"].items()) + ".", ""]
    dev = doc.get("device") or {}
    if dev:
        lines += ["**Device.** " + ", ".join(f"{k} {v}" for k, v in dev.items()) + f"; backend: {doc['backend']}.",
                  ""]
    measured = sum(1 for r in rows if r["status"] == "measured")
    bad = [r for r in rows if r["status"] == "measured" and not r["check_ok"]]
    skipped = sum(1 for r in rows if r["status"].startswith("not run"))
    lines += [f"**{measured} of {len(rows)} cases measured, {len(bad)} failed their check, "
              f"{sum(1 for r in rows if r['error'])} errors, {skipped} not run** "
              f"({doc.get('elapsed_s', 0):.0f} s{'' if doc.get('finished') else ', INCOMPLETE'}).", ""]
    lines += floor_lines(doc) + peak_lines(doc)
    anchors = [r for r in rows if r["anchor"]]
    if anchors:
        lines += ["### The reference shapes of issue 17 (⚓)", "", gc.md_table(HEADERS, [cells(r) for r in anchors],
                                                                            RIGHT)]
    lines += serving_lines(rows) + rmsnorm_rule_lines(rows) + align_target_lines(doc)
    lines += ["### Every case", "", gc.md_table(HEADERS, [cells(r) for r in rows], RIGHT)]
    return "\n".join(lines + notes_lines(rows)) + "\n"


def cells(r):
    if r["status"] != "measured":
        why = r["error"] or r["status"]
        return [r["kernel"], r["shape_label"], params_label_row(r), r["path"], gc.fmt(r["bytes"] / 1e6, 2)] + \
            ["-"] * 9 + [f"**{why[:160]}**"]
    chk = r["check"] if r["check_ok"] else f"**BAD: {r['check']}**"
    return [r["kernel"] + (" ⚓" if r["anchor"] else ""), r["shape_label"], params_label_row(r), r["path"],
            gc.fmt(r["bytes"] / 1e6, 2), gc.fmt(r["us"], 2), gc.fmt(r["gbps"], 0), gc.fmt(r["pct_of_copy"], 0),
            gc.fmt(r.get("pct_of_peak_copy"), 0), gc.fmt(r["copy_gbps"], 0), gc.fmt(r["copy_us"], 2),
            gc.fmt(r["eager_us"], 2), gc.fmt(r["speedup"], 2), gc.fmt(r.get("graph_us"), 2), chk]


def floor_lines(doc):
    """How the floor was measured, its samples, and the self-check."""
    floor = doc.get("floor")
    if floor is None:
        return []
    samples = doc.get("floor_samples") or []
    taken = "; ".join(f"{s['at']}: " + (f"**{s['error']}**" if s.get("error") else
                                        f"{gc.fmt(s.get('us'), 2)} µs, graph {gc.fmt(s.get('graph_us'), 2)} µs")
                      for s in samples) or "none"
    lines = [f"**Launch floor.** {gc.fmt(floor['us'], 2)} µs back-to-back (lowest sample: "
             f"{floor['us_at'] or '-'}), {gc.fmt(floor['graph_us'], 2)} µs per launch in a CUDA graph (lowest "
             f"sample: {floor['graph_us_at'] or '-'}): "
             "the empty launch (silu_and_mul with rows=0, which returns at once: of the kernels, the fewest arguments) timed exactly as the "
             "kernels are (after warm-up, the same events, repetitions and launches; its cubin fetched and "
             "launched once before the first sample), at several points of the run, and the minimum of each "
             f"figure kept as the floor row. Samples ({len(samples)}): {taken}.", ""]
    below = floor["below"]
    if floor["us"] is None:
        lines += ["**Floor self-check:** no floor was measured, so nothing was checked against it.", ""]
    elif not below:
        lines += ["**Floor self-check:** no kernel row is below the floor (µs or graph µs).", ""]
    else:
        lines += [f"**Floor self-check: {len(below)} kernel rows below the floor** (a timing fault, or a floor "
                  "taken too late): " + "; ".join(
                      f"{b['kernel']} {b['shape_label']} {', '.join(f'{k}={v}' for k, v in b['params'].items())}: "
                      f"{gc.fmt(b['us'], 2)} µs, graph {gc.fmt(b['graph_us'], 2)} µs ({' and '.join(b['below_in'])})"
                      for b in below) + ".", ""]
    return lines


def peak_lines(doc):
    big = doc.get("peak_copy") or {}
    what = (f"{big['src_bytes'] / 2**20:.0f} MiB device to device: {gc.fmt(big.get('gbps'), 0)} GB/s"
            if big.get("gbps") else f"failed: {big['error']}" if big.get("error") else "not measured")
    return [f"**Peak copy.** {gc.fmt(doc.get('peak_copy_gbps'), 0)} GB/s (from {doc.get('peak_copy_from') or '-'}): "
            f"device memory's copy rate: one big torch copy ({what}; bytes read + written, timed as the kernels "
            f"are), or a row's copy of at least {DRAM_COPY_BYTES / 1e6:.0f} MB that was faster. Smaller copies fit "
            f"in L2 (the fastest copy of any size here: {gc.fmt(doc.get('largest_copy_gbps'), 0)} GB/s) and do not "
            "count. \"% of peak\" is a row's GB/s over it; \"% of copy\" stays the copy of the row's own bytes, "
            "whose GB/s varies with the size, so it can pass 100.", ""]


def serving_lines(rows):
    served = [r for r in rows if r.get("serving")]
    if not served:
        return []
    headers = ["kernel", "shape", "params", "MB", "µs", "graph µs", "% of copy", "% of peak"]

    def row(r):
        if r["status"] != "measured":
            return [r["kernel"], r["shape_label"], params_label_row(r), gc.fmt(r["bytes"] / 1e6, 3), "-", "-", "-",
                    f"**{(r['error'] or r['status'])[:120]}**"]
        return [r["kernel"], r["shape_label"], params_label_row(r), gc.fmt(r["bytes"] / 1e6, 3), gc.fmt(r["us"], 2),
                gc.fmt(r.get("graph_us"), 2), gc.fmt(r["pct_of_copy"], 0), gc.fmt(r.get("pct_of_peak_copy"), 0)]
    return ["### Serving shapes off the anchors", "",
            "Decode and small-batch sizes (1 and 16 rows of 4096; modulate at 1x1x4096, 1x16x4096, 2x1024x3072), "
            "each at the launch the clients use (rmsnorm at jitd.rmsnorm_threads(dim)). At these sizes the floor "
            "above bounds the back-to-back µs; graph µs is the GPU's time.", "",
            gc.md_table(headers, [row(r) for r in served], set(range(3, 8)))]


def rmsnorm_rule_lines(rows):
    """Per rows x dim, µs at each thread count, the fastest, the rule's pick."""
    groups = {}
    for r in rows:
        if r["request"] == "norm.rmsnorm" and r["status"] == "measured":
            groups.setdefault((r["shape"]["rows"], r["shape"]["dim"]), {})[int(r["params"]["threads"])] = r["us"]
    groups = {k: v for k, v in groups.items() if len(v) > 1}
    if not groups:
        return []
    counts = (128, 256, 512, 1024)
    table = []
    for (n, dim), by in sorted(groups.items(), key=lambda kv: (kv[0][1], -kv[0][0])):
        fastest = min(by, key=by.get)
        rule = gc.LAUNCH_RULES.rmsnorm_threads(dim)
        table.append([f"{n}x{dim}"] + [gc.fmt(by.get(t), 2) for t in counts] + [
            str(fastest), str(rule), gc.fmt(by[rule] / by[fastest], 2) if rule in by else "-"])
    return ["### rmsnorm thread rule", "",
            "jitd.rmsnorm_threads(dim): 128 threads up to dim 2048, 256 up to 8192, 512 up to 16384, then 1024 "
            "(fitted at dims 2048/4096/8192; 16384 and 32768 check the 512 and 1024 bands). µs back-to-back; "
            "rule / fastest = the rule's time over the fastest time (1.00: the rule picked the fastest).", "",
            gc.md_table(["rows x dim"] + [f"{t} µs" for t in counts] + ["fastest", "rule", "rule / fastest"], table,
                        set(range(1, 8)))]


def align_target_lines(doc):
    by = {}
    for r in doc["rows"]:
        s = r["shape"]
        if r["request"] == "moe.align_block_size" and "grid" not in s and "threads" not in s and \
                all(s.get(k) == v for k, v in PEER_ALIGN_ROUTING.items()):
            by[s["tokens"]] = r
    table = []
    for tokens, target in PEER_ALIGN_TARGET_US.items():
        r = by.get(tokens) or {}
        graph_us, us = r.get("graph_us"), r.get("us")
        meets = "-" if graph_us is None else "yes" if graph_us <= target else "no"
        if r.get("status") == "measured" and not r.get("check_ok"):
            meets = "**no: its check failed**"
        elif r and r.get("status") != "measured":
            meets = f"**{(r['error'] or r['status'])[:80]}**"
        table.append([str(tokens), gc.fmt(graph_us, 2), gc.fmt(us, 2), f"{target:.2f}", meets])
    gpu = (doc.get("device") or {}).get("gpu", "unknown")
    return ["### align_block_size against SGLang's kernel (target)", "",
            "Top-8 routing over 256 experts, block 64, at the rule's grid and block. The target column is SGLang's "
            "moe_align_block_size as measured from outside this project on an H100 in CUDA graphs: a TARGET, "
            f"not measured here. The peer was not run here (this run's device: {gpu}), and this benchmark "
            "reimplements nothing of it; compare it with jitd's graph µs, on the same kind of GPU to be fair.", "",
            gc.md_table(["tokens", "jitd graph µs", "jitd µs (back-to-back)", "SGLang target µs (H100, graph)",
                         "graph µs <= target"], table, {1, 2, 3})]


def notes_lines(rows):
    lines = ["### Notes", ""]
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
              "- \"eager\" for align_block_size and align_single_token is a torch reimplementation of their "
              "semantics written in this project (tests/gpu/torch_refs.py), not a peer kernel: their ×eager says "
              "nothing about SGLang's or any other project's kernel.",
              "- check (the cubin's output of the timed launches): " +
              "; ".join(f"{short(k)}: {v}" for k, v in CHECKS.items()) + ".",
              "- align_block_size's bytes: the ids read once (4 × numel) and what the kernel must write: "
              "num_tokens_post_pad entries of sorted_token_ids, num_tokens_post_pad / block_size of expert_ids, "
              "the 4-byte count (the routing ids are fixed by the seed, so the count is known before the run).",
              "- MB is 10^6 bytes and GB/s 10^9 bytes per second; ×eager above 1 means the cubin is faster.", ""]
    for r in rows:
        if r["note"]:
            lines.append(f"- {r['kernel']} {r['shape_label']}: {r['note']}")
    return lines


def one_line(r):
    if r["status"] != "measured":
        return f"{'ERR' if r['error'] else '---'} {r['kernel']} {r['shape_label']} {params_label_row(r)}: " \
               f"{r['error'] or r['status']}"
    return (f"{'ok ' if r['check_ok'] else 'BAD'} {r['kernel']} {r['shape_label']} {params_label_row(r)} "
            f"[{r['path']}]: {r['us']:.2f} µs, graph {gc.fmt(r.get('graph_us'), 2)} µs, {gc.fmt(r['gbps'], 0)} GB/s, "
            f"{gc.fmt(r['pct_of_copy'], 0)}% of copy ({gc.fmt(r['copy_gbps'], 0)} GB/s), "
            f"{gc.fmt(r.get('pct_of_peak_copy'), 0)}% of peak, eager {gc.fmt(r['eager_us'], 2)} µs "
            f"(x{gc.fmt(r['speedup'], 2)}); {r['check']}")


def floor_sample_line(s):
    if s.get("error"):
        return f"ERR launch floor ({s['at']}): {s['error']}"
    return (f"{'ok ' if s.get('check_ok') else 'BAD'} launch floor ({s['at']}): {s['us']:.2f} µs, graph "
            f"{gc.fmt(s.get('graph_us'), 2)} µs, eager {gc.fmt(s.get('eager_us'), 2)} µs; {s.get('check', '')}")
