// The daemon's settings: where they come from and what they default to.
//
// Three layers, later ones winning: built-in defaults, the TOML config file
// (--config FILE; see config_file.h), then command-line flags. Each source
// is read into a ConfigLayer that holds only what it sets, and each value is
// checked where it is read, so an error names the flag or file:line:key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace jitd::daemon {

// What one source sets; unset fields fall through to the layer below.
struct ConfigLayer {
  std::optional<std::vector<std::string>> listen;
  std::optional<std::filesystem::path> cache_dir;
  std::optional<std::filesystem::path> kernels_dir;
  std::optional<uint64_t> max_cache_bytes;
  std::optional<uint32_t> workers;
  std::optional<std::string> arch;
  std::optional<std::string> remote;
  std::optional<std::string> metrics_listen;
  std::optional<std::filesystem::path> admin_token_file;
};

// The settings the daemon runs with, every field decided.
struct DaemonConfig {
  // Endpoints to serve on ("unix:PATH" or "HOST:PORT"); never empty.
  std::vector<std::string> listen;
  std::filesystem::path cache_dir;
  std::filesystem::path kernels_dir;
  // Byte budget of the on-disk cache; 0 = unbounded.
  uint64_t max_cache_bytes = 0;
  // Compile workers (used once the compiler is built in).
  uint32_t workers = 1;
  // Architecture for requests that name none.
  std::string arch;
  // Shared remote tier ("redis://HOST:PORT/DB" or "unix://PATH"); empty = none.
  std::string remote;
  // Prometheus endpoint ("HOST:PORT"); empty = none.
  std::string metrics_listen;
  // Token file guarding state-changing admin calls; empty = no guard.
  std::filesystem::path admin_token_file;
};

// 10 GiB: cubins are 10 KiB to a few MiB, so this holds every instantiation
// of a large model's kernels for several archs, yet stays a small share of
// a build machine's disk.
inline constexpr uint64_t kDefaultMaxCacheBytes = uint64_t{10} << 30;
// The default arch until the compiler can ask the GPU: Hopper, the
// architecture jitd is deployed on first.
inline constexpr std::string_view kDefaultArch = "sm_90";

// $XDG_CACHE_HOME/jitd, else ~/.cache/jitd.
std::filesystem::path DefaultCacheDir();
// <prefix>/share/jitd/kernels next to an installed binary, else the source
// tree's kernels/ (a build tree).
std::filesystem::path DefaultKernelsDir();

// Merges defaults, then `file`, then `flags`.
DaemonConfig ResolveConfig(const ConfigLayer& file, const ConfigLayer& flags);

// Checks of single values, shared by the config file and the command line
// so both accept exactly the same things. INVALID_ARGUMENT with a message
// that does not name the source: callers prefix the flag or file:line:key.
absl::Status CheckListenAddress(const std::string& address);
absl::Status CheckArch(const std::string& arch);              // sm_NN[N][a|f]
absl::Status CheckRemoteUrl(const std::string& url);          // redis://H:P[/DB] or unix://PATH
absl::Status CheckMetricsListen(const std::string& address);  // HOST:PORT
absl::Status CheckWorkers(int64_t workers);                   // 1..1024

}  // namespace jitd::daemon
