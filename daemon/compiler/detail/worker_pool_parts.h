// The internals worker_pool.cpp and worker_exchange.cpp share: the ticket
// a job waits on, the slot a worker runs in, and small helpers. Not a
// public interface.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/detail/worker_process.h"
#include "compiler/worker_pool.h"

namespace jitd::compiler::detail {

using Clock = std::chrono::steady_clock;

// After EOF from a worker it is already exiting; this bounds the wait for
// its exit status before SIGKILL (a worker that closed its socket and lives on).
inline constexpr std::chrono::milliseconds kExitedWorkerGrace{1000};

// `status` marked as the UNAVAILABLE of a job refused or discarded for a
// toolkit change (IsToolkitChange).
absl::Status ToolkitChanged(absl::Status status);

// Now + timeout; "forever" (anything past a year) is time_point::max().
Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout);

// An eventfd's write and read of one count.
void Poke(int event_fd);
void Drain(int event_fd);

}  // namespace jitd::compiler::detail

namespace jitd::compiler {

struct WorkerPool::Ticket : std::enable_shared_from_this<WorkerPool::Ticket> {
  enum class State { kNew, kQueued, kRunning, kDone };
  const CompileJob* job = nullptr;
  Priority priority = Priority::kLive;
  std::shared_ptr<CancelFlag> cancel;
  // Guarded by mu_.
  State state = State::kNew;
  Slot* slot = nullptr;  // while kRunning
  std::optional<absl::StatusOr<CompileResult>> result;
  std::condition_variable done;
  // CompileAsync only: the job (owned), the callback and the cancel
  // subscription, which the completion thread ends before calling back.
  std::optional<CompileJob> owned_job;
  std::function<void(absl::StatusOr<CompileResult>)> on_done;
  std::uint64_t subscription = 0;

  bool cancelled() const { return cancel != nullptr && cancel->cancelled(); }
};

struct WorkerPool::Slot {
  size_t index = 0;
  std::filesystem::path pch_dir;
  // An eventfd: a cancel or the shutdown pokes it to wake the slot's thread
  // while it waits on its worker's socket.
  int wake_fd = -1;
  std::thread thread;
  // Owned by the slot's thread (by Start and the destructor while no thread runs).
  std::unique_ptr<detail::WorkerProcess> worker;
  bool started_once = false;
  // The toolkit epoch seen before this worker was spawned (slot thread).
  std::uint64_t toolkit_epoch = 0;
  // Guarded by mu_.
  std::uint64_t generation = 0;  // generation_ when its worker was started
  pid_t pid = 0;                 // 0 while no worker runs
  bool busy = false;
};

}  // namespace jitd::compiler
