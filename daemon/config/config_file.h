// The daemon's TOML config file (--config FILE). Keys are the long flags
// with '_' for '-', and a flag given on the command line wins over its key:
//
//   listen = ["unix:/run/jitd/jitd.sock", "127.0.0.1:7070"]  # or one string
//   cache_dir = "/var/cache/jitd"
//   kernels = "/usr/share/jitd/kernels"
//   max_cache_bytes = "10G"          # or an integer number of bytes
//   workers = 8
//   arch = "sm_90a"
//   remote = "redis://cache.internal:6379/0"
//   metrics_listen = "127.0.0.1:9464"
//   admin_token_file = "/etc/jitd/admin-token"
//   max_queue = 256                  # compiles waiting for a worker
//   hot_cache_bytes = "256M"         # or an integer number of bytes
//   negative_ttl = "30s"             # or an integer number of seconds
//   log_hits = false
//   local_path = true                # the local path beside gRPC on Unix sockets
//   allow_guard_findings = false
//
// Relative paths (cache_dir, kernels, admin_token_file, unix: listen
// addresses) are relative to the config file's directory, so a file means
// the same thing whatever directory the daemon starts in.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace jitd::daemon {

// What the file at `path` sets. INVALID_ARGUMENT, naming the file, line and
// key, for a TOML syntax error, an unknown key, a value of the wrong type or
// a value out of range; NOT_FOUND when the file cannot be read.
absl::StatusOr<ConfigLayer> ReadConfigFile(const std::filesystem::path& path);

// Every key ReadConfigFile accepts, sorted (tests check that
// deploy/jitd.toml documents each of them).
std::vector<std::string> ConfigFileKeys();

}  // namespace jitd::daemon
