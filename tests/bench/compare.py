#!/usr/bin/env python3
"""Runs jitd's benchmarks of two builds side by side, in one run, and prints
every figure of both with the change between them.

  python3 tests/bench/compare.py --base BUILD_DIR --head BUILD_DIR [--out DIR]
                                 [--benches bench_serving,bench_cold,...]
                                 [--repeat N] [--quick]

Each build's benchmarks run against that build's own jitd (the benchmarks
start the daemon they were built with). Runs alternate base, head, head,
base, ... (N of each, N = --repeat, default 2), so that drift of a noisy
machine falls on both sides alike. For each figure it prints the median of
the N values per build, head/base, and each build's ratio to its in-run
baseline (the figure's own comparison). Every run's JSON is kept under
--out (default bench-compare/), and the summary is written there as
compare.json and compare.md.

Exit status: 0 when every run finished, 1 when one failed, 2 on usage.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# The arguments run.sh gives each benchmark for a full run, and for --quick.
FULL = {"bench_serving": [], "bench_cold": [], "bench_first_use": ["--rounds", "41"], "bench_warmup": [],
        "bench_start": []}
QUICK = {"bench_serving": ["--calls", "40", "--large-calls", "8", "--seconds", "0.2"],
         "bench_cold": ["--rounds", "1"], "bench_first_use": ["--rounds", "3"], "bench_warmup": ["--rounds", "1",
                                                                                                 "--quick"],
         "bench_start": ["--entries", "2000", "--rounds", "1"]}


def revision(build):
    """The source revision a build directory was configured from."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            source = next(line.split("=", 1)[1].strip() for line in f if line.startswith("CMAKE_HOME_DIRECTORY"))
        return subprocess.run(["git", "-C", source, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, StopIteration, subprocess.CalledProcessError):
        return "unknown"


def run_one(build, bench, args, out_json, log):
    command = [os.path.join(build, "tests", "bench", bench), "--json", out_json] + args
    with open(log, "w") as f:
        done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.stderr.write(f"compare.py: {' '.join(command)} failed ({done.returncode}); log: {log}\n")
        return None
    with open(out_json) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="build directory of the base (e.g. the parent commit)")
    parser.add_argument("--head", required=True, help="build directory of the change")
    parser.add_argument("--out", default="bench-compare")
    parser.add_argument("--benches", default="bench_serving,bench_cold,bench_first_use")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="few calls each: checks that it runs")
    args = parser.parse_args()
    benches = [b for b in args.benches.split(",") if b]
    for b in benches:
        if b not in FULL:
            parser.error(f"unknown benchmark {b!r}; one of {', '.join(FULL)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    builds = {"base": os.path.abspath(args.base), "head": os.path.abspath(args.head)}
    revisions = {side: revision(path) for side, path in builds.items()}
    print(f"base {revisions['base']} ({builds['base']})\nhead {revisions['head']} ({builds['head']})")

    # figures[bench][figure][side] -> list of (value, own ratio)
    figures = {}
    units = {}
    order = []
    for bench in benches:
        extra = (QUICK if args.quick else FULL)[bench]
        sides = []
        for i in range(args.repeat):
            sides += ["base", "head"] if i % 2 == 0 else ["head", "base"]
        for n, side in enumerate(sides):
            stem = os.path.join(args.out, f"{bench}-{side}-{n}")
            print(f"== {bench} {side} ({n + 1}/{len(sides)})", flush=True)
            data = run_one(builds[side], bench, extra, stem + ".json", stem + ".log")
            if data is None:
                return 1
            for f in data["figures"]:
                name = f["figure"]
                if (bench, name) not in units:
                    units[(bench, name)] = f["unit"]
                    order.append((bench, name))
                figures.setdefault(bench, {}).setdefault(name, {}).setdefault(side, []).append(
                    (f["value"], f.get("ratio")))

    rows = []
    for bench, name in order:
        per = figures[bench][name]
        if "base" not in per or "head" not in per:
            continue
        med = {s: statistics.median(v for v, _ in per[s]) for s in ("base", "head")}
        own = {s: [r for _, r in per[s] if r] for s in ("base", "head")}
        rows.append({"bench": bench, "figure": name, "unit": units[(bench, name)],
                     "base": med["base"], "head": med["head"],
                     "base_values": [v for v, _ in per["base"]], "head_values": [v for v, _ in per["head"]],
                     "head_over_base": med["head"] / med["base"] if med["base"] else None,
                     "base_own_ratio": statistics.median(own["base"]) if own["base"] else None,
                     "head_own_ratio": statistics.median(own["head"]) if own["head"] else None})

    def fmt(x, unit=""):
        if x is None:
            return ""
        return (f"{x:.0f}" if abs(x) >= 1000 else f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}") + (f" {unit}" if unit
                                                                                                else "")

    header = ["figure", "base", "head", "head/base", "base own ratio", "head own ratio"]
    table = [[f"{r['bench']}: {r['figure']}", fmt(r["base"], r["unit"]), fmt(r["head"], r["unit"]),
              fmt(r["head_over_base"]) + ("x" if r["head_over_base"] else ""),
              fmt(r["base_own_ratio"]) + ("x" if r["base_own_ratio"] else ""),
              fmt(r["head_own_ratio"]) + ("x" if r["head_own_ratio"] else "")] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths)))
    print(f"(medians of {args.repeat} runs per build, alternated; own ratio: the figure against its in-run "
          "baseline, lower is better for times)")
    # Revisions, not build paths: a kept summary must not name this machine's directories.
    summary = {"base": {"revision": revisions["base"]}, "head": {"revision": revisions["head"]}, "repeat": args.repeat,
               "quick": args.quick, "figures": rows}
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(f"base `{revisions['base']}`, head `{revisions['head']}`, {args.repeat} runs each, alternated "
                f"(`python3 tests/bench/compare.py --base ... --head ... --repeat {args.repeat}`)\n\n")
        f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for t in table:
            f.write("| " + " | ".join(t) + " |\n")
    print(f"wrote {args.out}/compare.json, {args.out}/compare.md and every run's JSON and log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
