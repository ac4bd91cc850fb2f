// The serving daemon: the cache, the gRPC server and its services on every
// listen address, from start to drained shutdown.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config.h"

namespace jitd::daemon {

class Server {
 public:
  // Opens the cache, claims the Unix socket paths (see unix_socket_claim.h),
  // binds every listen address and starts serving: CacheAdmin, Compiler,
  // grpc.health.v1 (SERVING once this returns) and server reflection.
  // Fails, with a message naming the address or directory, when any of that
  // fails; nothing is left listening then.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const DaemonConfig& config);

  // Stops serving (Shutdown() if not called).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The addresses bound, as clients would dial them ("unix:/abs/path",
  // "127.0.0.1:43127" for a requested port 0).
  const std::vector<std::string>& addresses() const;

  // Health turns NOT_SERVING, new calls are refused, calls in flight get up
  // to `drain` to finish and are cancelled after it; then the cache writes
  // its queued updates. Returns the cache's flush error, if any.
  absl::Status Shutdown(std::chrono::milliseconds drain);

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace jitd::daemon
