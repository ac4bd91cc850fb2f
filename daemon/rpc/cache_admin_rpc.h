// jitd.v1.CacheAdmin over jitd::cache::Cache: inspection (Stats,
// ListEntries, Verify) and eviction, each RPC one call into the cache.
// Stats adds what the serving side reports (see serving_stats.h).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>

#include "jitd/cache.h"
#include "jitd/v1/cache_admin.grpc.pb.h"
#include "rpc/in_flight_calls.h"
#include "security/admin_auth.h"

namespace jitd::daemon {

class CacheAdminRpc final : public v1::CacheAdmin::Service {
 public:
  // Fills the request path's and the worker pool's fields of a Stats answer.
  using ServingStats = std::function<void(v1::StatsResponse*)>;

  // Called with the keys a (non-dry-run) Evict removed, so that layers in
  // front of the disk cache (the hot cache) drop them too.
  using EvictedHook = std::function<void(const std::vector<std::string>& keys)>;

  // `cache`, `auth` and `calls` (which counts each call while it runs)
  // must outlive the service. `started` is when the daemon started, for
  // Stats' uptime. `serving_stats` and `on_evicted` may be empty.
  CacheAdminRpc(cache::Cache& cache, const AdminAuth& auth, InFlightCalls& calls,
                std::chrono::steady_clock::time_point started, ServingStats serving_stats = {},
                EvictedHook on_evicted = {});

  grpc::Status Stats(grpc::ServerContext* context, const v1::StatsRequest* request,
                     v1::StatsResponse* response) override;
  grpc::Status ListEntries(grpc::ServerContext* context, const v1::ListEntriesRequest* request,
                           v1::ListEntriesResponse* response) override;
  // Needs the admin token (when the daemon has one), except for a dry run,
  // which removes nothing.
  grpc::Status Evict(grpc::ServerContext* context, const v1::EvictRequest* request,
                     v1::EvictResponse* response) override;
  // Needs the admin token only with repair. It re-reads every blob, so it
  // is bounded whoever asks: one at a time (another is RESOURCE_EXHAUSTED
  // while it runs), and without the admin token at most one per
  // kOpenVerifyInterval (RESOURCE_EXHAUSTED saying when the next may run).
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;

 private:
  cache::Cache& cache_;
  const AdminAuth& auth_;
  InFlightCalls& calls_;
  const std::chrono::steady_clock::time_point started_;
  const ServingStats serving_stats_;
  const EvictedHook on_evicted_;

  // A minute between verifies of callers without the admin token: enough
  // for a monitor, far from keeping the disk busy re-reading every blob.
  static constexpr std::chrono::seconds kOpenVerifyInterval{60};
  // Admits one Verify, or says why not.
  absl::Status AdmitVerify(bool admin);
  std::mutex verify_mu_;
  bool verify_running_ = false;                                            // guarded by verify_mu_
  std::optional<std::chrono::steady_clock::time_point> last_open_verify_;  // guarded by verify_mu_
};

}  // namespace jitd::daemon
