#include "config.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <system_error>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "jitd/base/endpoint.h"
#include "listen_address.h"
#include "remote.h"
#include "toolkit_watch.h"

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

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

template <typename T>
void Overlay(std::optional<T>& into, const std::optional<T>& from) {
  if (from.has_value()) into = from;
}

}  // namespace

std::filesystem::path DefaultCacheDir() {
  if (std::string cache_home = EnvOrEmpty("XDG_CACHE_HOME"); !cache_home.empty()) {
    return std::filesystem::path(cache_home) / "jitd";
  }
  // $HOME, else the password database's home, as the default socket's
  // rule (client/src/endpoint.cpp): both then agree where HOME is unset.
  std::string home = EnvOrEmpty("HOME");
  if (home.empty()) {
    if (const passwd* entry = getpwuid(getuid()); entry != nullptr && entry->pw_dir != nullptr) home = entry->pw_dir;
  }
  if (home.empty()) home = "/tmp";
  return std::filesystem::path(home) / ".cache" / "jitd";
}

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
  Overlay(merged.listen, flags.listen);
  Overlay(merged.cache_dir, flags.cache_dir);
  Overlay(merged.kernels_dir, flags.kernels_dir);
  Overlay(merged.cuda_include, flags.cuda_include);
  Overlay(merged.max_cache_bytes, flags.max_cache_bytes);
  Overlay(merged.workers, flags.workers);
  Overlay(merged.arch, flags.arch);
  Overlay(merged.remote, flags.remote);
  Overlay(merged.remote_password_file, flags.remote_password_file);
  Overlay(merged.remote_tls_ca, flags.remote_tls_ca);
  Overlay(merged.remote_tls_cert, flags.remote_tls_cert);
  Overlay(merged.remote_tls_key, flags.remote_tls_key);
  Overlay(merged.remote_timeout, flags.remote_timeout);
  Overlay(merged.remote_max_value_bytes, flags.remote_max_value_bytes);
  Overlay(merged.remote_signing_key_file, flags.remote_signing_key_file);
  Overlay(merged.metrics_listen, flags.metrics_listen);
  Overlay(merged.admin_token_file, flags.admin_token_file);
  Overlay(merged.max_queue, flags.max_queue);
  Overlay(merged.hot_cache_bytes, flags.hot_cache_bytes);
  Overlay(merged.negative_ttl, flags.negative_ttl);
  Overlay(merged.log_hits, flags.log_hits);
  Overlay(merged.local_path, flags.local_path);
  Overlay(merged.allow_guard_findings, flags.allow_guard_findings);
  Overlay(merged.tls_cert, flags.tls_cert);
  Overlay(merged.tls_key, flags.tls_key);
  Overlay(merged.tls_client_ca, flags.tls_client_ca);
  Overlay(merged.insecure_tcp, flags.insecure_tcp);
  Overlay(merged.socket_group, flags.socket_group);
  Overlay(merged.max_calls_per_peer, flags.max_calls_per_peer);
  Overlay(merged.max_connections, flags.max_connections);
  Overlay(merged.max_connections_per_peer, flags.max_connections_per_peer);
  Overlay(merged.listen_probe_interval, flags.listen_probe_interval);

  DaemonConfig config;
  config.listen = merged.listen.value_or(std::vector<std::string>{});
  if (config.listen.empty()) config.listen.push_back(DefaultEndpoint());
  config.cache_dir = merged.cache_dir.value_or(DefaultCacheDir());
  config.kernels_dir = merged.kernels_dir.value_or(DefaultKernelsDir());
  config.cuda_include = merged.cuda_include.value_or(std::filesystem::path(compiler::kDefaultCudaInclude));
  config.max_cache_bytes = merged.max_cache_bytes.value_or(kDefaultMaxCacheBytes);
  config.workers = merged.workers.value_or(std::max(1u, std::thread::hardware_concurrency()));
  config.arch = merged.arch.value_or(std::string(kDefaultArch));
  config.remote = merged.remote.value_or("");
  config.remote_password_file = merged.remote_password_file.value_or("");
  config.remote_tls_ca = merged.remote_tls_ca.value_or("");
  config.remote_tls_cert = merged.remote_tls_cert.value_or("");
  config.remote_tls_key = merged.remote_tls_key.value_or("");
  config.remote_timeout = merged.remote_timeout.value_or(kDefaultRemoteTimeout);
  config.remote_max_value_bytes = merged.remote_max_value_bytes.value_or(kDefaultRemoteMaxValueBytes);
  config.remote_signing_key_file = merged.remote_signing_key_file.value_or("");
  config.metrics_listen = merged.metrics_listen.value_or("");
  config.admin_token_file = merged.admin_token_file.value_or("");
  config.max_queue = merged.max_queue.value_or(kDefaultMaxQueue);
  config.hot_cache_bytes = merged.hot_cache_bytes.value_or(kDefaultHotCacheBytes);
  config.negative_ttl = merged.negative_ttl.value_or(kDefaultNegativeTtl);
  config.log_hits = merged.log_hits.value_or(false);
  config.local_path = merged.local_path.value_or(true);
  config.allow_guard_findings = merged.allow_guard_findings.value_or(false);
  config.tls_cert = merged.tls_cert.value_or("");
  config.tls_key = merged.tls_key.value_or("");
  config.tls_client_ca = merged.tls_client_ca.value_or("");
  config.insecure_tcp = merged.insecure_tcp.value_or(false);
  config.socket_group = merged.socket_group.value_or("");
  config.max_calls_per_peer = merged.max_calls_per_peer.value_or(kDefaultMaxCallsPerPeer);
  config.max_connections = merged.max_connections;
  config.max_connections_per_peer = merged.max_connections_per_peer;
  config.listen_probe_interval = merged.listen_probe_interval.value_or(kDefaultListenProbeInterval);
  return config;
}

absl::Status CheckListenAddress(const std::string& address) { return ParseListenAddress(address).status(); }

absl::Status CheckGroupName(const std::string& group) {
  if (group.empty()) return absl::InvalidArgumentError("a group name is empty");
  if (::getgrnam(group.c_str()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no group '", group, "' on this host (see /etc/group)"));
  }
  return absl::OkStatus();
}

absl::Status CheckArch(const std::string& arch) {
  static const std::regex kArch("sm_[0-9]{2,3}[af]?");
  if (!std::regex_match(arch.begin(), arch.end(), kArch)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", arch, "' is not a GPU architecture (examples: sm_90, sm_90a, sm_100a)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRemoteUrl(const std::string& url) { return cache::ParseRemoteUrl(url).status(); }

absl::Status CheckRemoteTimeout(int64_t milliseconds) {
  if (milliseconds < 10 || milliseconds > 60000) {
    return absl::InvalidArgumentError(absl::StrCat(milliseconds, " ms is out of range (10..60000)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRemoteMaxValueBytes(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 20) || bytes > (uint64_t{4} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(bytes, " bytes is out of range (1M..4G)"));
  }
  return absl::OkStatus();
}

absl::Status CheckMetricsListen(const std::string& address) {
  absl::StatusOr<ListenAddress> parsed = ParseListenAddress(address);
  if (!parsed.ok() || parsed->kind != ListenAddress::Kind::kTcp) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT (example: 127.0.0.1:9464)"));
  }
  return absl::OkStatus();
}

absl::Status CheckWorkers(int64_t workers) {
  if (workers < 1 || workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(workers, " workers is out of range (1..", kMaxWorkers, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckMaxQueue(int64_t max_queue) {
  if (max_queue < 1 || max_queue > kMaxMaxQueue) {
    return absl::InvalidArgumentError(
        absl::StrCat(max_queue, " waiting compiles is out of range (1..", kMaxMaxQueue, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckNegativeTtl(int64_t seconds) {
  if (seconds < 0 || seconds > kMaxNegativeTtlSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(seconds, " s is out of range (0..", kMaxNegativeTtlSeconds,
                                                   " s; 0 turns the negative cache off)"));
  }
  return absl::OkStatus();
}

}  // namespace jitd::daemon
