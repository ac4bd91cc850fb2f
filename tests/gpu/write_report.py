#!/usr/bin/env python3
"""Writes OUT_DIR/report.md from what tests/gpu/run.sh left in OUT_DIR.

    python3 tests/gpu/write_report.py OUT_DIR "COMMAND"
    python3 tests/gpu/write_report.py --gtest-ran test_gpu_kernels.xml

Reads (each may be missing: a step that failed early leaves less, and the
report says so): steps.tsv, host.txt, test_gpu_kernels.xml and .txt,
crosscheck.txt, crosscheck_torch.md and .txt, first_use.json and .txt,
kernel_bench.md, .json and .txt, jitd_stats.txt, jitd.log.

--gtest-ran: run.sh's check that the GPU tests did run (issue 17, item 5):
prints how many tests the XML holds and how many were skipped; exits 0 when
at least one test ran (passed or failed), 1 when none did (all skipped or not
run, or no test at all), 2 when the XML is missing or unreadable.
Standard library only (and first_use.py's p50 and p90, beside it).
"""
import datetime
import json
import os
import sys
import xml.etree.ElementTree as ET

from first_use import p50, p90

REFERENCE_ROW = "(a) jitd, cached"
# kernel_bench.py's eager for these is not a PyTorch op nor a peer kernel but
# this project's torch code (its eager_op names torch_refs); used when
# kernel_bench.json is missing.
PROJECT_EAGER = {"align_block_size": "torch_refs.torch_align_block_size",
                 "align_single_token": "torch_refs.torch_align_single_token"}
MAX_FAILURES_SHOWN = 25


def read(out, name):
    try:
        with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def block(text, limit=None):
    if text is None:
        return "_(missing)_\n"
    lines = text.rstrip("\n").splitlines()
    if limit is not None and len(lines) > limit:
        lines = [f"... ({len(lines) - limit} earlier lines in the log)"] + lines[-limit:]
    return "```\n" + "\n".join(lines) + "\n```\n"


def steps_section(out):
    text = read(out, "steps.tsv")
    if text is None:
        return "_(steps.tsv missing)_\n"
    rows = [line.split("\t") for line in text.splitlines()[1:] if line]
    lines = ["| step | result | seconds | log |", "|---|---|---:|---|"]
    for r in rows:
        r += [""] * (4 - len(r))
        lines.append(f"| {r[0]} | {'**' + r[1] + '**' if r[1] != 'passed' else r[1]} | {r[2]} | `{r[3]}` |")
    return "\n".join(lines) + "\n"


def gtest_cases(text):
    """(suite, name, result, time, messages) per test case of a gtest XML;
    result is passed, FAILED or skipped (skipped and not run alike)."""
    root = ET.fromstring(text)
    cases = []
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            failures = case.findall("failure") + case.findall("error")
            if failures:
                result = "FAILED"
            elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
                result = "skipped"
            else:
                result = "passed"
            skip = case.find("skipped")
            messages = [f.get("message") or f.text or "" for f in failures]
            if skip is not None:
                messages = [skip.get("message") or skip.text or ""]
            cases.append((case.get("classname", suite.get("name", "")), case.get("name", ""), result,
                          case.get("time", ""), messages))
    return cases


def gtest_ran(path):
    """--gtest-ran: 0 when a test ran, 1 when none did, 2 without a readable XML."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            cases = gtest_cases(f.read())
    except (OSError, ET.ParseError) as error:
        print(f"no readable gtest XML: {error}")
        return 2
    skipped = [c for c in cases if c[2] == "skipped"]
    ran = len(cases) - len(skipped)
    reason = ""
    if skipped and skipped[0][4] and skipped[0][4][0]:
        why = skipped[0][4][0].strip().splitlines()[-1]
        reason = "; first reason: " + (why if len(why) <= 160 else why[:157] + "...")
    print(f"{len(cases)} tests, {ran} ran, {len(skipped)} skipped{reason}")
    return 0 if ran > 0 else 1


def gtest_section(out):
    text = read(out, "test_gpu_kernels.xml")
    if text is None:
        return "_(test_gpu_kernels.xml missing: the test program did not finish; its output follows)_\n\n" + block(
            read(out, "test_gpu_kernels.txt"), 60)
    try:
        cases = gtest_cases(text)
    except ET.ParseError as error:
        return f"_(test_gpu_kernels.xml unreadable: {error}; the test output follows)_\n\n" + block(
            read(out, "test_gpu_kernels.txt"), 60)
    counts = {r: sum(1 for c in cases if c[2] == r) for r in ("passed", "FAILED", "skipped")}
    lines = [f"**{len(cases)} tests: {counts['passed']} passed, {counts['FAILED']} failed, "
             f"{counts['skipped']} skipped** (test_gpu_kernels, gtest XML `test_gpu_kernels.xml`)", ""]

    # Per kernel test (suite and test name without the case).
    groups = {}
    for suite, name, result, _, _ in cases:
        key = (suite.split("/")[-1], name.split("/")[0])
        groups.setdefault(key, {"passed": 0, "FAILED": 0, "skipped": 0})[result] += 1
    lines += ["| test | passed | failed | skipped |", "|---|---:|---:|---:|"]
    for (suite, name), c in groups.items():
        lines.append(f"| {suite}.{name} | {c['passed']} | {c['FAILED']} | {c['skipped']} |")
    lines.append("")

    failed = [c for c in cases if c[2] == "FAILED"]
    if failed:
        lines.append("### Failures")
        for suite, name, _, _, messages in failed[:MAX_FAILURES_SHOWN]:
            lines.append(f"- `{suite}.{name}`")
            lines.append(block("\n".join(messages)[:3000]))
        if len(failed) > MAX_FAILURES_SHOWN:
            lines.append(f"... and {len(failed) - MAX_FAILURES_SHOWN} more failures: see test_gpu_kernels.txt\n")
    skipped = [c for c in cases if c[2] == "skipped"]
    if skipped:
        reason = skipped[0][4][0].splitlines()[-1] if skipped[0][4] and skipped[0][4][0] else "(none given)"
        lines.append(f"Skipped, first reason: {reason}")
        lines.append("")

    lines += ["<details><summary>Every test and case</summary>", "", "| test | case | result | s |", "|---|---|---|---:|"]
    for suite, name, result, time, _ in cases:
        test, _, case = name.partition("/")
        lines.append(f"| {suite.split('/')[-1]}.{test} | {case or '-'} | {result} | {time} |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def crosscheck_section(out):
    text = read(out, "crosscheck.txt")
    if text is None:
        return "_(crosscheck.txt missing)_\n"
    summary = [line for line in text.splitlines() if line.startswith("crosscheck:")]
    head = f"**{summary[-1]}**\n\n" if summary else "**no summary line: crosscheck.py did not finish (output below)**\n\n"
    return head + block(text, 120)


def embedded_section(out, name, log, summary_prefix, what):
    """A section a script wrote itself (NAME.md), with its summary line from
    its log; without the .md, the log's last lines."""
    text = read(out, log)
    summary = [line for line in (text or "").splitlines() if line.startswith(summary_prefix)]
    head = f"`{summary[-1]}`\n\n" if summary else ""
    md = read(out, name)
    if md is not None:
        return head + md + "\n"
    return (head + f"_({name} missing: {what} did not write its section; the end of `{log}` follows)_\n\n"
            + block(text, 60))


def fmt_ms(v, digits=2):
    return "-" if v is None or v != v else f"{v:.{digits}f}"


def first_use_phases(rows):
    """Per path that tests/gpu/first_use timed, each phase's p50 and p90 over
    the runs as recorded (older JSON: (a)'s medians only)."""
    lines = ["| path | phase | p50 ms | p90 ms |", "|---|---|---:|---:|"]
    for name, r in rows.items():
        runs = [d for d in r.get("runs", []) if isinstance(d, dict)]
        if runs:
            for phase in runs[0].get("phases_ms", {}):
                xs = [d["phases_ms"][phase] for d in runs if phase in d.get("phases_ms", {})]
                lines.append(f"| {name} | {phase} | {fmt_ms(p50(xs), 3)} | {fmt_ms(p90(xs), 3)} |")
            share = r.get("jitd_share_runs_ms")
            if share:
                lines.append(f"| {name} | jitd's share (all but module_load and get_function) | "
                             f"{fmt_ms(p50(share), 3)} | {fmt_ms(p90(share), 3)} |")
        elif r.get("phases_median_ms"):  # an older first_use.json: medians only
            for phase, ms in r["phases_median_ms"].items():
                lines.append(f"| {name} | {phase} | {fmt_ms(ms, 3)} | - |")
            if r.get("jitd_share_median_ms") is not None:
                lines.append(f"| {name} | jitd's share (all but module_load and get_function) | "
                             f"{fmt_ms(r['jitd_share_median_ms'], 3)} | - |")
    return lines if len(lines) > 2 else []


def first_use_kernel(kernel, rows):
    ref = p50(rows.get(REFERENCE_ROW, {}).get("runs_ms", []))
    n = max((len(r.get("runs_ms", [])) for r in rows.values()), default=0)
    rank = -(-9 * n // 10)
    parts = [f"**{kernel}** ({n} fresh processes per path, CUDA initialised before the clock; p50: the median; "
             f"p90: the nearest rank, with {n} runs the {'slowest' if rank == n else f'{rank}-th fastest'})\n",
             "| path | p50 ms | p90 ms | p50 x (a) | runs (ms) |", "|---|---:|---:|---:|---|"]
    for name, r in rows.items():
        xs = r.get("runs_ms", [])
        ratio = f"{p50(xs) / ref:.1f}" if xs and ref == ref and ref else "-"
        parts.append(f"| {name} | {fmt_ms(p50(xs))} | {fmt_ms(p90(xs))} | {ratio} | "
                     f"{', '.join(f'{x:.2f}' if x < 10 else f'{x:.1f}' for x in xs)} |")
    phases = first_use_phases(rows)
    if phases and any(r.get("runs") for r in rows.values()):
        parts += ["", "Phases as each run recorded them (tests/gpu/first_use's JSON line per run, kept whole in "
                  "first_use.json), p50 and p90 over the runs per phase: the phases' p50s need not add up to "
                  "the total's.", ""] + phases
    elif phases:
        parts += ["", "(a)'s phase medians only: this first_use.json predates per-run phases, so no p90.", ""] + phases
    return parts + [""]


def first_use_section(out):
    parts = []
    doc = read(out, "first_use.json")
    if doc is not None:
        for kernel, rows in json.loads(doc).items():
            parts += first_use_kernel(kernel, rows)
    else:
        parts.append("_(first_use.json missing: first_use.py did not finish; its output follows)_\n")
    parts.append(block(read(out, "first_use.txt"), 80))
    return "\n".join(parts)


def bench_eager_note(out):
    """For the kernels whose eager is this project's torch code (the MoE
    align kernels), what that eager is, before the benchmark's ×eager."""
    found = {}
    try:
        bench = json.loads(read(out, "kernel_bench.json") or "{}")
    except ValueError:
        bench = {}
    for r in bench.get("rows", []) if isinstance(bench, dict) else []:
        if isinstance(r, dict) and "torch_refs" in str(r.get("eager_op") or ""):
            found.setdefault(r.get("kernel", "?"), []).append(r.get("speedup"))
    kernels = found or {k: [] for k in PROJECT_EAGER}
    lines = []
    for kernel, speedups in kernels.items():
        measured = [x for x in speedups if isinstance(x, (int, float))]
        span = (f": ×eager {min(measured):.1f} to {max(measured):.1f} over {len(measured)} cases" if measured
                else "")
        lines.append(f"> **{kernel}{span}.** Its \"eager\" is not a PyTorch op nor a peer kernel (such as "
                     f"sglang's or vLLM's): it is a torch reimplementation of the semantics written in this project "
                     f"(tests/gpu/torch_refs.py, {PROJECT_EAGER.get(kernel, 'torch_refs')}). A ×eager above 1 "
                     f"says the cubin is faster than that reimplementation, nothing about a production kernel.")
    return "\n>\n".join(lines) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--gtest-ran":
        return gtest_ran(sys.argv[2])
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, command = sys.argv[1], sys.argv[2]
    steps = read(out, "steps.tsv") or ""
    all_passed = all(line.split("\t")[1] == "passed" for line in steps.splitlines()[1:] if line)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = [
        "# jitd on the GPU: kernels, cross-checks, first-use latency, kernel benchmark",
        "",
        f"Produced by `{command}` on {now}. Overall: **{'all steps passed' if all_passed else 'SOME STEPS FAILED'}**.",
        "",
        "## Steps",
        steps_section(out),
        "## Host",
        block(read(out, "host.txt")),
        "## Every kernel through daemon, client, module load and launch vs the CPU references",
        gtest_section(out),
        "## Cross-check: CuPy RawModule and eager PyTorch (crosscheck.py)",
        crosscheck_section(out),
        "## Cross-check of all seven kernels: eager PyTorch ops, jitd's formulas in torch, the MoE semantics "
        "(crosscheck_torch.py)",
        embedded_section(out, "crosscheck_torch.md", "crosscheck_torch.txt", "crosscheck_torch:", "crosscheck_torch.py"),
        "## First-use latency (first_use.py)",
        first_use_section(out),
        "## Kernel benchmark: jitd's cubins vs a device copy and eager PyTorch (kernel_bench.py)",
        bench_eager_note(out),
        embedded_section(out, "kernel_bench.md", "kernel_bench.txt", "kernel_bench:", "kernel_bench.py"),
        "## The daemon's account (jitctl stats, before SIGTERM)",
        block(read(out, "jitd_stats.txt")),
        "## jitd log (last lines)",
        block(read(out, "jitd.log"), 40),
    ]
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
