#include "compiler/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <system_error>
#include <thread>

#include "compiler/spawn_setup.h"
#include "jitd/base/files.h"
#include "jitd/base/text.h"

namespace jitd::compiler {
namespace {

using Clock = std::chrono::steady_clock;
using text::Cat;

// Fills `setup` for a command: stdin from /dev/null; stdout to `out_fd`
// when it is >= 0, else to `log` (appended) or /dev/null; stderr to `log`
// or /dev/null; nothing else inherited; every signal at its default and
// unblocked; in `cwd` when it is not empty. 0 or an errno value.
int PrepareCommandSpawn(SpawnSetup& setup, const std::filesystem::path& cwd, const std::filesystem::path& log,
                        int out_fd) {
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  const char* sink = log.empty() ? "/dev/null" : log.c_str();
  posix_spawn_file_actions_t* actions = setup.actions();
  int rc = posix_spawnattr_setflags(setup.attr(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (rc == 0) rc = posix_spawnattr_setsigmask(setup.attr(), &empty);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(setup.attr(), &all);
  if (rc == 0) rc = posix_spawn_file_actions_addopen(actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = posix_spawn_file_actions_addopen(actions, STDERR_FILENO, sink, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (rc == 0) {
    rc = out_fd >= 0 ? posix_spawn_file_actions_adddup2(actions, out_fd, STDOUT_FILENO)
                     : posix_spawn_file_actions_adddup2(actions, STDERR_FILENO, STDOUT_FILENO);
  }
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(actions, STDERR_FILENO + 1);
  if (rc == 0 && !cwd.empty()) rc = posix_spawn_file_actions_addchdir_np(actions, cwd.c_str());
  return rc;
}

// Kills a command still running: with every process of this process's
// group when `group` is set and this process leads it (a compile worker:
// it ignores the SIGTERM it sends its group), else the command alone.
void KillCommand(pid_t pid, bool group) {
  if (group && getpgrp() == getpid()) {
    // A signal a process sends its own group reaches it before kill()
    // returns, so the disposition is restored before any other arrives.
    const auto previous = std::signal(SIGTERM, SIG_IGN);
    kill(-getpgrp(), SIGTERM);
    std::signal(SIGTERM, previous);
  }
  kill(pid, SIGKILL);
}

absl::StatusOr<pid_t> Spawn(const Command& command, int out_fd) {
  if (command.argv.empty()) return absl::InternalError("no command to run");
  if (!command.log.empty()) {  // the command line heads its part of the log
    const std::string line = Cat("$ ", text::Join(command.argv, " "), "\n");
    files::UniqueFd fd(open(command.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    if (fd.valid() && write(fd.get(), line.data(), line.size()) < 0) {
      // The log is for people; a failed write does not fail the command.
    }
  }
  SpawnSetup setup;
  if (const int rc = PrepareCommandSpawn(setup, command.cwd, command.log, out_fd); rc != 0) {
    return absl::InternalError(
        Cat("cannot prepare to run ", command.argv.front(), ": ", std::generic_category().message(rc)));
  }
  std::vector<char*> argv, env;
  for (const std::string& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : command.env) env.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  env.push_back(nullptr);
  pid_t pid = -1;
  if (const int rc = posix_spawn(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), env.data()); rc != 0) {
    return absl::InternalError(Cat("cannot run ", command.argv.front(), ": ", std::generic_category().message(rc)));
  }
  return pid;
}

absl::Status ExitStatus(const std::string& program, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  if (WIFEXITED(status)) return absl::InvalidArgumentError(Cat(program, " exited with status ", WEXITSTATUS(status)));
  return absl::InvalidArgumentError(Cat(program, " was killed by signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0));
}

// Waits for `pid`, polling `cancel` and `deadline` every 10 ms.
absl::Status Wait(const Command& command, pid_t pid, const std::atomic<bool>* cancel, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return absl::InternalError(Cat("waiting for ", command.argv.front(), " failed"));
    const bool cancelled = cancel != nullptr && cancel->load();
    if (cancelled || Clock::now() >= deadline) {
      KillCommand(pid, command.kill_process_group);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (cancelled) return absl::CancelledError(Cat(command.argv.front(), " was cancelled"));
      return absl::DeadlineExceededError(Cat(command.argv.front(), " ran past its deadline and was killed"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ExitStatus(command.argv.front(), status);
}

}  // namespace

absl::Status RunCommand(const Command& command, const std::atomic<bool>* cancel, Clock::time_point deadline) {
  absl::StatusOr<pid_t> pid = Spawn(command, -1);
  if (!pid.ok()) return pid.status();
  return Wait(command, *pid, cancel, deadline);
}

absl::StatusOr<std::string> CommandOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                          std::chrono::milliseconds timeout) {
  constexpr size_t kMaxOutput = 1 << 20;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(Cat("pipe failed: ", std::strerror(errno)));
  files::UniqueFd read_end(fds[0]), write_end(fds[1]);
  const Command command{argv, env, {}, {}, /*kill_process_group=*/false};
  absl::StatusOr<pid_t> pid = Spawn(command, write_end.get());
  write_end.Close();
  if (!pid.ok()) return pid.status();
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string out;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{read_end.get(), POLLIN, 0};
    if (left <= 0 || poll(&pfd, 1, static_cast<int>(left)) == 0) break;  // Wait() kills it
    const ssize_t n = read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < kMaxOutput) out.append(buffer, static_cast<size_t>(n));
  }
  read_end.Close();
  if (absl::Status s = Wait(command, *pid, nullptr, deadline); !s.ok()) return s;
  return out;
}

}  // namespace jitd::compiler
