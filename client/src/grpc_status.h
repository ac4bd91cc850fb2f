// The client's one mapping from gRPC's status to absl::Status.
#pragma once

#include <grpcpp/support/status.h>

#include <string_view>

#include "absl/status/status.h"

namespace jitd::client_detail {

// Carries the code and the daemon's message over unchanged; when the daemon
// could not be reached (UNAVAILABLE), the message says so and names
// `endpoint`, since gRPC's own text ("failed to connect to all addresses")
// does not say which daemon was meant.
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view endpoint);

}  // namespace jitd::client_detail
