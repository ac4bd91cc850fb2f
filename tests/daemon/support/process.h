// Child processes for integration tests: jitd and jitctl run as real
// programs, exactly as users run them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace jitd::testing {

// A started child whose stdout and stderr go to one log file.
class Process {
 public:
  // Starts argv[0] with argv, the test's environment plus `env` (a value
  // replaces the variable; an empty value removes it). Aborts the test
  // binary (throws) only when the program cannot be started at all.
  Process(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
          const std::map<std::string, std::string>& env = {});
  // Kills the child if it still runs, so a failed test leaves nothing behind.
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal) const;

  // The exit code (128 + N when killed by signal N) once the child exits,
  // or nullopt when it is still running after `timeout`. Waits on a pidfd,
  // so it returns the moment the child exits.
  std::optional<int> WaitForExit(std::chrono::milliseconds timeout);
  // Whether the child has exited (reaping it if so).
  bool Exited();

  // Everything the child wrote so far.
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path log_path_;
};

struct ProcessResult {
  // Exit code, or -1 when the program ran past the timeout (then killed).
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved as written
  std::chrono::milliseconds elapsed{0};
};

// Runs a program to completion (killing it after `timeout`).
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
                         std::chrono::milliseconds timeout, const std::map<std::string, std::string>& env = {});

}  // namespace jitd::testing
