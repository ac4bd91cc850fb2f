#include "rpc/grpc_status.h"

#include <string>

namespace jitd::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.raw_code()), std::string(status.message()));
}

}  // namespace jitd::daemon
