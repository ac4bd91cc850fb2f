#!/usr/bin/env python3
"""Writes OUT_DIR/report.md from what tests/gpu/run.sh left in OUT_DIR.

    python3 tests/gpu/write_report.py OUT_DIR "COMMAND"
    python3 tests/gpu/write_report.py --gtest-ran test_gpu_kernels.xml

Reads (each may be missing: a step that failed early leaves less, and the
report says so): steps.tsv, host.txt, test_gpu_kernels.xml and .txt,
crosscheck.txt, crosscheck_torch.md and .txt, first_use.json and .txt,
kernel_bench.md and .txt, jitd_stats.txt, jitd.log.

--gtest-ran: run.sh's check that the GPU tests did run (issue 17, item 5):
prints how many tests the XML holds and how many were skipped; exits 0 when
at least one test ran (passed or failed), 1 when none did (all skipped or not
run, or no test at all), 2 when the XML is missing or unreadable.
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
        "## Cross-check of all seven kernels against PyTorch (crosscheck_torch.py)",
        embedded_section(out, "crosscheck_torch.md", "crosscheck_torch.txt", "crosscheck_torch:", "crosscheck_torch.py"),
        "## First-use latency (first_use.py)",
        first_use_section(out),
        "## Kernel benchmark: jitd's cubins vs a device copy and eager PyTorch (kernel_bench.py)",
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
