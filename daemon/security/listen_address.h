// The addresses the daemon listens on: "unix:PATH" or "HOST:PORT".
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace jitd::daemon {

struct ListenAddress {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  // kUnix: the socket path, made absolute so that it means the same thing
  // to gRPC, to the stale-socket check and in the log.
  std::filesystem::path unix_path;
  // kTcp: "HOST:PORT" as given ("[::1]:7070", "0.0.0.0:0" for any port).
  std::string host_port;

  // What gRPC's ServerBuilder::AddListeningPort takes.
  std::string GrpcTarget() const;
};

// INVALID_ARGUMENT naming what is wrong for anything but unix:PATH or
// HOST:PORT with PORT in 0..65535 (0: the kernel picks one, logged at start).
absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text);

}  // namespace jitd::daemon
