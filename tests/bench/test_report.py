#!/usr/bin/env python3
"""report.py and run.sh's --repeat and --check, without running a benchmark:
report.py's target judgement, median, min and max on made-up figures, and
run.sh --no-build on fake benchmark programs (shell scripts that write the
JSON bench_report.cpp and Google Benchmark write) in a temporary build tree.

  python3 tests/bench/test_report.py     (ctest: bench.report; about a second)
"""
import contextlib
import glob
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
spec = importlib.util.spec_from_file_location("report", os.path.join(HERE, "report.py"))
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

# One fake for every benchmark run.sh runs; it knows which by its name.
# bench_serving's warm-hit value comes from FAKE_VALUES (comma separated),
# the next one each time it runs; its baseline is 100 us, its target 1.25x.
FAKE_BENCH = r"""#!/usr/bin/env bash
set -eu
name="$(basename "$0")"
json=""
for a in "$@"; do
  case "$a" in --benchmark_out=*) json="${a#--benchmark_out=}" ;; esac
done
while [ $# -gt 0 ]; do
  if [ "$1" = --json ]; then json="$2"; fi
  shift
done
figure() {  # figure NAME UNIT VALUE BASELINE BASELINE_VALUE RATIO TARGET MET
  printf '{"figure": "%s", "unit": "%s", "value": %s, "baseline": "%s", "baseline_value": %s, "ratio": %s, ' \
    "$1" "$2" "$3" "$4" "$5" "$6"
  printf '"target": "%s", "met": %s, "note": ""}' "$7" "$8"
}
case "$name" in
  bench_cache_lookup)
    cat >"$json" <<EOF
{"context": {"num_cpus": 2}, "benchmarks": [
 {"name": "BM_LookupHit", "run_type": "iteration", "real_time": 20000, "time_unit": "ns"},
 {"name": "BM_Floor_SqlitePointLookup", "run_type": "iteration", "real_time": 4000, "time_unit": "ns"},
 {"name": "BM_Floor_ReadAndHashBlob", "run_type": "iteration", "real_time": 6000, "time_unit": "ns"}]}
EOF
    exit 0 ;;
  bench_serving)
    count_file="$FAKE_STATE/serving.count"
    n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
    echo "$n" >"$count_file"
    value="$(echo "$FAKE_VALUES" | cut -d, -f"$n")"
    ratio="$(awk -v v="$value" 'BEGIN { print v / 100 }')"
    met="$(awk -v r="$ratio" 'BEGIN { print (r <= 1.25) ? "true" : "false" }')"
    fig="$(figure "warm hit 16K bytes p50" us "$value" "echo p50" 100 "$ratio" "<= 1.25x" "$met")"
    curve='{"server": "jitd", "clients": 1, "calls_per_s": 6000, "p50_us": 150, "p99_us": 300}' ;;
  *)
    fig="$(figure "$name time" ms 50 "" null null "<= 200.0 ms" true)"
    curve="" ;;
esac
printf '{"bench": "%s", "command": "%s", "context": {}, "figures": [%s], "curve": [%s]}\n' \
  "$name" "$name" "$fig" "$curve" >"$json"
"""
BENCHES = ("bench_serving", "bench_cold", "bench_start", "bench_warmup", "bench_cache_lookup", "bench_first_use")


def merged_run(values, baseline=100.0):
    """A merged run (report.py --out) with one figure per `values` entry."""
    figures = [{"figure": name, "unit": "us", "value": v, "baseline": "echo", "baseline_value": baseline,
                "ratio": v / baseline, "target": "<= 1.25x", "met": v / baseline <= 1.25, "note": ""}
               for name, v in values.items()]
    return {"revision": "abc", "host": "h", "benches": [{"bench": "bench_serving", "command": "c",
                                                          "figures": figures, "curve": []}]}


class TargetTest(unittest.TestCase):
    def test_each_target_text(self):
        met = report.target_met
        self.assertTrue(met("<= 1.25x", 130, 1.25))
        self.assertFalse(met("<= 1.25x", 130, 1.26))
        self.assertTrue(met(">= 0.80x", 1, 0.8))
        self.assertFalse(met(">= 0.80x", 1, 0.79))
        self.assertTrue(met("<= 200.0 ms", 200, None))
        self.assertFalse(met("<= 200.0 ms", 200.1, 0.5))
        self.assertTrue(met("<= 1000 ms", 999, None))
        self.assertTrue(met("<= 1.0 ", 1, None))  # a count: no unit
        self.assertFalse(met("<= 1.5 x", 1.6, 0.1))  # a value in the unit "x", not a ratio
        self.assertIsNone(met("", 5, 1.0))
        with self.assertRaises(ValueError):
            met("at most 3", 1, 1)

    def test_agrees_with_the_recorded_verdicts(self):
        """Every figure of docs/performance judged again from its value,
        ratio and target text gives the verdict its benchmark wrote, but
        where the text's rounding of the bound hides the difference."""
        checked = 0
        for path in glob.glob(os.path.join(ROOT, "docs", "performance", "**", "*.json"), recursive=True):
            with open(path) as f:
                data = json.load(f)
            for bench in data.get("benches", [data]):
                for f in bench.get("figures", []):
                    if not isinstance(f, dict) or "value" not in f or f.get("met") is None:
                        continue
                    checked += 1
                    if report.target_met(f["target"], f["value"], f.get("ratio")) == f["met"]:
                        continue
                    _, bound, on_ratio = report.parse_target(f["target"])
                    judged = f["ratio"] if on_ratio else f["value"]
                    half_digit = 0.005 if on_ratio else (0.5 if bound >= 1000 else 0.05)
                    self.assertLess(abs(judged - bound), half_digit, f"{path}: {f['figure']}")
                    self.assertEqual(report.target_met(f["target"], f["value"], f.get("ratio"),
                                                       [(f["value"], f.get("ratio"), f["met"])]), f["met"])
        self.assertGreater(checked, 0, "no recorded figures in docs/performance")

    def test_the_runs_verdicts_decide_within_the_rounding(self):
        """"<= 0.56x" is 1/1.8 = 0.5556 in bench_warmup: a median ratio of
        0.558 misses, though 0.558 <= 0.56."""
        met = report.target_met
        self.assertTrue(met("<= 0.56x", 1, 0.558))
        self.assertFalse(met("<= 0.56x", 1, 0.558, [(1, 0.5597, False), (1, 0.558, False), (1, 0.55, True)]))
        self.assertTrue(met("<= 0.56x", 1, 0.554, [(1, 0.55, True), (1, 0.554, True), (1, 0.5597, False)]))
        self.assertTrue(met("<= 0.56x", 1, 0.558, [(1, 0.55, True), (1, 0.5597, False)]))  # undecided: the text
        self.assertFalse(met(">= 0.80x", 1, 0.801, [(1, 0.805, False)]))
        self.assertTrue(met("<= 18.0 MiB", 18.04, None, [(18.05, None, True)]))


class MissedTest(unittest.TestCase):
    def test_one_line_per_missed_figure(self):
        figures = [{"figure": "start", "unit": "ms", "value": 250, "ratio": 1.7, "target": "<= 200.0 ms",
                    "met": False},
                   {"figure": "warm", "unit": "us", "value": 130, "ratio": 1.3, "target": "<= 1.25x", "met": False},
                   {"figure": "fine", "unit": "us", "value": 1, "ratio": 1.0, "target": "<= 1.25x", "met": True},
                   {"figure": "rss", "unit": "MiB", "value": 60, "ratio": 1.2, "target": "", "met": None}]
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            lines = report.summarize(report.judged(figures))
        self.assertEqual(lines, ["missed: start value 250.0 ms, target <= 200.0 ms",
                                 "missed: warm value 130.0 us (ratio 1.30x), target <= 1.25x"])
        self.assertIn("1 of 3 targets met: missed start; warm", printed.getvalue())


class CombineTest(unittest.TestCase):
    def test_median_min_max_and_the_median_judged(self):
        runs = [merged_run({"a": 100, "b": 130}), merged_run({"a": 130, "b": 140}),
                merged_run({"a": 110, "b": 120})]
        a, b = report.combine(runs)
        self.assertEqual((a["runs"], a["median"], a["min"], a["max"]), ([100, 130, 110], 110, 100, 130))
        self.assertAlmostEqual(a["ratio"], 1.10)
        self.assertTrue(a["met"])  # run 2 missed; the median meets
        self.assertEqual((b["median"], b["min"], b["max"]), (130, 120, 140))
        self.assertFalse(b["met"])

    def test_even_runs_and_a_figure_one_run_lacks(self):
        runs = [merged_run({"a": 100, "b": 1}, baseline=80), merged_run({"a": 120}, baseline=100),
                merged_run({"a": 140, "b": 3}, baseline=100), merged_run({"a": 160, "b": 2}, baseline=120)]
        a, b = report.combine(runs)
        self.assertEqual(a["median"], 130)
        self.assertEqual(a["baseline_median"], 100)
        self.assertAlmostEqual(a["ratio"], 1.30)  # the medians' ratio, not the median of the ratios
        self.assertFalse(a["met"])
        self.assertEqual(b["runs"], [1, None, 3, 2])
        self.assertEqual((b["median"], b["min"], b["max"]), (2, 1, 3))

    def test_the_runs_verdicts_reach_the_median(self):
        runs = []
        for value, met in ((55.97, False), (55.8, False), (55.0, True)):
            run = merged_run({"warm --all": value})
            run["benches"][0]["figures"][0].update(target="<= 0.56x", met=met)
            runs.append(run)
        (a,) = report.combine(runs)
        self.assertEqual(a["runs_met"], [False, False, True])
        self.assertAlmostEqual(a["ratio"], 0.558)
        self.assertFalse(a["met"])  # 0.558 <= 0.56, but a run missed at 0.558

    def test_no_baseline_no_ratio(self):
        run = merged_run({"a": 5})
        run["benches"][0]["figures"][0].update(baseline="", baseline_value=None, target="<= 6.0 us")
        (a,) = report.combine([run, run])
        self.assertIsNone(a["ratio"])
        self.assertTrue(a["met"])

    def test_cache_lookup_ratio(self):
        data = {"benchmarks": [{"name": "BM_LookupHit", "real_time": 20000, "time_unit": "ns"},
                               {"name": "BM_Floor_SqlitePointLookup", "real_time": 4000, "time_unit": "ns"},
                               {"name": "BM_Floor_ReadAndHashBlob", "real_time": 6000, "time_unit": "ns"}]}
        (hit,) = report.cache_lookup_figures(data)["figures"]
        self.assertAlmostEqual(hit["ratio"], 2.0)


class RunShTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        bench_dir = os.path.join(self.dir, "build", "tests", "bench")
        os.makedirs(bench_dir)
        fake = os.path.join(self.dir, "fake_bench.sh")
        with open(fake, "w") as f:
            f.write(FAKE_BENCH)
        os.chmod(fake, 0o755)
        for name in BENCHES:
            os.symlink(fake, os.path.join(bench_dir, name))
        # run.sh draws a plot where matplotlib imports: hide it, to stay fast.
        hidden = os.path.join(self.dir, "pythonpath", "matplotlib")
        os.makedirs(hidden)
        with open(os.path.join(hidden, "__init__.py"), "w") as f:
            f.write("raise ImportError('hidden by test_report.py')\n")
        os.makedirs(os.path.join(self.dir, "state"))

    def tearDown(self):
        self.tmp.cleanup()

    def run_sh(self, values, *args):
        env = dict(os.environ, FAKE_VALUES=values, FAKE_STATE=os.path.join(self.dir, "state"),
                   PYTHONPATH=os.path.join(self.dir, "pythonpath"))
        for stale in glob.glob(os.path.join(self.dir, "state", "*")):
            os.remove(stale)
        return subprocess.run([os.path.join(HERE, "run.sh"), "--no-build", "--quick", "--build-dir",
                               os.path.join(self.dir, "build"), "--out", self.out(), *args],
                              env=env, capture_output=True, text=True, timeout=60)

    def out(self, *parts):
        return os.path.join(self.dir, "out", *parts)

    def test_a_miss_is_a_no_by_default(self):
        r = self.run_sh("130")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("4 of 5 targets met: missed warm hit 16K bytes p50", r.stdout)
        with open(self.out("bench.json")) as f:
            merged = json.load(f)
        self.assertEqual(sorted(merged), ["benches", "host", "revision"])
        self.assertEqual([b["bench"] for b in merged["benches"]],
                         ["bench_serving", "bench_cold", "bench_start", "bench_warmup", "bench_cache_lookup",
                          "bench_first_use"])
        self.assertFalse(os.path.exists(self.out("run-1")))

    def test_check_exits_3_on_a_miss(self):
        r = self.run_sh("130", "--check")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("missed: warm hit 16K bytes p50 value 130.0 us (ratio 1.30x), target <= 1.25x\n", r.stderr)
        self.assertEqual(r.stderr.count("missed: "), 1)
        self.assertEqual(self.run_sh("120", "--check").returncode, 0)

    def test_repeat_judges_the_median(self):
        r = self.run_sh("100,130,110", "--repeat", "3", "--check")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for i in (1, 2, 3):
            self.assertTrue(os.path.exists(self.out(f"run-{i}", "serving.json")))
            self.assertTrue(os.path.exists(self.out(f"run-{i}", "bench.json")))
        self.assertIn("100.0, 130.0, 110.0", r.stdout)
        with open(self.out("bench-repeat.json")) as f:
            combined = json.load(f)
        (warm,) = [e for e in combined["figures"] if e["figure"] == "warm hit 16K bytes p50"]
        self.assertEqual((warm["runs"], warm["median"], warm["min"], warm["max"], warm["met"]),
                         ([100, 130, 110], 110, 100, 130, True))
        self.assertTrue(os.path.exists(self.out("bench-repeat.md")))

    def test_repeat_check_exits_3_when_the_median_misses(self):
        r = self.run_sh("130,100,140", "--repeat", "3", "--check")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("missed: warm hit 16K bytes p50 median 130.0 us (ratio 1.30x), target <= 1.25x", r.stderr)

    def test_bad_repeat_is_a_usage_error(self):
        for args in (["--repeat", "0"], ["--repeat", "x"], ["--repeat", "-1"], ["--repeat"]):
            r = self.run_sh("100", *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("--repeat needs a whole number of runs >= 1", r.stderr)
            self.assertFalse(os.path.exists(self.out()), args)

    def test_help_is_the_header(self):
        r = subprocess.run([os.path.join(HERE, "run.sh"), "--help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("jitd's benchmark suite"))
        self.assertIn("--repeat N", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("3 with --check when a target was missed."), r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=1)
