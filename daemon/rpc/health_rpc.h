// grpc.health.v1.Health, served synchronously like jitd's own services.
//
// gRPC's built-in health service is written against the callback API; a
// server holding any callback service gets extra polling threads that take
// part in every call's I/O. Measured with tests/bench/bench_serving, that
// cost jitd ~40 us per warm hit and ~20% of its throughput next to a bare
// echo server; this implementation keeps the same wire behaviour without it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "grpc/health/v1/health.grpc.pb.h"

namespace jitd::daemon {

class HealthRpc final : public grpc::health::v1::Health::Service {
 public:
  // Answers for the server as a whole ("") and for each of `services`
  // (fully qualified names); all SERVING until Shutdown(). With
  // `tree_serving`, also for "jitd.tree.NAME", each kernel tree: SERVING
  // while it is served, NOT_SERVING when it was refused (the server as a
  // whole stays SERVING: its other trees answer), unknown for a name that
  // is no tree's.
  using TreeServing = std::function<std::optional<bool>(std::string_view tree)>;
  explicit HealthRpc(std::set<std::string> services, TreeServing tree_serving = nullptr);
  static constexpr char kTreeServicePrefix[] = "jitd.tree.";

  // NOT_SERVING from here on, for every service; open Watch streams are
  // sent that and closed, so that they never hold up the server's shutdown.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

  // Watch streams open at once beyond this are refused (RESOURCE_EXHAUSTED):
  // each holds one of the server's threads.
  static constexpr int kMaxWatchers = 64;

 private:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  Status StatusOf(const std::string& service) const;  // under mu_

  const std::set<std::string> services_;
  const TreeServing tree_serving_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool shut_down_ = false;
  int watchers_ = 0;
};

}  // namespace jitd::daemon
