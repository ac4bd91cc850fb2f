#include "src/grpc_status.h"

#include <string>

#include "jitd/base/text.h"

namespace jitd::client_detail {

using text::Cat;

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view endpoint) {
  if (status.ok()) return absl::OkStatus();
  // gRPC and absl both use the canonical status codes with the same numbers.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint, ": ", status.error_message(),
                                      " (is the daemon running? start it with `jitd`)"));
  }
  return absl::Status(code, status.error_message());
}

}  // namespace jitd::client_detail
