// One serving daemon per cache directory.
//
// A daemon keeps in-memory state about its cache directory (the hot cache,
// single flight, the byte budget it enforces), so two daemons on one
// directory would each evict what the other serves and compile the same
// keys twice. `jitd warm` only adds entries and may share the directory
// with a daemon; a second daemon may not. The claim is an advisory lock
// (flock) on DIR/daemon.lock, held for the daemon's lifetime; the kernel
// drops it when the process ends however it ends, so a lock left by a
// killed daemon never blocks the next start. The file records the holder's
// pid and addresses so that a refusal can name it. flock is node-local: the
// cache directory must be on a local filesystem, as the cache requires
// anyway.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::daemon {

class CacheDirLock {
 public:
  // Creates `dir` if needed and locks DIR/daemon.lock. FAILED_PRECONDITION
  // naming the holder (pid, addresses) when another daemon serves `dir`.
  static absl::StatusOr<std::unique_ptr<CacheDirLock>> Acquire(const std::filesystem::path& dir,
                                                               const std::vector<std::string>& listen);
  ~CacheDirLock();  // releases the lock (the file stays)
  CacheDirLock(const CacheDirLock&) = delete;
  CacheDirLock& operator=(const CacheDirLock&) = delete;

  static constexpr char kFileName[] = "daemon.lock";

 private:
  explicit CacheDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace jitd::daemon
