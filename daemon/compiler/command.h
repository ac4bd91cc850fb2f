// Running a command of the toolchain (nvcc, the host compiler, their
// --version): posix_spawn (never a bare fork: the daemon runs gRPC
// threads), an environment of the caller's choosing, no descriptor of ours
// inherited, every signal at its default.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::compiler {

struct Command {
  std::vector<std::string> argv;  // argv[0] a path: no PATH search
  std::vector<std::string> env;   // exactly this environment
  std::filesystem::path cwd;      // empty: ours
  // stdout and stderr are appended here (the command line first); empty:
  // both go to /dev/null.
  std::filesystem::path log;
  // For a compile worker only, which leads its own process group (the pool
  // starts it so): a cancel or deadline kills the whole group but the
  // worker, so that what the command started (nvcc's cicc, ptxas, the host
  // compiler) dies with it. Elsewhere the group may hold others (a shell
  // pipeline): false kills the command alone.
  bool kill_process_group = false;
};

// Runs `command` to its end, or until `cancel` is set or `deadline` passes:
// then it is killed (see Command::kill_process_group). OK for exit
// status 0; INVALID_ARGUMENT "PROGRAM exited with status N" (or "was
// killed by signal N") otherwise; CANCELLED, DEADLINE_EXCEEDED; INTERNAL
// when it cannot be started.
absl::Status RunCommand(const Command& command, const std::atomic<bool>* cancel = nullptr,
                        std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

// What `argv` prints on stdout (stderr discarded), run with `env`; at most
// 1 MiB is kept. Fails as RunCommand does, and past `timeout`.
absl::StatusOr<std::string> CommandOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace jitd::compiler
