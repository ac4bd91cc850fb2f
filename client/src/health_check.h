// grpc.health.v1.Health/Check without generated code.
#pragma once

#include <grpcpp/channel.h>

#include <chrono>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"

namespace jitd::client_detail {

// Asks the server's overall health (service ""), answering whether it is
// SERVING. gRPC ships no C++ classes for health.proto, and compiling our own
// copy into a library would clash with any consumer that does the same
// (protobuf aborts on a descriptor registered twice), so the two tiny
// messages are encoded by hand. With `wait_for_ready` the call waits for the
// socket to accept instead of failing at once (a daemon still starting).
// Errors name `endpoint`.
absl::StatusOr<bool> CheckServing(const std::shared_ptr<grpc::Channel>& channel, std::string_view endpoint,
                                  std::chrono::milliseconds timeout, bool wait_for_ready);

}  // namespace jitd::client_detail
