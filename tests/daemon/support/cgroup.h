// A cgroup (v1 hierarchy, or the v2 unified one) of its own for a test, to
// hold a real daemon to a pids or memory limit as a pod or a systemd unit
// would. Needs root; tests skip with the reason Create() gives otherwise.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::testing {

class Cgroup {
 public:
  // Makes `name` under the hierarchy of `controller` ("pids", "memory"):
  // /sys/fs/cgroup/<controller>/ (v1), else /sys/fs/cgroup/ (v2, with the
  // controller enabled for children).
  static absl::StatusOr<Cgroup> Create(const std::string& controller, const std::string& name);
  // Moves its processes back to the parent and removes the cgroup.
  ~Cgroup();
  Cgroup(Cgroup&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  Cgroup& operator=(Cgroup&&) = delete;

  // Moves process `pid` (all its threads) into it.
  absl::Status Add(pid_t pid) const;
  // Writes `value` to its control file `file` ("pids.max", "memory.limit_in_bytes").
  absl::Status Set(const std::string& file, const std::string& value) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit Cgroup(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace jitd::testing
