#include "compiler/detail/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>

#include "compiler/spawn_setup.h"
#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

extern char** environ;

namespace jitd::compiler::detail {
namespace {

std::string Errno(const std::string& what, int error) { return text::Cat(what, ": ", std::strerror(error)); }

// Milliseconds until `deadline` for poll(): never negative, -1 for "forever".
int PollTimeout(WorkerProcess::Clock::time_point deadline) {
  if (deadline == WorkerProcess::Clock::time_point::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - WorkerProcess::Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000 ? 1'000'000 : static_cast<int>(left);
}

// Fills `setup` for a worker: its own process group (the pool kills the
// group, nvcc and the host compiler of a module build with it), the
// signals it needs at their defaults, the socket as kWorkerSocketFd and
// nothing else. 0 or an errno value.
int PrepareWorkerSpawn(SpawnSetup& setup, int child_socket) {
  sigset_t empty;
  sigemptyset(&empty);
  // Dispositions the daemon may have set to SIG_IGN survive exec; these
  // the worker needs at their defaults (handlers are reset by exec anyway).
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
  int rc =
      posix_spawnattr_setflags(setup.attr(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  if (rc == 0) rc = posix_spawnattr_setsigmask(setup.attr(), &empty);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(setup.attr(), &defaults);
  if (rc == 0) rc = posix_spawnattr_setpgroup(setup.attr(), 0);
  // dup2 onto itself (child_socket == 3) clears FD_CLOEXEC (glibc >= 2.29,
  // POSIX 2024); onto another number the copy has no FD_CLOEXEC anyway.
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(setup.actions(), child_socket, kWorkerSocketFd);
  // Whatever the host process leaked without O_CLOEXEC stays out.
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(setup.actions(), kWorkerSocketFd + 1);
  if (rc == 0) rc = posix_spawn_file_actions_addopen(setup.actions(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  return rc;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(const std::vector<std::string>& argv,
                                                                    const std::filesystem::path& pch_dir,
                                                                    Clock::time_point handshake_deadline) {
  if (argv.empty()) return absl::InvalidArgumentError("empty compile worker command line");
  files::EmptyDirectory(pch_dir);

  std::array<int, 2> fds{};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()) != 0) {
    return absl::UnavailableError(Errno("socketpair for a compile worker", errno));
  }
  const int parent_socket = fds[0];
  const int child_socket = fds[1];

  std::vector<std::string> args = argv;
  args.insert(args.end(), {"--fd", std::to_string(kWorkerSocketFd), "--pch-dir", pch_dir.string()});
  std::vector<char*> c_args;
  c_args.reserve(args.size() + 1);
  for (std::string& arg : args) c_args.push_back(arg.data());
  c_args.push_back(nullptr);

  SpawnSetup setup;
  pid_t pid = -1;
  int rc = PrepareWorkerSpawn(setup, child_socket);
  if (rc == 0) rc = posix_spawnp(&pid, c_args[0], setup.actions(), setup.attr(), c_args.data(), environ);
  close(child_socket);
  if (rc != 0) {
    close(parent_socket);
    return absl::UnavailableError(Errno(text::Cat("could not start compile worker ", argv[0]), rc));
  }
  fcntl(parent_socket, F_SETFL, fcntl(parent_socket, F_GETFL) | O_NONBLOCK);
  std::unique_ptr<WorkerProcess> worker(new WorkerProcess(pid, parent_socket));

  const std::string who = text::Cat("compile worker ", argv[0], " (pid ", pid, ")");
  absl::Status status = worker->Send(Encode(Hello{}), handshake_deadline);
  if (!status.ok()) return absl::UnavailableError(text::Cat(who, " did not take its hello: ", status.message()));
  absl::StatusOr<Received> answer = worker->Receive(-1, handshake_deadline);
  if (!answer.ok()) return absl::UnavailableError(text::Cat(who, ": ", answer.status().message()));
  switch (answer->event) {
    case Event::kFrame:
      break;
    case Event::kClosed:
      return absl::UnavailableError(
          text::Cat(who, " ", DescribeExit(worker->Terminate(std::chrono::seconds(1))), " before answering its hello"));
    case Event::kTimeout:
    case Event::kWake:
      return absl::DeadlineExceededError(text::Cat(who, " did not answer its hello in time"));
  }
  absl::StatusOr<HelloAck> ack = DecodeHelloAck(answer->payload);
  if (!ack.ok()) return absl::UnavailableError(text::Cat(who, ": ", ack.status().message()));
  if (ack->version != kProtocolVersion) {
    return absl::UnavailableError(text::Cat(who, " speaks protocol version ", ack->version, ", expected ",
                                            kProtocolVersion, " (a worker binary from another build?)"));
  }
  worker->hello_ = *ack;
  return worker;
}

WorkerProcess::WorkerProcess(pid_t pid, int socket_fd) : pid_(pid), socket_fd_(socket_fd) {
  // A pidfd gives Terminate a bounded wait without polling waitpid.
  // (glibc 2.36's <sys/pidfd.h> lacks extern "C", so the raw syscall.)
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd_ >= 0) fcntl(pidfd_, F_SETFD, FD_CLOEXEC);
}

WorkerProcess::~WorkerProcess() { Terminate(std::chrono::milliseconds(0)); }

bool WorkerProcess::IdleAndAlive() {
  if (eof_ || reaped_ || socket_fd_ < 0) return false;
  if (parser_.pending_bytes() > 0) return false;
  pollfd pfd{socket_fd_, POLLIN, 0};
  const int n = poll(&pfd, 1, 0);
  // Readable means EOF or bytes nobody asked for: either way not usable.
  return n == 0;
}

absl::Status WorkerProcess::Send(std::string_view payload, Clock::time_point deadline) {
  if (socket_fd_ < 0 || eof_) return absl::UnavailableError("the compile worker is gone");
  const std::string frame = Framed(payload);
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = send(socket_fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(Errno("write to the compile worker failed", errno));
    }
    pollfd pfd{socket_fd_, POLLOUT, 0};
    const int ready = poll(&pfd, 1, PollTimeout(deadline));
    if (ready == 0) return absl::DeadlineExceededError("the compile worker stopped reading");
    if (ready < 0 && errno != EINTR) return absl::UnavailableError(Errno("poll on the compile worker", errno));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerProcess::Received> WorkerProcess::Receive(int wake_fd, Clock::time_point deadline) {
  for (;;) {
    JITD_ASSIGN_OR_RETURN(std::optional<std::string> frame, parser_.Next());
    if (frame.has_value()) return Received{Event::kFrame, *std::move(frame)};
    if (eof_ || socket_fd_ < 0) return Received{Event::kClosed, {}};

    std::array<pollfd, 2> pfds{pollfd{socket_fd_, POLLIN, 0}, pollfd{wake_fd, POLLIN, 0}};
    const int ready = poll(pfds.data(), pfds.size(), PollTimeout(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(Errno("poll on the compile worker", errno));
    }
    if (ready == 0) return Received{Event::kTimeout, {}};
    if (pfds[0].revents != 0) {
      // Read what is there; the loop head hands out whole frames.
      std::array<char, size_t{64} << 10> buffer;
      for (;;) {
        const ssize_t n = read(socket_fd_, buffer.data(), buffer.size());
        if (n > 0) {
          parser_.Append(buffer.data(), static_cast<size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || errno == ECONNRESET) {
          eof_ = true;  // it exited (or was killed)
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
          return absl::UnavailableError(Errno("read from the compile worker failed", errno));
        }
        break;  // EOF, or everything there was has been read
      }
      continue;
    }
    if (pfds[1].revents != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t drained = read(wake_fd, &count, sizeof(count));
      return Received{Event::kWake, {}};
    }
  }
}

bool WorkerProcess::Reaped(int options) {
  if (reaped_) return true;
  int status = 0;
  for (;;) {
    const pid_t rc = waitpid(pid_, &status, options);
    if (rc == pid_) {
      wait_status_ = status;
      reaped_ = true;
    } else if (rc < 0 && errno == EINTR) {
      continue;
    } else if (rc < 0) {
      reaped_ = true;  // ECHILD: SIGCHLD is ignored or someone else reaped it
      wait_status_ = -1;
    }
    return reaped_;
  }
}

bool WorkerProcess::WaitForExit(Clock::time_point deadline) {
  while (!Reaped(WNOHANG)) {
    const int timeout = PollTimeout(deadline);
    if (timeout == 0) return false;
    if (pidfd_ >= 0) {
      pollfd pfd{pidfd_, POLLIN, 0};
      if (poll(&pfd, 1, timeout) == 0) return Reaped(WNOHANG);
    } else {
      // No pidfd (old kernel or a seccomp filter): poll waitpid briefly.
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout, 5)));
    }
  }
  return true;
}

int WorkerProcess::Terminate(std::chrono::milliseconds grace) {
  if (socket_fd_ >= 0) {
    close(socket_fd_);
    socket_fd_ = -1;
  }
  if (!reaped_) {
    if (grace.count() <= 0 || !WaitForExit(Clock::now() + grace)) {
      // The worker leads its own process group (POSIX_SPAWN_SETPGROUP):
      // the group takes the nvcc and host compiler of a module build with it.
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      Reaped(0);
    }
  }
  if (pidfd_ >= 0) {
    close(pidfd_);
    pidfd_ = -1;
  }
  return wait_status_;
}

std::string WorkerProcess::DescribeExit(int wait_status) {
  if (wait_status == -1) return "exited (status unknown)";
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = sigabbrev_np(sig);
    return text::Cat("died with signal ", sig, name != nullptr ? text::Cat(" (SIG", name, ")") : "");
  }
  if (WIFEXITED(wait_status)) return text::Cat("exited with status ", WEXITSTATUS(wait_status));
  return text::Cat("stopped (wait status ", wait_status, ")");
}

}  // namespace jitd::compiler::detail
