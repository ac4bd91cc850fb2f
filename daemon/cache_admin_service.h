// jitd.v1.CacheAdmin over jitd::cache::Cache: inspection (Stats,
// ListEntries, Verify) and eviction, each RPC one call into the cache.
#pragma once

#include <chrono>

#include "admin_auth.h"
#include "jitd/cache.h"
#include "jitd/v1/cache_admin.grpc.pb.h"

namespace jitd::daemon {

class CacheAdminService final : public v1::CacheAdmin::Service {
 public:
  // `cache` and `auth` must outlive the service. `started` is when the
  // daemon started, for Stats' uptime.
  CacheAdminService(cache::Cache& cache, const AdminAuth& auth, std::chrono::steady_clock::time_point started);

  grpc::Status Stats(grpc::ServerContext* context, const v1::StatsRequest* request,
                     v1::StatsResponse* response) override;
  grpc::Status ListEntries(grpc::ServerContext* context, const v1::ListEntriesRequest* request,
                           v1::ListEntriesResponse* response) override;
  // Needs the admin token (when the daemon has one), dry run included:
  // the RPC is the one that removes entries.
  grpc::Status Evict(grpc::ServerContext* context, const v1::EvictRequest* request,
                     v1::EvictResponse* response) override;
  // Needs the admin token only with repair.
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;

 private:
  cache::Cache& cache_;
  const AdminAuth& auth_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace jitd::daemon
