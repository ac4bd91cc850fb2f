#include "rpc/health_rpc.h"

#include <chrono>

#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// How often a Watch stream looks whether its caller has hung up.
constexpr std::chrono::milliseconds kWatchPoll{250};

}  // namespace

HealthRpc::HealthRpc(std::set<std::string> services, TreeServing tree_serving)
    : services_(std::move(services)), tree_serving_(std::move(tree_serving)) {}

void HealthRpc::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shut_down_ = true;
  }
  changed_.notify_all();
}

HealthRpc::Status HealthRpc::StatusOf(const std::string& service) const {
  if (tree_serving_ && service.starts_with(kTreeServicePrefix)) {
    const std::optional<bool> serving = tree_serving_(std::string_view(service).substr(sizeof kTreeServicePrefix - 1));
    if (!serving.has_value()) return HealthCheckResponse::SERVICE_UNKNOWN;
    return shut_down_ || !*serving ? HealthCheckResponse::NOT_SERVING : HealthCheckResponse::SERVING;
  }
  if (!service.empty() && services_.count(service) == 0) return HealthCheckResponse::SERVICE_UNKNOWN;
  return shut_down_ ? HealthCheckResponse::NOT_SERVING : HealthCheckResponse::SERVING;
}

grpc::Status HealthRpc::Check(grpc::ServerContext*, const HealthCheckRequest* request, HealthCheckResponse* response) {
  std::lock_guard lock(mu_);
  const Status status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, text::Cat("no service ", request->service(), " on this server"));
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthRpc::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                              grpc::ServerWriter<HealthCheckResponse>* writer) {
  std::unique_lock lock(mu_);
  if (watchers_ >= kMaxWatchers) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        text::Cat("too many health Watch streams open (", kMaxWatchers, "); use Check"));
  }
  ++watchers_;
  Status sent = StatusOf(request->service());
  HealthCheckResponse response;
  response.set_status(sent);
  lock.unlock();
  bool open = writer->Write(response);
  lock.lock();
  while (open && !context->IsCancelled()) {
    changed_.wait_for(lock, kWatchPoll);
    const Status now = StatusOf(request->service());
    if (now != sent) {
      sent = now;
      response.set_status(now);
      lock.unlock();
      open = writer->Write(response);
      lock.lock();
    }
    if (shut_down_) break;
  }
  --watchers_;
  return grpc::Status::OK;
}

}  // namespace jitd::daemon
