// How bench_serving turns calls into figures: latency percentiles of one
// sequential caller, and calls/s of N concurrent callers.
#pragma once

#include <chrono>
#include <functional>

#include "absl/status/statusor.h"

namespace jitd::bench {

// One request, end to end as a client sees it; an error stops the figure.
using Call = std::function<absl::Status()>;

struct Latency {
  double p50_us = 0;
  double p99_us = 0;
  size_t samples = 0;
};

struct LatencyPair {
  Latency a;
  Latency b;
};

// `warmup` untimed calls of each, then `calls` timed ones of each, one after
// another, alternating a and b so that both see the same machine (a busy
// shared host drifts over seconds). Percentiles are nearest-rank over the
// sorted samples.
absl::StatusOr<LatencyPair> MeasureSequential(const Call& a, const Call& b, int warmup, int calls);

struct Load {
  double calls_per_s = 0;
  double p50_us = 0;  // latency of one call as its client saw it
  double p99_us = 0;
};

// `clients` threads, each with the Call that `make_call` builds for it (its
// own channel), call as fast as they can for `duration` after a short
// untimed warm-up; answers completed calls per second and the latency
// percentiles of the calls completed in the window.
absl::StatusOr<Load> MeasureThroughput(const std::function<Call()>& make_call, int clients,
                                       std::chrono::milliseconds duration);

}  // namespace jitd::bench
