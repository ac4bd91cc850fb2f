// This process's exclusive use of a Unix socket path.
//
// gRPC unlinks whatever socket file is in the way when it binds, so without
// this check a second daemon would silently steal a live daemon's socket.
// A claim takes an advisory lock on PATH.lock (held until the process
// exits, so two daemons starting at once cannot both win), then looks at
// PATH: a socket nobody accepts on (left by a killed daemon) is stale and
// removed; a socket that accepts belongs to a live server and is refused.
#pragma once

#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"

namespace jitd::daemon {

class UnixSocketClaim {
 public:
  // Creates PATH's parent directory, locks PATH.lock and clears a stale
  // socket. FAILED_PRECONDITION, with a message saying who holds the path,
  // when another process serves there or PATH is not a socket.
  static absl::StatusOr<std::unique_ptr<UnixSocketClaim>> Acquire(const std::filesystem::path& path);

  // Removes the socket file; the lock file stays (removing a lock file
  // races with a process about to lock it) and the lock ends with the fd.
  ~UnixSocketClaim();
  UnixSocketClaim(const UnixSocketClaim&) = delete;
  UnixSocketClaim& operator=(const UnixSocketClaim&) = delete;

  // Sets the bound socket's mode to 0660: the owner and its group may
  // connect, others may not (connecting to a Unix socket needs write
  // permission on it). Call once the server has bound PATH.
  absl::Status RestrictMode() const;

  // Whether Acquire() found and removed a stale socket file.
  bool removed_stale() const { return removed_stale_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  UnixSocketClaim(std::filesystem::path path, int lock_fd, bool removed_stale);

  std::filesystem::path path_;
  int lock_fd_;
  bool removed_stale_;
};

}  // namespace jitd::daemon
