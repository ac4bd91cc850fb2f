#!/usr/bin/env python3
"""Merges the JSON of jitd's benchmarks into one table (stdout), one JSON
file and one Markdown table.

  python3 tests/bench/report.py [--out bench.json] [--markdown bench.md] FILE...

Each FILE is either a jitd benchmark's --json output (figures, each with its
baseline, ratio and target, and an optional latency-vs-concurrency curve) or
Google Benchmark's JSON (bench_cache_lookup's --benchmark_out), whose lookup
times are set beside the floors measured in the same run.
"""
import argparse
import json
import platform
import subprocess
import sys


def fmt_value(value, unit):
    if value is None:
        return ""
    text = f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}"
    return f"{text} {unit}".strip()


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
                     "baseline_value": floor, "ratio": times["BM_LookupHit"] / floor, "target": "", "met": None,
                     "note": f"floors: SQLite point lookup {floor_sql:.1f} us, open+read+XXH3 {floor_read:.1f} us"})
    floor_miss = times.get("BM_Floor_SqlitePointMiss")
    if "BM_LookupMiss" in times and floor_miss:
        rows.append({"figure": "cache lookup miss", "unit": "us", "value": times["BM_LookupMiss"],
                     "baseline": "floor: SQLite point lookup of an absent key", "baseline_value": floor_miss,
                     "ratio": times["BM_LookupMiss"] / floor_miss, "target": "", "met": None, "note": ""})
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--out", help="write the merged JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")
    args = parser.parse_args()

    benches = [load(p) for p in args.files]
    header = ("figure", "value", "baseline", "baseline value", "ratio", "target", "met")
    rows = []
    for bench in benches:
        for f in bench["figures"]:
            ratio = f.get("ratio")
            met = f.get("met")
            rows.append((bench["bench"], f["figure"], fmt_value(f["value"], f["unit"]), f.get("baseline", ""),
                         fmt_value(f.get("baseline_value"), f["unit"]) if f.get("baseline") else "",
                         f"{ratio:.2f}x" if ratio else "", f.get("target", ""),
                         "" if met is None else ("yes" if met else "NO"), f.get("note", "")))

    widths = [max(len(h), *(len(r[i + 1]) for r in rows)) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    current = None
    for r in rows:
        if r[0] != current:
            current = r[0]
            print(f"[{current}]")
        print("  ".join(c.ljust(w) for c, w in zip(r[1:8], widths)))
    targets = [r for r in rows if r[7]]
    missed = [r for r in targets if r[7] == "NO"]
    print(f"\n{len(targets) - len(missed)} of {len(targets)} targets met" +
          (": missed " + "; ".join(r[1] for r in missed) if missed else ""))

    merged = {"revision": git_revision(), "host": platform.node(), "benches": benches}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(merged, f, indent=2)
        print(f"wrote {args.out}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
            for r in rows:
                f.write("| " + " | ".join(c.replace("|", "\\|") for c in r[1:8]) + " |\n")
            f.write("\nNotes:\n\n")
            for r in rows:
                if r[8]:
                    f.write(f"- {r[1]}: {r[8]}\n")
            f.write("\nCommands:\n\n")
            for bench in benches:
                f.write(f"- `{bench['command']}`\n")
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
