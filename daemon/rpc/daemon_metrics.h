// The daemon's Prometheus metrics: what jitd counts and how it is named.
// jitd_metrics (daemon/metrics) renders and serves; this file decides the
// families, their labels and buckets, and reads the request path's, the
// cache's, the pool's and the remote tier's own counters at scrape time.
//
//   jitd_requests_total{outcome,source}        GetKernel calls by outcome
//                                              ("ok" or the gRPC code in
//                                              lower case) and source
//   jitd_request_duration_seconds{source}      their latency, histogram
//   jitd_compiles_total{result}                ok | failed (NVRTC rejected
//                                              the program) | error
//   jitd_compile_duration_seconds              wall time of each compile
//   jitd_local_requests_total{outcome}         requests of the local path
//                                              (local_server.h)
//   plus gauges and counters read when scraped: cache, hot cache, workers
//   and queue, single flight, remote tier (docs/OPERATIONS.md lists them).
//
// Thread safety: Observe* may be called from any thread; they take no lock
// once a label combination has been seen (its series is kept in an array).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/worker_pool.h"
#include "jitd/cache.h"
#include "metrics/metrics.h"
#include "remote/remote.h"
#include "serving/kernel_service.h"
#include "serving/kernel_trees.h"
#include "serving/rewarm.h"

namespace jitd::daemon {

class DaemonMetrics {
 public:
  // What the collectors read; every pointer must outlive the metrics'
  // last Render() (the server stops the endpoint first).
  struct Sources {
    cache::Cache* cache = nullptr;
    const serving::KernelService* service = nullptr;
    const compiler::WorkerPool* pool = nullptr;
    const cache::RemoteTier* remote = nullptr;    // may be null
    const serving::Rewarmer* rewarmer = nullptr;  // may be null
    const serving::KernelTrees* trees = nullptr;  // may be null
    std::string version;
    std::string nvrtc_version;
  };

  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Create();

  // Collect's part for the mounted bundles, the fleet set and the rewarm.
  static void EmitBundlesFleetAndRewarm(metrics::Emitter& e, const Sources& s, const serving::KernelService::Stats& k);

  // Adds the scrape-time collectors (once).
  void Collect(Sources sources);

  // One GetKernel call: its status, where the answer came from (kNone for
  // errors) and how long the daemon took.
  void ObserveRequest(absl::StatusCode code, serving::Origin origin, std::chrono::duration<double> took);
  // One request of the local path. Its answers count as GetKernel calls
  // too, except misses (NOT_FOUND), which the client asks again over gRPC.
  void ObserveLocal(absl::StatusCode code, serving::Origin origin, std::chrono::duration<double> took);
  // One compile run by a worker: "ok", "failed" or "error", and its wall time.
  void ObserveCompile(std::string_view result, std::chrono::duration<double> took);

  std::string Render() { return registry_.Render(); }
  metrics::Registry& registry() { return registry_; }

 private:
  DaemonMetrics() = default;
  static constexpr size_t kCodes = 17;                                                   // absl::StatusCode 0..16
  static constexpr size_t kOrigins = static_cast<size_t>(serving::Origin::kBundle) + 1;  // the last Origin
  metrics::Registry registry_;
  metrics::CounterFamily* requests_ = nullptr;
  metrics::HistogramFamily* request_seconds_ = nullptr;
  metrics::CounterFamily* compiles_ = nullptr;
  metrics::HistogramFamily* compile_seconds_ = nullptr;
  metrics::CounterFamily* local_ = nullptr;
  // Series made on first use, then read without the family's lock.
  std::array<std::atomic<metrics::Counter*>, kCodes * kOrigins> request_series_{};
  std::array<std::atomic<metrics::Histogram*>, kOrigins> latency_series_{};
  std::array<std::atomic<metrics::Counter*>, kCodes> local_series_{};
};

}  // namespace jitd::daemon
