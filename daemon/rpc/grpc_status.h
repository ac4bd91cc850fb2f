// The daemon's one mapping from absl::Status (used everywhere inside) to
// grpc::Status (what goes on the wire).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace jitd::daemon {

// Code and message carried over unchanged: both libraries use the same
// canonical codes, and the message is written for the person who called.
// A status with a reason (jitd/base/error_reason.h) also carries it in
// the error details (grpc-status-details-bin: error_details.proto).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace jitd::daemon
