// The serving daemon: the cache, the kernels, the compile workers, the
// request path and the gRPC server on every listen address, from start to
// drained shutdown.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace jitd::daemon {

class Server {
 public:
  // In this order: opens the cache (and removes the kernels snapshots older
  // versions kept under its kernel-trees/); fingerprints and starts
  // watching the toolkit (--cuda-include and the NVRTC libraries); loads the
  // kernels directory into memory and
  // runs the namespace guard's source check, refusing to start on findings
  // (FAILED_PRECONDITION, each finding logged) unless
  // config.allow_guard_findings; starts the compile workers and the request
  // path; claims the Unix socket paths (see unix_socket_claim.h), binds
  // every listen address and starts serving: Compiler, CacheAdmin,
  // grpc.health.v1 (SERVING once this returns) and server reflection.
  // Fails, with a message naming the address, directory or finding, when
  // any of that fails; nothing is left listening or running then.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const DaemonConfig& config);

  // Stops serving (Shutdown() if not called).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The addresses bound, as clients would dial them ("unix:/abs/path",
  // "127.0.0.1:43127" for a requested port 0).
  const std::vector<std::string>& addresses() const;

  // "7 kernels from DIR, fingerprint 0123abcd4567", for the log.
  std::string DescribeKernels() const;
  // "1 kernel tree refused: acme (why)", or "" when every tree is served.
  std::string RefusedTrees() const;

  // Re-reads the kernels directory (SIGHUP): checks the toolkit first (a
  // change there restarts the workers and gives new keys, as when a compile
  // notices it), then the kernels into memory, the guard's
  // source check, then the request path resolves with the new kernels
  // (new keys for what changed; every cached entry stays). On findings
  // (unless allow_guard_findings) or a directory that no longer loads, the
  // old kernels keep serving and the error says why; findings are logged
  // one per line. Logs "reloaded kernels: N kernels, fingerprint X (was Y)".
  // Call from one thread at a time (main's signal loop).
  absl::Status ReloadKernels();

  // Health turns NOT_SERVING, new calls are refused, calls in flight get up
  // to `drain` to finish (a compile they wait on finishes too) and are
  // cancelled after it; compiles nobody waits for (PREFETCH) finish and are
  // stored; then the cache writes its queued updates. Returns the cache's
  // flush error, if any.
  absl::Status Shutdown(std::chrono::milliseconds drain);

  // Whether the listener probe found a listener that stopped accepting
  // and asked the process to stop (main then exits kExitListenerDeaf).
  bool listener_deaf() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace jitd::daemon
