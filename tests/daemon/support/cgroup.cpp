#include "cgroup.h"

#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "jitd/base/text.h"

namespace jitd::testing {
namespace fs = std::filesystem;

namespace {

absl::Status WriteFile(const fs::path& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.close();  // a refused write to a control file fails here
  if (!out) return absl::PermissionDeniedError(text::Cat("cannot write '", value, "' to ", path.string()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Cgroup> Cgroup::Create(const std::string& controller, const std::string& name) {
  const fs::path v1 = fs::path("/sys/fs/cgroup") / controller;
  fs::path parent = v1;
  std::error_code error;
  if (!fs::is_directory(v1, error)) {
    parent = "/sys/fs/cgroup";
    if (!fs::exists(parent / "cgroup.controllers", error)) {
      return absl::UnavailableError("no cgroup hierarchy at /sys/fs/cgroup");
    }
    // v2: a child gets the controller only where its parent enables it.
    if (absl::Status s = WriteFile(parent / "cgroup.subtree_control", "+" + controller); !s.ok()) return s;
  }
  const fs::path path = parent / name;
  if (!fs::create_directory(path, error) && error) {
    return absl::PermissionDeniedError(text::Cat("cannot create cgroup ", path.string(), ": ", error.message()));
  }
  return Cgroup(path);
}

Cgroup::~Cgroup() {
  if (path_.empty()) return;
  // Its processes go back to the parent, then the (empty) group goes.
  std::ifstream procs(path_ / "cgroup.procs");
  std::vector<std::string> pids;
  for (std::string pid; std::getline(procs, pid);) pids.push_back(pid);
  for (const std::string& pid : pids) (void)WriteFile(path_.parent_path() / "cgroup.procs", pid);
  std::error_code error;
  fs::remove(path_, error);  // rmdir; its control files go with it
}

absl::Status Cgroup::Add(pid_t pid) const { return WriteFile(path_ / "cgroup.procs", std::to_string(pid)); }

absl::Status Cgroup::Set(const std::string& file, const std::string& value) const {
  return WriteFile(path_ / file, value);
}

}  // namespace jitd::testing
