// What every jitd benchmark prints and writes: figures, each beside the
// baseline it is held against (measured in the same run) and the target it
// must meet, and optional curves (latency vs concurrency) for plotting.
// tests/bench/report.py merges the JSON of several benchmarks into one table.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::bench {

struct Figure {
  enum class Target {
    kNone,          // reported, no target
    kRatioAtMost,   // value / baseline_value <= bound
    kRatioAtLeast,  // value / baseline_value >= bound
    kAtMost,        // value <= bound (in the figure's unit)
  };
  std::string name;  // "warm hit 16K bytes p50"
  std::string unit;  // "us", "ms", "calls/s", "MiB", "x"
  double value = 0;
  std::string baseline;  // what it is compared against; empty = nothing
  double baseline_value = 0;
  Target target = Target::kNone;
  double bound = 0;
  std::string note;  // what bounds it, or how it was taken

  // value / baseline_value; 0 without a baseline.
  double ratio() const;
  bool has_target() const { return target != Target::kNone; }
  bool met() const;
  // "<= 1.25x", ">= 0.80x", "<= 200 ms", or "".
  std::string TargetText() const;
};

// One point of a latency-vs-concurrency curve.
struct CurvePoint {
  std::string server;  // "jitd", "echo"
  int clients = 0;
  double calls_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
};

class Report {
 public:
  // `bench` names the program; `command` is how to run it again.
  Report(std::string bench, std::string command) : bench_(std::move(bench)), command_(std::move(command)) {}

  void Add(Figure figure) { figures_.push_back(std::move(figure)); }
  void AddPoint(CurvePoint point) { curve_.push_back(std::move(point)); }
  // A line about the machine or the inputs, printed above the table.
  void AddContext(std::string key, std::string value) { context_.emplace_back(std::move(key), std::move(value)); }

  // The table, to stdout.
  void Print() const;
  absl::Status WriteJson(const std::string& path) const;
  // Print(), then WriteJson(json) unless `json` is empty; throws (OrDie)
  // if the JSON cannot be written.
  void PrintAndWrite(const std::string& json) const;
  // True when every figure with a target met it.
  bool AllMet() const;

 private:
  std::string bench_;
  std::string command_;
  std::vector<std::pair<std::string, std::string>> context_;
  std::vector<Figure> figures_;
  std::vector<CurvePoint> curve_;
};

// A benchmark stops at its first failure: these throw std::runtime_error
// ("what: status") unless `status` is OK, and RunMain reports it. A throw
// rather than an exit, so that unwinding stops the processes it started.
void OrDie(const absl::Status& status, const std::string& what);
template <typename T>
T OrDie(absl::StatusOr<T> value, const std::string& what) {
  OrDie(value.status(), what);
  return *std::move(value);
}

// What a benchmark's main() returns: `run()`, or 1 after printing
// "program: <what the exception says>" to stderr when it throws.
int RunMain(const char* program, const std::function<int()>& run);

// Median and nearest-rank percentile (q in (0, 1]) of unsorted samples;
// 0 for none.
double Median(std::vector<double> samples);
double Percentile(std::vector<double> samples, double q);

// Resident set size of process `pid` (VmRSS), in MiB; 0 when unreadable.
double ResidentMiB(int pid);

}  // namespace jitd::bench
