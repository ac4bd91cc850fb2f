// The daemon's one mapping from absl::Status (used everywhere inside) to
// grpc::Status (what goes on the wire).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace jitd::daemon {

// Code and message carried over unchanged: both libraries use the same
// canonical codes, and the message is written for the person who called.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace jitd::daemon
