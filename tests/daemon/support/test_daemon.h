// A real jitd process serving one test, on a Unix socket and a cache
// directory inside the test's TempDir.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jitd/client.h"
#include "process.h"
#include "temp_dir.h"

namespace jitd::testing {

// Bounds how long a test waits for a daemon to become ready or to exit: far
// above the ~50 ms a start takes, so only a hang or a crash reaches it.
inline constexpr std::chrono::seconds kProcessTimeout{20};

// Paths of the binaries under test (set by CMake from the targets).
inline const char* JitdBinary() { return JITD_BINARY; }
inline const char* JitctlBinary() { return JITCTL_BINARY; }

class TestDaemon {
 public:
  // Starts `jitd serve --listen unix:DIR/jitd.sock --cache-dir DIR/cache`
  // plus `extra_args` (later flags win over these defaults only where
  // jitd lets them: --listen adds, the others replace).
  // `launcher`, when given, runs first and execs jitd with its arguments
  // (e.g. {"/usr/bin/prlimit", "--nofile=128:128", "--"}): the process is
  // still jitd's, by pid.
  explicit TestDaemon(const TempDir& dir, const std::vector<std::string>& extra_args = {},
                      const std::map<std::string, std::string>& env = {},
                      const std::vector<std::string>& launcher = {});
  // Stops the daemon as an operator would (SIGTERM), so that it removes
  // what it made (socket, worker scratch directory); SIGKILL if it hangs.
  ~TestDaemon();
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  // Polls grpc.health.v1.Health/Check until SERVING, failing early (with
  // the daemon's output) if it exits first, and at kProcessTimeout.
  absl::Status WaitUntilServing();

  // Polls the daemon's output until its ready line ("jitd ready"), which
  // it logs just after it starts to answer health checks: a test that
  // reads that line waits for it, not only for SERVING.
  absl::Status WaitUntilLoggedReady();

  // A client for this daemon, optionally carrying an admin token, whose
  // unary calls give up after `call_timeout`.
  std::unique_ptr<Client> Connect(const std::string& admin_token = "",
                                  std::chrono::milliseconds call_timeout = std::chrono::seconds(10)) const;

  // The daemon's Stats (cache and request-path counters); throws if the
  // call fails.
  v1::StatsResponse Stats() const;

  // Runs `jitctl --endpoint <this daemon> args...` to completion (killed
  // after `timeout`).
  ProcessResult Jitctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout = kProcessTimeout) const;

  std::string endpoint() const { return "unix:" + socket_path_.string(); }
  const std::filesystem::path& socket_path() const { return socket_path_; }
  const std::filesystem::path& cache_dir() const { return cache_dir_; }
  Process& process() { return *process_; }

  // Default arguments for a daemon in `dir`, for tests that start jitd
  // themselves (to watch it fail).
  static std::vector<std::string> DefaultArgs(const TempDir& dir);

 private:
  std::filesystem::path dir_;
  std::filesystem::path socket_path_;
  std::filesystem::path cache_dir_;
  std::unique_ptr<Process> process_;
};

}  // namespace jitd::testing
