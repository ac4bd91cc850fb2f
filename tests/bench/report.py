#!/usr/bin/env python3
"""Merges the JSON of jitd's benchmarks into one table (stdout), one JSON
file and one Markdown table; with --repeat, combines several such runs.

  python3 tests/bench/report.py [--out bench.json] [--markdown bench.md] [--check] FILE...
  python3 tests/bench/report.py --repeat [--out bench-repeat.json] [--markdown bench-repeat.md]
                                [--check] RUN_JSON...

Each FILE is either a jitd benchmark's --json output (figures, each with its
baseline, ratio and target, and an optional latency-vs-concurrency curve) or
Google Benchmark's JSON (bench_cache_lookup's --benchmark_out), whose lookup
times are set beside the floors measured in the same run.

With --repeat, each RUN_JSON is one run's merged JSON (the --out above). Per
figure it shows every run's value, their median, min and max, and judges
the median: its ratio to the median baseline against the figure's target.

--check: exit 3 when a figure misses its target (with --repeat, its median),
after one "missed: ..." line per such figure on stderr. Without --check the
table marks a miss NO and the exit status is 0.
"""
import argparse
import json
import platform
import re
import statistics
import subprocess
import sys

EXIT_MISSED = 3
# The target texts bench_report.cpp writes: "<= 1.25x", ">= 0.80x" (the
# ratio to the baseline), "<= 200.0 ms", "<= 1.0 " (the value, in its unit).
TARGET = re.compile(r"^(<=|>=) (-?[0-9]+(?:\.[0-9]*)?)(x| .*)$")


def fmt_number(value):
    if value is None:
        return ""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def fmt_value(value, unit):
    if value is None:
        return ""
    return f"{fmt_number(value)} {unit}".strip()


def ratio(value, baseline_value):
    """value / baseline_value, as Figure::ratio(); None without a baseline."""
    if value is None or not baseline_value:
        return None
    return value / baseline_value


def parse_target(target):
    """(op, bound, on_ratio) of a target text; None for no target."""
    if not target:
        return None
    m = TARGET.match(target)
    if not m:
        raise ValueError(f"unknown target {target!r}")
    return m.group(1), float(m.group(2)), m.group(3) == "x"


def target_met(target, value, figure_ratio, runs=()):
    """Whether `value` (its ratio `figure_ratio`) meets `target`, a target
    text as above; None when there is no target. The text shows the bound
    rounded (2 decimals for a ratio, 1 or 0 for a value: "<= 0.56x" is
    1/1.8), so `runs`, (value, ratio, met) as benchmarks judged them with
    the exact bound, decide first: one as good that missed, or one no
    better that met. The rounded bound judges the rest."""
    parsed = parse_target(target)
    if parsed is None:
        return None
    op, bound, on_ratio = parsed

    def judged(v, r):  # Figure::ratio() is 0 without a baseline, and a ratio target judges that.
        return (r or 0) if on_ratio else v

    def as_good(a, b):
        return a <= b if op == "<=" else a >= b

    q = judged(value, figure_ratio)
    if q is None:
        return False
    known = [(judged(v, r), met) for v, r, met in runs if met is not None and v is not None]
    if any(not met and as_good(rq, q) for rq, met in known):
        return False
    if any(met and as_good(q, rq) for rq, met in known):
        return True
    return as_good(q, bound)


def cache_lookup_figures(data):
    """Rows for bench_cache_lookup: hit and miss beside the two floors."""
    times = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if b.get("aggregate_name", "median") != "median" and b.get("run_type") == "aggregate":
            continue
        unit = b.get("time_unit", "ns")
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[unit]
        times[name.split("/")[0]] = b["real_time"] * scale
    floor_sql = times.get("BM_Floor_SqlitePointLookup")
    floor_read = times.get("BM_Floor_ReadAndHashBlob")
    rows = []
    if "BM_LookupHit" in times and floor_sql and floor_read:
        floor = floor_sql + floor_read
        rows.append({"figure": "cache lookup hit (index + blob + XXH3)", "unit": "us",
                     "value": times["BM_LookupHit"], "baseline": "floor: SQLite lookup + read + XXH3",
                     "baseline_value": floor, "ratio": ratio(times["BM_LookupHit"], floor), "target": "",
                     "met": None,
                     "note": f"floors: SQLite point lookup {floor_sql:.1f} us, open+read+XXH3 {floor_read:.1f} us"})
    floor_miss = times.get("BM_Floor_SqlitePointMiss")
    if "BM_LookupMiss" in times and floor_miss:
        rows.append({"figure": "cache lookup miss", "unit": "us", "value": times["BM_LookupMiss"],
                     "baseline": "floor: SQLite point lookup of an absent key", "baseline_value": floor_miss,
                     "ratio": ratio(times["BM_LookupMiss"], floor_miss), "target": "", "met": None, "note": ""})
    context = data.get("context", {})
    return {"bench": "bench_cache_lookup",
            "command": "build/tests/bench/bench_cache_lookup --benchmark_repetitions=3 "
                       "--benchmark_report_aggregates_only=true",
            "context": {"entries": "JITD_BENCH_ENTRIES (default 100000) of 16 KiB",
                        "machine": f"{context.get('num_cpus', '?')} CPUs"},
            "figures": rows, "curve": []}


def load(path):
    with open(path) as f:
        data = json.load(f)
    if "benchmarks" in data:  # Google Benchmark
        return cache_lookup_figures(data)
    return data


def git_revision():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def combine(runs):
    """One entry per figure of the merged runs `runs`, in first-seen order:
    every run's value and verdict (None where a run lacks the figure),
    median, min, max, the median baseline, the medians' ratio and whether
    it meets the target."""
    entries = {}
    for i, merged in enumerate(runs):
        for bench in merged["benches"]:
            for f in bench["figures"]:
                key = (bench["bench"], f["figure"])
                if key not in entries:
                    entries[key] = {"bench": bench["bench"], "figure": f["figure"], "unit": f["unit"],
                                    "runs": [None] * len(runs), "runs_met": [None] * len(runs),
                                    "baseline": f.get("baseline", ""), "baseline_runs": [None] * len(runs),
                                    "target": f.get("target", "")}
                entries[key]["runs"][i] = f["value"]
                entries[key]["runs_met"][i] = f.get("met")
                entries[key]["baseline_runs"][i] = f.get("baseline_value")
    for e in entries.values():
        values = [v for v in e["runs"] if v is not None]
        baselines = [v for v in e["baseline_runs"] if v is not None]
        e["median"] = statistics.median(values) if values else None
        e["min"] = min(values) if values else None
        e["max"] = max(values) if values else None
        e["baseline_median"] = statistics.median(baselines) if baselines and e["baseline"] else None
        e["ratio"] = ratio(e["median"], e["baseline_median"])
        evidence = [(v, ratio(v, b) if e["baseline"] else None, met)
                    for v, b, met in zip(e["runs"], e["baseline_runs"], e["runs_met"])]
        e["met"] = target_met(e["target"], e["median"], e["ratio"], evidence)
    return list(entries.values())


def verdict(met):
    return "" if met is None else ("yes" if met else "NO")


def single_table(benches):
    """(header, rows) of one run; a row is (bench, cells, note)."""
    header = ("figure", "value", "baseline", "baseline value", "ratio", "target", "met")
    rows = []
    for bench in benches:
        for f in bench["figures"]:
            r = f.get("ratio")
            rows.append((bench["bench"], (f["figure"], fmt_value(f["value"], f["unit"]), f.get("baseline", ""),
                                          fmt_value(f.get("baseline_value"), f["unit"]) if f.get("baseline") else "",
                                          f"{r:.2f}x" if r else "", f.get("target", ""), verdict(f.get("met"))),
                         f.get("note", "")))
    return header, rows


def repeat_table(entries):
    """(header, rows) of combined runs; a row is (bench, cells, note)."""
    header = ("figure", "runs", "median", "min", "max", "median baseline", "ratio", "target", "met")
    rows = []
    for e in entries:
        runs = ", ".join("-" if v is None else fmt_number(v) for v in e["runs"])
        r = e["ratio"]
        rows.append((e["bench"], (e["figure"], runs, fmt_value(e["median"], e["unit"]),
                                  fmt_value(e["min"], e["unit"]), fmt_value(e["max"], e["unit"]),
                                  fmt_value(e["baseline_median"], e["unit"]), f"{r:.2f}x" if r else "",
                                  e["target"], verdict(e["met"])), ""))
    return header, rows


def print_table(header, rows):
    widths = [max(len(h), *(len(r[1][i]) for r in rows)) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    current = None
    for bench, cells, _ in rows:
        if bench != current:
            current = bench
            print(f"[{current}]")
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)))


def write_markdown(path, header, rows, commands, preface=""):
    with open(path, "w") as f:
        f.write(preface)
        f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for _, cells, _ in rows:
            f.write("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n")
        notes = [f"- {cells[0]}: {note}\n" for _, cells, note in rows if note]
        if notes:
            f.write("\nNotes:\n\n" + "".join(notes))
        f.write("\nCommands:\n\n")
        for command in commands:
            f.write(f"- `{command}`\n")
    print(f"wrote {path}")


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    print(f"wrote {path}")


def judged(figures, what="value"):
    """(figure, "value 1.2 ms", ratio, target, met) of each figure with a
    target; `what` names the value judged."""
    return [(f["figure"], f"{what} {fmt_value(f['value'], f['unit'])}", f.get("ratio"), f["target"], f["met"])
            for f in figures if f.get("met") is not None]


def summarize(judgements):
    """Prints how many targets were met; returns "missed: ..." lines."""
    missed = [j for j in judgements if not j[4]]
    print(f"\n{len(judgements) - len(missed)} of {len(judgements)} targets met" +
          (": missed " + "; ".join(j[0] for j in missed) if missed else ""))
    return [f"missed: {figure} {value}" + (f" (ratio {r:.2f}x)" if r and parse_target(target)[2] else "") +
            f", target {target}" for figure, value, r, target, _ in missed]


def report_single(args):
    benches = [load(p) for p in args.files]
    header, rows = single_table(benches)
    print_table(header, rows)
    missed = summarize(judged([f for b in benches for f in b["figures"]]))
    if args.out:
        write_json(args.out, {"revision": git_revision(), "host": platform.node(), "benches": benches})
    if args.markdown:
        write_markdown(args.markdown, header, rows, [b["command"] for b in benches])
    return missed


def report_repeat(args):
    runs = [load(p) for p in args.files]
    entries = combine(runs)
    header, rows = repeat_table(entries)
    print(f"medians of {len(runs)} runs ({', '.join(args.files)})")
    print_table(header, rows)
    missed = summarize(judged([dict(e, value=e["median"]) for e in entries], "median"))
    if args.out:
        write_json(args.out, {"revision": runs[0].get("revision", git_revision()), "host": platform.node(),
                              "run_files": args.files, "figures": entries})
    if args.markdown:
        commands = [b["command"] for b in runs[0]["benches"]]
        write_markdown(args.markdown, header, rows, commands,
                       f"Medians of {len(runs)} runs; a target is judged on the median.\n\n")
    return missed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--out", help="write the merged JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")
    parser.add_argument("--repeat", action="store_true", help="FILEs are merged runs: combine them")
    parser.add_argument("--check", action="store_true", help=f"exit {EXIT_MISSED} when a target is missed")
    args = parser.parse_args()
    missed = report_repeat(args) if args.repeat else report_single(args)
    for line in missed:
        print(line, file=sys.stderr)
    return EXIT_MISSED if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
