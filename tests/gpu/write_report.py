#!/usr/bin/env python3
"""Writes OUT_DIR/report.md from what tests/gpu/run.sh left in OUT_DIR.

    python3 tests/gpu/write_report.py OUT_DIR "COMMAND"

Reads (each may be missing: a step that failed early leaves less, and the
report says so): steps.tsv, host.txt, test_gpu_kernels.xml and .txt,
crosscheck.txt, first_use.json and .txt, jitd_stats.txt, jitd.log.
Standard library only.
"""
import datetime
import json
import os
import sys
import xml.etree.ElementTree as ET

REFERENCE_ROW = "(a) jitd, cached"
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


def gtest_section(out):
    text = read(out, "test_gpu_kernels.xml")
    if text is None:
        return "_(test_gpu_kernels.xml missing: the test program did not finish; its output follows)_\n\n" + block(
            read(out, "test_gpu_kernels.txt"), 60)
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


def first_use_section(out):
    parts = []
    doc = read(out, "first_use.json")
    if doc is not None:
        results = json.loads(doc)
        for kernel, rows in results.items():
            ref = rows.get(REFERENCE_ROW, {}).get("median_ms")
            parts.append(f"**{kernel}** (medians over fresh processes, CUDA initialised before the clock)\n")
            parts.append("| path | median ms | x (a) | runs (ms) |")
            parts.append("|---|---:|---:|---|")
            for name, r in rows.items():
                med = r.get("median_ms", float("nan"))
                ratio = f"{med / ref:.1f}" if ref else "-"
                runs = ", ".join(f"{x:.1f}" for x in r.get("runs_ms", []))
                parts.append(f"| {name} | {med:.2f} | {ratio} | {runs} |")
            parts.append("")
    else:
        parts.append("_(first_use.json missing: first_use.py did not finish; its output follows)_\n")
    parts.append(block(read(out, "first_use.txt"), 80))
    return "\n".join(parts)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, command = sys.argv[1], sys.argv[2]
    steps = read(out, "steps.tsv") or ""
    all_passed = all(line.split("\t")[1] == "passed" for line in steps.splitlines()[1:] if line)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = [
        "# jitd on the GPU: kernels, cross-checks, first-use latency",
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
        "## First-use latency (first_use.py)",
        first_use_section(out),
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
