#include "rpc/grpc_status.h"

#include <string>

#include "jitd/base/error_reason.h"
#include "jitd/v1/error_details.pb.h"

namespace jitd::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const std::string reason = ReasonOf(status);
  if (reason.empty()) {
    return grpc::Status(static_cast<grpc::StatusCode>(status.raw_code()), std::string(status.message()));
  }
  v1::ErrorInfo info;
  info.set_reason(reason);
  info.set_domain("jitd.dev");
  v1::RpcStatus details;
  details.set_code(status.raw_code());
  details.set_message(std::string(status.message()));
  v1::AnyDetail* any = details.add_details();
  any->set_type_url("type.googleapis.com/google.rpc.ErrorInfo");
  any->set_value(info.SerializeAsString());
  return grpc::Status(static_cast<grpc::StatusCode>(status.raw_code()), std::string(status.message()),
                      details.SerializeAsString());
}

}  // namespace jitd::daemon
