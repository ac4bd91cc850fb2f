// One compile worker process as WorkerPool sees it: started with
// posix_spawn (never a bare fork: the daemon runs gRPC threads), spoken to
// over a socketpair, ended and reaped exactly once.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/detail/worker_protocol.h"

namespace jitd::compiler::detail {

// The worker's end of the socketpair, as the worker sees it (--fd).
inline constexpr int kWorkerSocketFd = 3;

// Not thread-safe: one thread (a pool slot) owns each WorkerProcess.
class WorkerProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Runs `argv` + {"--fd", "3", "--pch-dir", pch_dir} with the worker's end
  // of a new socketpair as fd 3, every other descriptor but stdout/stderr
  // closed, stdin from /dev/null, default signal dispositions, an empty
  // signal mask and its own process group (a Ctrl-C meant for the daemon
  // does not kill compiles mid-flight; the pool ends them). Empties pch_dir
  // first. Then says hello and waits for the answer until
  // `handshake_deadline`.
  // Errors: UNAVAILABLE if the program cannot be started, exits, answers
  // something that is not a worker hello, or speaks another protocol
  // version; DEADLINE_EXCEEDED if it does not answer in time. A process that
  // was started is killed and reaped before the error returns.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Spawn(const std::vector<std::string>& argv,
                                                              const std::filesystem::path& pch_dir,
                                                              Clock::time_point handshake_deadline);

  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  // Terminate(0) if still running: SIGKILL and reap.
  ~WorkerProcess();

  pid_t pid() const { return pid_; }
  const HelloAck& hello() const { return hello_; }

  // For a worker with nothing in flight: false if its socket shows EOF (it
  // died) or unsolicited bytes (it is confused). Does not block.
  bool IdleAndAlive();

  // Writes one frame. UNAVAILABLE if the worker is gone, DEADLINE_EXCEEDED
  // if it stops reading until `deadline`.
  absl::Status Send(std::string_view payload, Clock::time_point deadline);

  enum class Event {
    kFrame,    // a whole frame arrived: Received::payload
    kClosed,   // EOF: the worker exited or closed its socket
    kWake,     // `wake_fd` (an eventfd) became readable; it has been drained
    kTimeout,  // `deadline` passed
  };
  struct Received {
    Event event = Event::kTimeout;
    std::string payload;
  };
  // Waits for the next of the events above. Frames already buffered are
  // returned before anything else. `wake_fd` may be -1. INVALID_ARGUMENT if
  // the worker announced an oversized frame, UNAVAILABLE on a read error.
  absl::StatusOr<Received> Receive(int wake_fd, Clock::time_point deadline);

  // Ends the process and reaps it: closes the socket (an idle worker exits
  // on EOF), waits up to `grace` for it to exit, then SIGKILLs it and waits.
  // Returns the waitpid status, or -1 if it was unknowable (ECHILD: SIGCHLD
  // ignored by the host process). Idempotent.
  int Terminate(std::chrono::milliseconds grace);

  // "died with signal 9 (SIGKILL)", "exited with status 1", ...
  static std::string DescribeExit(int wait_status);

 private:
  WorkerProcess(pid_t pid, int socket_fd);
  // Waits for the process to exit until `deadline`; true once reaped.
  bool WaitForExit(Clock::time_point deadline);
  bool Reaped(int options);  // one waitpid call; true once reaped

  pid_t pid_;
  int socket_fd_;
  int pidfd_ = -1;  // for a bounded wait on exit; -1 where pidfd_open is unavailable
  bool eof_ = false;
  bool reaped_ = false;
  int wait_status_ = -1;
  HelloAck hello_;
  FrameParser parser_;
};

}  // namespace jitd::compiler::detail
