// Asks a server's gRPC reflection service which services it offers, as
// grpcurl's `list` does.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace jitd::testing {

// The raw ListServiceResponse bytes: the service names appear in it
// verbatim, which is all a test needs to check (gRPC installs no C++
// classes for reflection.proto, so the messages are encoded by hand).
absl::StatusOr<std::string> ListServicesByReflection(const std::string& endpoint);

}  // namespace jitd::testing
