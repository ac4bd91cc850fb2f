#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace jitd::testing {
namespace {

std::vector<std::string> MergedEnvironment(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> merged;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t equals = text.find('=');
    if (equals != std::string::npos) merged[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [name, value] : overrides) {
    if (value.empty()) {
      merged.erase(name);
    } else {
      merged[name] = value;
    }
  }
  std::vector<std::string> result;
  for (const auto& [name, value] : merged) result.push_back(name + "=" + value);
  return result;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Process::Process(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
                 const std::map<std::string, std::string>& env)
    : log_path_(log_path) {
  std::vector<std::string> args = argv;
  std::vector<std::string> environment = MergedEnvironment(env);
  std::vector<char*> arg_pointers = Pointers(args);
  std::vector<char*> env_pointers = Pointers(environment);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The child starts with no signal blocked, whatever the test's threads do.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  const int error =
      posix_spawn(&pid_, arg_pointers[0], &actions, &attributes, arg_pointers.data(), env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  }
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
}

Process::~Process() {
  if (!exit_code_.has_value()) {
    kill(pid_, SIGKILL);
    WaitForExit(std::chrono::seconds(10));
  }
  if (pidfd_ >= 0) close(pidfd_);
}

void Process::Signal(int signal) const { kill(pid_, signal); }

bool Process::Exited() {
  if (exit_code_.has_value()) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) exit_code_ = DecodeWaitStatus(status);
  return exit_code_.has_value();
}

std::optional<int> Process::WaitForExit(std::chrono::milliseconds timeout) {
  if (Exited()) return exit_code_;
  pollfd readable{pidfd_, POLLIN, 0};
  if (poll(&readable, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, 0) == pid_) exit_code_ = DecodeWaitStatus(status);
  return exit_code_;
}

std::string Process::Output() const {
  std::ifstream file(log_path_);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
                         std::chrono::milliseconds timeout, const std::map<std::string, std::string>& env) {
  const auto started = std::chrono::steady_clock::now();
  std::filesystem::remove(log_path);
  Process process(argv, log_path, env);
  ProcessResult result;
  result.exit_code = process.WaitForExit(timeout).value_or(-1);
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  result.output = process.Output();
  return result;
}

}  // namespace jitd::testing
