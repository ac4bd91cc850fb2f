#!/usr/bin/env python3
"""Draws latency vs concurrency for jitd and the echo floor from the merged
benchmark JSON (tests/bench/run.sh writes it) into a PNG.

  python3 tests/bench/plot.py bench-results/bench.json docs/performance/latency_vs_concurrency.png

Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: needs matplotlib (apt-get install python3-matplotlib)", file=sys.stderr)
        return 1
    with open(sys.argv[1]) as f:
        merged = json.load(f)
    curve = [p for b in merged["benches"] for p in b.get("curve", [])]
    if not curve:
        print("plot.py: no latency-vs-concurrency points in " + sys.argv[1], file=sys.stderr)
        return 1
    fig, (lat, thr) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"jitd": ("tab:blue", "o"), "echo": ("tab:gray", "s")}
    for server in ("jitd", "echo"):
        points = sorted((p for p in curve if p["server"] == server), key=lambda p: p["clients"])
        if not points:
            continue
        color, marker = styles.get(server, (None, "x"))
        label = "jitd warm hit" if server == "jitd" else "gRPC echo (floor)"
        clients = [p["clients"] for p in points]
        lat.plot(clients, [p["p50_us"] for p in points], color=color, marker=marker, label=f"{label} p50")
        lat.plot(clients, [p["p99_us"] for p in points], color=color, marker=marker, linestyle="--",
                 label=f"{label} p99")
        thr.plot(clients, [p["calls_per_s"] for p in points], color=color, marker=marker, label=label)
    for ax in (lat, thr):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent clients (a channel each)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    lat.set_yscale("log")
    lat.set_ylabel("latency per call (us)")
    lat.set_title("16 KiB cubin, Unix socket: latency")
    thr.set_ylabel("calls/s")
    thr.set_title("throughput")
    fig.suptitle(f"jitd vs a bare gRPC echo server, same host, same run (rev {merged.get('revision', '?')})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(f"wrote {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
