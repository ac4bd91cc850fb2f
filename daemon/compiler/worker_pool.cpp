#include "compiler/worker_pool.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/cord.h"
#include "compiler/detail/worker_pool_parts.h"
#include "compiler/detail/worker_process.h"
#include "compiler/detail/worker_protocol.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "spdlog/spdlog.h"

namespace jitd::compiler {

using detail::Clock;
using detail::DeadlineAfter;
using detail::Drain;
using detail::kExitedWorkerGrace;
using detail::Poke;
using detail::WorkerProcess;

namespace detail {

namespace {
// Marks the UNAVAILABLE of a job refused or discarded for a toolkit change.
constexpr char kToolkitChangedPayload[] = "type.googleapis.com/jitd.compiler.ToolkitChanged";
}  // namespace

absl::Status ToolkitChanged(absl::Status status) {
  status.SetPayload(kToolkitChangedPayload, absl::Cord("1"));
  return status;
}

Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  // A timeout of "forever" (or anything past a year) must not overflow.
  if (timeout > std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::max(timeout, std::chrono::milliseconds(0));
}

void Poke(int event_fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(event_fd, &one, sizeof(one));
}

void Drain(int event_fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t drained = read(event_fd, &count, sizeof(count));
}

}  // namespace detail

bool IsToolkitChange(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         status.GetPayload(detail::kToolkitChangedPayload).has_value();
}

// ---- CancelFlag ----

void CancelFlag::Cancel() {
  std::lock_guard lock(mu_);
  if (cancelled_.exchange(true)) return;
  // Run under mu_ so that Unsubscribe can promise the callback is finished.
  for (auto& [id, callback] : callbacks_) callback();
  callbacks_.clear();
}

std::uint64_t CancelFlag::Subscribe(std::function<void()> callback) {
  std::lock_guard lock(mu_);
  if (cancelled_.load()) return 0;
  const std::uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(callback));
  return id;
}

void CancelFlag::Unsubscribe(std::uint64_t id) {
  std::lock_guard lock(mu_);
  callbacks_.erase(id);
}

// ---- WorkerPool ----

WorkerPool::WorkerPool(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Start(Options options) {
  if (options.worker_argv.empty()) return absl::InvalidArgumentError("WorkerPool: empty worker_argv");
  if (options.scratch_dir.empty()) return absl::InvalidArgumentError("WorkerPool: empty scratch_dir");
  if (options.workers == 0) options.workers = std::max(1u, std::thread::hardware_concurrency());
  std::error_code ec;
  std::filesystem::create_directories(options.scratch_dir, ec);
  if (ec) {
    return absl::UnavailableError(
        text::Cat("WorkerPool: cannot create scratch directory ", options.scratch_dir.string(), ": ", ec.message()));
  }

  std::unique_ptr<WorkerPool> pool(new WorkerPool(std::move(options)));
  for (size_t i = 0; i < pool->options_.workers; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->index = i;
    slot->pch_dir = pool->options_.scratch_dir / text::Cat("pch-", i);
    slot->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (slot->wake_fd < 0) return absl::UnavailableError("WorkerPool: eventfd failed");
    pool->slots_.push_back(std::move(slot));
  }

  // Start the workers side by side: each start is an exec plus loading NVRTC.
  std::vector<absl::Status> started(pool->slots_.size());
  {
    std::vector<std::thread> starters;
    for (size_t i = 0; i < pool->slots_.size(); ++i) {
      starters.emplace_back([&pool, &started, i] { started[i] = pool->StartWorker(*pool->slots_[i]); });
    }
    for (std::thread& starter : starters) starter.join();
  }
  for (const absl::Status& status : started) {
    JITD_RETURN_IF_ERROR(status);  // the destructor stops the ones that started
  }
  for (auto& slot : pool->slots_) {
    Slot* raw = slot.get();
    slot->thread = std::thread([pool = pool.get(), raw] { pool->RunSlot(*raw); });
  }
  return pool;
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    for (auto* queue : {&live_, &warm_}) {
      for (auto& ticket : *queue) CompleteLocked(*ticket, absl::UnavailableError("the compile pool is shutting down"));
      queue->clear();
    }
  }
  work_cv_.notify_all();
  for (auto& slot : slots_) {
    if (slot->wake_fd >= 0) Poke(slot->wake_fd);
  }
  for (auto& slot : slots_) {
    if (slot->thread.joinable()) slot->thread.join();
  }
  // Every ticket is answered now; the callbacks of CompileAsync run before
  // the pool goes.
  {
    std::lock_guard lock(mu_);
    completer_stopping_ = true;
  }
  completion_cv_.notify_all();
  if (completer_.joinable()) completer_.join();
  // Workers of slots whose thread never ran (Start failed) or already quit.
  for (auto& slot : slots_) {
    if (slot->worker != nullptr) slot->worker->Terminate(options_.shutdown_grace);
    slot->worker.reset();
    if (slot->wake_fd >= 0) close(slot->wake_fd);
  }
}

absl::StatusOr<CompileResult> WorkerPool::Compile(const CompileJob& job, Priority priority,
                                                  std::shared_ptr<CancelFlag> cancel) {
  auto ticket = std::make_shared<Ticket>();
  ticket->job = &job;
  ticket->priority = priority;
  ticket->cancel = std::move(cancel);
  CancelFlag* const flag = ticket->cancel.get();
  std::uint64_t subscription = 0;
  if (flag != nullptr) {
    std::weak_ptr<Ticket> weak = ticket;
    subscription = flag->Subscribe([this, weak] {
      if (std::shared_ptr<Ticket> locked = weak.lock()) OnCancel(locked);
    });
  }

  absl::StatusOr<CompileResult> result;
  {
    std::unique_lock lock(mu_);
    const size_t queued = live_.size() + warm_.size();
    if (ticket->cancelled()) {
      ++stats_.cancellations;
      result = absl::CancelledError(text::Cat("compile of ", job.program_name, " was cancelled before it was queued"));
    } else if (shutting_down_) {
      result = absl::UnavailableError("the compile pool is shutting down");
    } else if (queued >= options_.max_queue) {
      ++stats_.rejected;
      result = absl::ResourceExhaustedError(
          text::Cat("compile queue is full (", queued, " jobs waiting); not compiling ", job.program_name));
    } else {
      ticket->state = Ticket::State::kQueued;
      (priority == Priority::kLive ? live_ : warm_).push_back(ticket);
      work_cv_.notify_one();
      ticket->done.wait(lock, [&] { return ticket->state == Ticket::State::kDone; });
      result = *std::move(ticket->result);
    }
  }
  // Outside mu_ (lock order): after this the cancel callback cannot run.
  if (subscription != 0) flag->Unsubscribe(subscription);
  return result;
}

void WorkerPool::CompileAsync(CompileJob job, Priority priority, std::shared_ptr<CancelFlag> cancel,
                              std::function<void(absl::StatusOr<CompileResult>)> done) {
  auto ticket = std::make_shared<Ticket>();
  ticket->owned_job = std::move(job);
  ticket->job = &*ticket->owned_job;
  ticket->priority = priority;
  ticket->cancel = std::move(cancel);
  ticket->on_done = std::move(done);
  if (CancelFlag* flag = ticket->cancel.get()) {
    std::weak_ptr<Ticket> weak = ticket;
    // Set before the ticket is queued; read by the completion thread only.
    ticket->subscription = flag->Subscribe([this, weak] {
      if (std::shared_ptr<Ticket> locked = weak.lock()) OnCancel(locked);
    });
  }
  std::unique_lock lock(mu_);
  if (!completer_.joinable() && !completer_stopping_) {
    try {
      completer_ = std::thread([this] { RunCompletions(); });
    } catch (const std::system_error& e) {
      lock.unlock();
      if (ticket->subscription != 0) ticket->cancel->Unsubscribe(ticket->subscription);
      ticket->on_done(
          absl::ResourceExhaustedError(text::Cat("cannot start the compile pool's completion thread: ", e.what())));
      return;
    }
  }
  const size_t queued = live_.size() + warm_.size();
  if (ticket->cancelled()) {
    ++stats_.cancellations;
    CompleteLocked(*ticket, absl::CancelledError(text::Cat("compile of ", ticket->job->program_name,
                                                           " was cancelled before it was queued")));
  } else if (shutting_down_ || completer_stopping_) {
    CompleteLocked(*ticket, absl::UnavailableError("the compile pool is shutting down"));
  } else if (queued >= options_.max_queue) {
    ++stats_.rejected;
    CompleteLocked(
        *ticket, absl::ResourceExhaustedError(text::Cat("compile queue is full (", queued,
                                                        " jobs waiting); not compiling ", ticket->job->program_name)));
  } else {
    ticket->state = Ticket::State::kQueued;
    (priority == Priority::kLive ? live_ : warm_).push_back(ticket);
    work_cv_.notify_one();
  }
}

void WorkerPool::RunCompletions() {
  std::unique_lock lock(mu_);
  for (;;) {
    completion_cv_.wait(lock, [&] { return completer_stopping_ || !completions_.empty(); });
    if (completions_.empty()) return;  // stopping, and every callback ran
    std::shared_ptr<Ticket> ticket = std::move(completions_.front());
    completions_.pop_front();
    lock.unlock();
    // Outside mu_ (lock order): after this the cancel callback cannot run.
    if (ticket->subscription != 0) ticket->cancel->Unsubscribe(ticket->subscription);
    absl::StatusOr<CompileResult> result = *std::move(ticket->result);
    auto done = std::move(ticket->on_done);
    ticket.reset();
    done(std::move(result));
    lock.lock();
  }
}

void WorkerPool::OnCancel(const std::shared_ptr<Ticket>& ticket) {
  std::lock_guard lock(mu_);
  switch (ticket->state) {
    case Ticket::State::kQueued: {
      auto& queue = ticket->priority == Priority::kLive ? live_ : warm_;
      queue.erase(std::remove(queue.begin(), queue.end(), ticket), queue.end());
      ++stats_.cancellations;
      CompleteLocked(*ticket, absl::CancelledError(
                                  text::Cat("compile of ", ticket->job->program_name, " was cancelled while queued")));
      break;
    }
    case Ticket::State::kRunning:
      Poke(ticket->slot->wake_fd);  // its slot answers and tells the worker
      break;
    case Ticket::State::kNew:  // Compile sees the flag when it takes mu_
    case Ticket::State::kDone:
      break;
  }
}

void WorkerPool::CompleteLocked(Ticket& ticket, absl::StatusOr<CompileResult> result) {
  if (ticket.state == Ticket::State::kDone) return;
  ticket.result = std::move(result);
  ticket.state = Ticket::State::kDone;
  ticket.slot = nullptr;
  ticket.done.notify_all();
  if (ticket.on_done) {
    // Called back on the completion thread, never under mu_ or a cancel
    // flag's lock (CompleteLocked runs under both).
    completions_.push_back(ticket.shared_from_this());
    completion_cv_.notify_one();
  }
}

void WorkerPool::Complete(Ticket& ticket, absl::StatusOr<CompileResult> result) {
  std::lock_guard lock(mu_);
  CompleteLocked(ticket, std::move(result));
}

void WorkerPool::RestartWorkers() {
  {
    std::lock_guard lock(mu_);
    ++generation_;
  }
  work_cv_.notify_all();
}

void WorkerPool::RunSlot(Slot& slot) {
  for (;;) {
    std::shared_ptr<Ticket> ticket;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(
          lock, [&] { return shutting_down_ || !live_.empty() || !warm_.empty() || slot.generation != generation_; });
      if (shutting_down_) break;
      if (slot.generation != generation_) {
        // Drain: this slot is idle, so its worker goes now.
        lock.unlock();
        if (slot.worker != nullptr) {
          int wait_status = 0;
          spdlog::info("compile worker (pid {}) restarted: {}", slot.worker->pid(),
                       ReplaceWorker(slot, options_.shutdown_grace, &wait_status));
        } else {
          std::lock_guard relock(mu_);
          slot.generation = generation_;
        }
        continue;
      }
      auto& queue = !live_.empty() ? live_ : warm_;
      ticket = std::move(queue.front());
      queue.pop_front();
      ticket->state = Ticket::State::kRunning;
      ticket->slot = &slot;
    }
    RunTicket(slot, ticket);
    std::lock_guard lock(mu_);
    slot.busy = false;
  }
  if (slot.worker != nullptr) slot.worker->Terminate(options_.shutdown_grace);
  slot.worker.reset();
  std::lock_guard lock(mu_);
  slot.pid = 0;
}

absl::Status WorkerPool::StartWorker(Slot& slot) {
  {
    std::lock_guard lock(mu_);
    if (shutting_down_) return absl::UnavailableError("the compile pool is shutting down");
  }
  // Before the spawn: a change after this epoch was read is one the worker
  // may not have loaded, and makes the epochs differ (see RunTicket).
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    generation = generation_;
  }
  const std::uint64_t toolkit_epoch = options_.toolkit != nullptr ? options_.toolkit->epoch() : 0;
  absl::StatusOr<std::unique_ptr<WorkerProcess>> worker =
      WorkerProcess::Spawn(options_.worker_argv, slot.pch_dir, DeadlineAfter(options_.start_timeout));
  if (!worker.ok()) {
    spdlog::error("compile worker {} failed to start: {}", slot.index, std::string(worker.status().message()));
    return worker.status();
  }
  std::lock_guard lock(mu_);
  slot.pid = (*worker)->pid();
  slot.generation = generation;
  slot.toolkit_epoch = toolkit_epoch;
  if (slot.started_once) ++stats_.restarts;
  slot.started_once = true;
  slot.worker = *std::move(worker);
  return absl::OkStatus();
}

std::string WorkerPool::ReplaceWorker(Slot& slot, std::chrono::milliseconds grace, int* wait_status) {
  *wait_status = slot.worker->Terminate(grace);
  slot.worker.reset();
  {
    std::lock_guard lock(mu_);
    slot.pid = 0;
  }
  absl::Status started = StartWorker(slot);
  // On failure the slot tries again when it takes its next job.
  return started.ok() ? "it has been replaced" : text::Cat("starting a replacement failed: ", started.message());
}

WorkerPool::Statistics WorkerPool::Stats() const {
  std::lock_guard lock(mu_);
  Statistics stats = stats_;
  stats.queue_depth = live_.size() + warm_.size();
  for (const auto& slot : slots_) {
    stats.busy_workers += slot->busy ? 1 : 0;
    stats.workers += slot->pid != 0 ? 1 : 0;
  }
  return stats;
}

std::vector<pid_t> WorkerPool::WorkerPids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> pids;
  for (const auto& slot : slots_) {
    if (slot->pid != 0) pids.push_back(slot->pid);
  }
  return pids;
}

size_t WorkerPool::size() const { return slots_.size(); }

}  // namespace jitd::compiler
