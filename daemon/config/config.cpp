#include "config/config.h"

#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "config/settings.h"
#include "jitd/base/endpoint.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "remote/remote.h"
#include "security/listen_address.h"

namespace jitd::daemon {
namespace {

// The most compile workers a daemon accepts: NVRTC needs ~1 GiB of memory
// per compile of the larger kernels, so more would exhaust any host.
constexpr int64_t kMaxWorkers = 1024;
// More waiting compiles than this is a backlog of hours: no caller waits
// that long, so a larger queue only hides an overload.
constexpr int64_t kMaxMaxQueue = 1000000;
// A day: a failure remembered longer would outlive any reason to cache it.
constexpr int64_t kMaxNegativeTtlSeconds = 86400;

}  // namespace

std::filesystem::path DefaultCacheDir() { return UserJitdDir(); }

std::filesystem::path DefaultKernelsDir() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share/jitd/kernels";
    if (std::filesystem::is_directory(installed, error)) return installed;
  }
  return JITD_SOURCE_KERNELS_DIR;
}

DaemonConfig ResolveConfig(const ConfigLayer& file, const ConfigLayer& flags) {
  ConfigLayer merged = file;
  DaemonConfig config;
  for (const Setting& setting : Settings()) {
    setting.overlay(merged, flags);
    setting.decide(merged, config);
  }
  return config;
}

absl::Status CheckListenAddress(const std::string& address) { return ParseListenAddress(address).status(); }

absl::Status CheckGroupName(const std::string& group) {
  if (group.empty()) return absl::InvalidArgumentError("a group name is empty");
  if (::getgrnam(group.c_str()) == nullptr) {
    return absl::InvalidArgumentError(text::Cat("no group '", group, "' on this host (see /etc/group)"));
  }
  return absl::OkStatus();
}

absl::Status CheckArch(const std::string& arch) {
  static const std::regex kArch("sm_[0-9]{2,3}[af]?");
  if (!std::regex_match(arch.begin(), arch.end(), kArch)) {
    return absl::InvalidArgumentError(
        text::Cat("'", arch, "' is not a GPU architecture (examples: sm_90, sm_90a, sm_100a)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseFleetArchs(const std::string& list) {
  std::vector<std::string> archs;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    const std::string arch(absl::StripAsciiWhitespace(part));
    JITD_RETURN_IF_ERROR(CheckArch(arch));
    if (std::find(archs.begin(), archs.end(), arch) != archs.end()) {
      return absl::InvalidArgumentError(text::Cat("names ", arch, " twice"));
    }
    archs.push_back(arch);
  }
  return archs;
}

absl::Status CheckRemoteUrl(const std::string& url) { return cache::ParseRemoteUrl(url).status(); }

absl::Status CheckRemoteTimeout(int64_t milliseconds) {
  if (milliseconds < 10 || milliseconds > 60000) {
    return absl::InvalidArgumentError(text::Cat(milliseconds, " ms is out of range (10..60000)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRemoteMaxValueBytes(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 20) || bytes > (uint64_t{4} << 30)) {
    return absl::InvalidArgumentError(text::Cat(bytes, " bytes is out of range (1M..4G)"));
  }
  return absl::OkStatus();
}

absl::Status CheckMetricsListen(const std::string& address) {
  absl::StatusOr<ListenAddress> parsed = ParseListenAddress(address);
  if (!parsed.ok() || parsed->kind != ListenAddress::Kind::kTcp) {
    return absl::InvalidArgumentError(text::Cat("'", address, "' is not HOST:PORT (example: 127.0.0.1:9464)"));
  }
  return absl::OkStatus();
}

absl::Status CheckWorkers(int64_t workers) {
  if (workers < 1 || workers > kMaxWorkers) {
    return absl::InvalidArgumentError(text::Cat(workers, " workers is out of range (1..", kMaxWorkers, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckMaxQueue(int64_t max_queue) {
  if (max_queue < 1 || max_queue > kMaxMaxQueue) {
    return absl::InvalidArgumentError(
        text::Cat(max_queue, " waiting compiles is out of range (1..", kMaxMaxQueue, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckNegativeTtl(int64_t seconds) {
  if (seconds < 0 || seconds > kMaxNegativeTtlSeconds) {
    return absl::InvalidArgumentError(
        text::Cat(seconds, " s is out of range (0..", kMaxNegativeTtlSeconds, " s; 0 turns the negative cache off)"));
  }
  return absl::OkStatus();
}

}  // namespace jitd::daemon
