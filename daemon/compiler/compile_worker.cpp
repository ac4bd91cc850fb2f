#include "compiler/compile_worker.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include "compiler/detail/worker_protocol.h"
#include "compiler/module_build.h"
#include "compiler/nvrtc_program.h"
#include "jitd/base/files.h"
#include "jitd/base/text.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace jitd::compiler {
namespace {

using detail::CompileRequest;
using detail::CompileResponse;
using detail::MessageType;

// State shared by the reader thread (which owns reads from the socket) and
// the compiling thread (which owns writes).
class WorkerState {
 public:
  // Reader side.
  void Push(CompileRequest request) {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(request));
    cv_.notify_one();
  }
  void Cancel(std::uint64_t job_id) {
    std::lock_guard lock(mu_);
    if (current_ == job_id) {
      cancel_current_.store(true);
      return;
    }
    for (const CompileRequest& queued : queue_) {
      if (queued.job_id == job_id) cancelled_.insert(job_id);
    }
    // Otherwise the job already finished: a late cancel is not an error.
  }
  // The pool is gone (EOF) or broke the protocol: abandon everything.
  void Close(bool failed) {
    std::lock_guard lock(mu_);
    closed_ = true;
    failed_ = failed_ || failed;
    cancel_current_.store(true);
    cv_.notify_one();
  }

  // Compiler side: the next job and whether it was cancelled while queued;
  // nullopt once the connection is closed.
  std::optional<std::pair<CompileRequest, bool>> Next() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (closed_) return std::nullopt;
    CompileRequest request = std::move(queue_.front());
    queue_.pop_front();
    const bool cancelled = cancelled_.erase(request.job_id) > 0;
    current_ = request.job_id;
    cancel_current_.store(cancelled);
    return std::make_pair(std::move(request), cancelled);
  }
  void Done() {
    std::lock_guard lock(mu_);
    current_.reset();
  }
  const std::atomic<bool>* cancel_flag() const { return &cancel_current_; }
  bool failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CompileRequest> queue_;
  std::set<std::uint64_t> cancelled_;  // queued jobs cancelled before they started
  std::optional<std::uint64_t> current_;
  // Polled by NVRTC's flow callback; set only while a compile runs (or
  // before it starts), reset only by Next().
  std::atomic<bool> cancel_current_{false};
  bool closed_ = false;
  bool failed_ = false;
};

void ReadRequests(int fd, WorkerState& state) {
  for (;;) {
    absl::StatusOr<std::optional<std::string>> frame = detail::ReadFrame(fd);
    if (!frame.ok()) {
      spdlog::error("compile worker: {}", std::string(frame.status().message()));
      state.Close(/*failed=*/true);
      return;
    }
    if (!frame->has_value()) {
      state.Close(/*failed=*/false);
      return;
    }
    const std::string& payload = **frame;
    absl::StatusOr<MessageType> type = detail::TypeOf(payload);
    if (type.ok() && *type == MessageType::kCompile) {
      absl::StatusOr<CompileRequest> request = detail::DecodeCompileRequest(payload);
      if (request.ok()) {
        state.Push(*std::move(request));
        continue;
      }
      type = request.status();
    } else if (type.ok() && *type == MessageType::kCancel) {
      absl::StatusOr<detail::CancelRequest> cancel = detail::DecodeCancelRequest(payload);
      if (cancel.ok()) {
        state.Cancel(cancel->job_id);
        continue;
      }
      type = cancel.status();
    } else if (type.ok()) {
      type = absl::InvalidArgumentError(text::Cat("unexpected message type ", static_cast<int>(*type)));
    }
    spdlog::error("compile worker: protocol error: {}", std::string(type.status().message()));
    state.Close(/*failed=*/true);
    return;
  }
}

// Reads the pool's hello and answers it. False if the worker should exit;
// `*exit_code` says how.
bool Handshake(int fd, int* exit_code) {
  absl::StatusOr<std::optional<std::string>> frame = detail::ReadFrame(fd);
  if (frame.ok() && !frame->has_value()) {
    *exit_code = 0;  // closed before saying hello: nothing to do
    return false;
  }
  absl::StatusOr<detail::Hello> hello =
      frame.ok() ? detail::DecodeHello(**frame) : absl::StatusOr<detail::Hello>(frame.status());
  if (!hello.ok()) {
    spdlog::error("compile worker: bad hello: {}", std::string(hello.status().message()));
    *exit_code = 1;
    return false;
  }
  const NvrtcVersionNumber nvrtc = NvrtcVersion();
  detail::HelloAck ack;
  ack.pid = static_cast<std::uint32_t>(getpid());
  ack.nvrtc_major = static_cast<std::uint32_t>(nvrtc.major);
  ack.nvrtc_minor = static_cast<std::uint32_t>(nvrtc.minor);
  // Answer even on a version mismatch: the pool reports it with both numbers.
  if (!detail::WriteFrame(fd, detail::Encode(ack)).ok() || hello->version != detail::kProtocolVersion) {
    *exit_code = 1;
    return false;
  }
  return true;
}

}  // namespace

int RunCompileWorker(int fd, const std::filesystem::path& pch_dir) {
  // Nothing NVRTC might start may inherit the pool's socket: the pool sees
  // this worker's death as EOF, which only works if no one else holds it.
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int exit_code = 0;
  if (!Handshake(fd, &exit_code)) {
    close(fd);
    return exit_code;
  }
  files::EmptyDirectory(pch_dir);
  PchState pch;
  pch.dir = pch_dir;

  WorkerState state;
  std::thread reader(ReadRequests, fd, std::ref(state));
  while (std::optional<std::pair<CompileRequest, bool>> next = state.Next()) {
    auto& [request, cancelled_while_queued] = *next;
    CompileResponse response;
    response.job_id = request.job_id;
    const std::string received_digest = JobDigest(request.job);
    if (cancelled_while_queued) {
      response.status = absl::CancelledError(text::Cat("compile of ", request.job.program_name, " was cancelled"));
    } else if (received_digest != request.job.digest) {
      // What arrived is not what the daemon keyed: compiling it could put
      // a cubin of other bytes under the job's key.
      response.status = absl::DataLossError(text::Cat(
          "compile job for ", request.job.program_name, " arrived with digest ", received_digest, " but was sent as ",
          request.job.digest.empty() ? std::string("(none)") : request.job.digest, "; not compiled"));
      spdlog::error("compile worker: {}", std::string(response.status.message()));
    } else {
      absl::StatusOr<CompileResult> result =
          request.job.kind == ArtifactKind::kSharedObject
              ? BuildModule(request.job, pch_dir / "module-build", state.cancel_flag())
              : CompileInProcess(request.job, &pch, state.cancel_flag());
      if (result.ok()) {
        response.result = *std::move(result);
      } else {
        response.status = result.status();
      }
    }
    state.Done();
    if (!detail::WriteFrame(fd, detail::Encode(response)).ok()) break;  // the pool is gone
  }
  // Wake the reader if it is still blocked in read() (we stopped on a
  // failed write), then wait for it.
  shutdown(fd, SHUT_RDWR);
  reader.join();
  close(fd);
  return state.failed() ? 1 : 0;
}

namespace {

int WorkerUsage(const char* argv0) {
  std::fprintf(stderr, "usage: %s --fd N --pch-dir DIR\n", argv0);
  return 2;
}

}  // namespace

int CompileWorkerMain(int argc, char** argv) {
  int fd = -1;
  std::filesystem::path pch_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) return WorkerUsage(argv[0]);
    const char* value = argv[++i];
    if (arg == "--fd") {
      char* end = nullptr;
      errno = 0;
      const long parsed = std::strtol(value, &end, 10);
      if (errno != 0 || end == value || *end != '\0' || parsed < 0 || parsed > 1 << 20) return WorkerUsage(argv[0]);
      fd = static_cast<int>(parsed);
    } else if (arg == "--pch-dir") {
      pch_dir = value;
    } else {
      return WorkerUsage(argv[0]);
    }
  }
  if (fd < 0 || pch_dir.empty()) return WorkerUsage(argv[0]);
  // stdout may be the daemon's; diagnostics go to stderr.
  auto logger = spdlog::stderr_color_mt("compile-worker");
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [compile-worker %P] [%l] %v");
  spdlog::set_default_logger(logger);
  return RunCompileWorker(fd, pch_dir);
}

}  // namespace jitd::compiler
