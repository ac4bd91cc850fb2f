// WorkerPool's half that runs one job on one worker: ReadyForJob, then the
// Exchange (worker_pool.h declares them; worker_pool.cpp the rest).
#include <string>
#include <utility>

#include "compiler/detail/worker_pool_parts.h"
#include "compiler/detail/worker_process.h"
#include "compiler/detail/worker_protocol.h"
#include "compiler/worker_pool.h"
#include "jitd/base/text.h"
#include "spdlog/spdlog.h"

namespace jitd::compiler {

using detail::Clock;
using detail::DeadlineAfter;
using detail::Drain;
using detail::kExitedWorkerGrace;
using detail::ToolkitChanged;
using detail::WorkerProcess;

bool WorkerPool::ReadyForJob(Slot& slot, Ticket& ticket, std::optional<std::uint64_t>* toolkit_epoch) {
  const CompileJob& job = *ticket.job;
  if (ticket.cancelled()) {
    std::lock_guard lock(mu_);
    ++stats_.cancellations;
    CompleteLocked(ticket,
                   absl::CancelledError(text::Cat("compile of ", job.program_name, " was cancelled while queued")));
    return false;
  }

  // The toolkit this job's key names must be the one last seen on disk, and
  // the worker must have been started after the last change noticed. The
  // last observation suffices here (no stat pass): a change since then
  // shows as a new epoch in the check after the compile, which discards
  // the result (see toolkit_watch.h).
  toolkit_epoch->reset();
  if (options_.toolkit != nullptr && !job.toolkit_fingerprint.empty()) {
    absl::StatusOr<ToolkitWatch::Observation> before = options_.toolkit->Last();
    if (!before.ok() || before->fingerprint != job.toolkit_fingerprint) {
      std::lock_guard lock(mu_);
      ++stats_.toolkit_refusals;
      CompleteLocked(ticket, ToolkitChanged(absl::UnavailableError(text::Cat(
                                 "toolkit changed since this request was resolved; not compiling ", job.program_name,
                                 " under the previous toolkit's key (",
                                 before.ok() ? std::string("the CUDA headers or NVRTC libraries on disk are new")
                                             : std::string(before.status().message()),
                                 "); retry: the request now resolves to the new toolkit's key"))));
      return false;
    }
    *toolkit_epoch = before->epoch;
    if (slot.worker != nullptr && slot.toolkit_epoch != before->epoch) {
      int wait_status = 0;
      spdlog::info("compile worker (pid {}) predates a toolkit change: {}", slot.worker->pid(),
                   ReplaceWorker(slot, options_.shutdown_grace, &wait_status));
    }
  }

  // A worker that died while idle is replaced before it gets a job.
  if (slot.worker != nullptr && !slot.worker->IdleAndAlive()) {
    const pid_t pid = slot.worker->pid();
    const int status = slot.worker->Terminate(kExitedWorkerGrace);
    spdlog::warn("compile worker (pid {}) {} while idle; replacing it", pid, WorkerProcess::DescribeExit(status));
    slot.worker.reset();
    std::lock_guard lock(mu_);
    slot.pid = 0;
  }
  if (slot.worker == nullptr) {
    if (absl::Status started = StartWorker(slot); !started.ok()) {
      Complete(ticket,
               absl::UnavailableError(text::Cat("no compile worker for ", job.program_name, ": ", started.message())));
      return false;
    }
  }
  return true;
}

// One job's exchange with its worker, in two states:
//   kCompiling   the caller waits for the answer, until the job's timeout;
//   kCancelling  the caller has been answered CANCELLED, and the worker has
//                cancel_grace to answer or stop before it is killed.
// Each Receive gives one event: the job's answer, the worker closed (it
// died), a wake (a cancel or the shutdown), the deadline, or a broken
// protocol (an unreadable frame, another job's answer). A wake moves
// kCompiling to kCancelling when the ticket is cancelled and ends the
// exchange at shutdown; every other event ends it (Finish). A send that
// failed is judged as the socket would be read next: the deadline, or EOF.
struct WorkerPool::Exchange {
  enum class State { kCompiling, kCancelling };

  Slot& slot;
  Ticket& ticket;
  // Copied: the caller, who owns the job, returns as soon as its ticket is
  // complete (a cancel completes it while the worker still runs).
  const std::string program;
  const std::chrono::milliseconds timeout;
  const std::optional<std::uint64_t> toolkit_epoch;  // none: the toolkit is not checked
  const std::uint64_t job_id;
  const std::string who;  // "compile worker (pid P)"
  State state = State::kCompiling;
  Clock::time_point deadline;  // of the current state
  absl::Status sent;           // the last Send's
  // What the last event carried.
  std::optional<detail::CompileResponse> response;  // kAnswer
  absl::Status broken;                              // kBroken
};

void WorkerPool::RunTicket(Slot& slot, const std::shared_ptr<Ticket>& ticket) {
  // A poke left over from an earlier job's cancel must not count for this
  // one; a cancel that came before this drain is seen by cancelled() below.
  Drain(slot.wake_fd);
  std::optional<std::uint64_t> toolkit_epoch;
  if (!ReadyForJob(slot, *ticket, &toolkit_epoch)) return;

  const CompileJob& job = *ticket->job;
  Exchange x{.slot = slot,
             .ticket = *ticket,
             .program = job.program_name,
             .timeout = job.timeout,
             .toolkit_epoch = toolkit_epoch,
             .job_id = next_job_id_++,
             .who = text::Cat("compile worker (pid ", slot.worker->pid(), ")"),
             .deadline = DeadlineAfter(job.timeout),
             .sent = absl::OkStatus(),
             .response = std::nullopt,
             .broken = absl::OkStatus()};
  detail::CompileRequest request{x.job_id, job};
  if (request.job.digest.empty()) request.job.digest = JobDigest(request.job);
  x.sent = slot.worker->Send(detail::Encode(request), x.deadline);
  {
    std::lock_guard lock(mu_);
    slot.busy = true;
  }
  for (;;) {
    const ExchangeEvent event = NextEvent(x);
    if (event != ExchangeEvent::kWake) return Finish(x, event);
    if (!OnWake(x)) return;
  }
}

WorkerPool::ExchangeEvent WorkerPool::NextEvent(Exchange& x) {
  if (!x.sent.ok()) {
    return x.sent.code() == absl::StatusCode::kDeadlineExceeded ? ExchangeEvent::kDeadline : ExchangeEvent::kClosed;
  }
  absl::StatusOr<WorkerProcess::Received> received = x.slot.worker->Receive(x.slot.wake_fd, x.deadline);
  if (!received.ok()) {
    x.broken = received.status();
    return ExchangeEvent::kBroken;
  }
  switch (received->event) {
    case WorkerProcess::Event::kClosed:
      return ExchangeEvent::kClosed;
    case WorkerProcess::Event::kWake:
      return ExchangeEvent::kWake;
    case WorkerProcess::Event::kTimeout:
      return ExchangeEvent::kDeadline;
    case WorkerProcess::Event::kFrame:
      break;
  }
  absl::StatusOr<detail::CompileResponse> decoded = detail::DecodeCompileResponse(received->payload);
  if (!decoded.ok()) {
    x.broken = decoded.status();
    return ExchangeEvent::kBroken;
  }
  if (decoded->job_id != x.job_id) {
    x.broken =
        absl::InvalidArgumentError(text::Cat("answered job ", decoded->job_id, " while compiling job ", x.job_id));
    return ExchangeEvent::kBroken;
  }
  x.response = *std::move(decoded);
  return ExchangeEvent::kAnswer;
}

bool WorkerPool::OnWake(Exchange& x) {
  bool shutting_down = false;
  {
    std::lock_guard lock(mu_);
    shutting_down = shutting_down_;
  }
  if (shutting_down) {
    x.slot.worker->Terminate(std::chrono::milliseconds(0));
    x.slot.worker.reset();
    std::lock_guard lock(mu_);
    x.slot.pid = 0;
    CompleteLocked(x.ticket, absl::UnavailableError("the compile pool is shutting down"));
    return false;
  }
  if (x.state == Exchange::State::kCompiling && x.ticket.cancelled()) {
    // Answer the caller now; the worker gets cancel_grace to stop.
    x.state = Exchange::State::kCancelling;
    x.deadline = DeadlineAfter(options_.cancel_grace);
    x.sent = x.slot.worker->Send(detail::Encode(detail::CancelRequest{x.job_id}), x.deadline);
    std::lock_guard lock(mu_);
    ++stats_.cancellations;
    CompleteLocked(x.ticket, absl::CancelledError(text::Cat("compile of ", x.program, " was cancelled")));
  }
  return true;
}

absl::Status WorkerPool::CheckToolsAfter(const Exchange& x) {
  if (x.toolkit_epoch.has_value()) {
    // The after half of the bracket: a change while NVRTC ran (even one
    // reverted since: a new epoch) means it may have read new headers for
    // a key that names the old ones.
    absl::StatusOr<ToolkitWatch::Observation> after = options_.toolkit->Check();
    if (!after.ok() || after->epoch != *x.toolkit_epoch) {
      return ToolkitChanged(absl::UnavailableError(
          text::Cat("toolkit changed while ", x.program,
                    " compiled; its result was discarded, not stored under the previous toolkit's key; retry")));
    }
  }
  if (x.response->status.ok() && x.ticket.job->kind == ArtifactKind::kSharedObject && options_.check_module_build) {
    // The same bracket for the host compiler and tvm-ffi, which the
    // toolkit watch does not cover: checked after the build.
    if (absl::Status same = options_.check_module_build(*x.ticket.job); !same.ok()) {
      return ToolkitChanged(absl::UnavailableError(
          text::Cat(same.message(), "; ", x.program,
                    "'s build was discarded, not stored under the previous toolchain's key; retry")));
    }
  }
  return absl::OkStatus();
}

void WorkerPool::Finish(Exchange& x, ExchangeEvent event) {
  const bool cancelling = x.state == Exchange::State::kCancelling;
  int wait_status = -1;
  switch (event) {
    case ExchangeEvent::kWake:
      return;  // OnWake's
    case ExchangeEvent::kBroken: {
      const std::string note = ReplaceWorker(x.slot, std::chrono::milliseconds(0), &wait_status);
      const std::string message =
          text::Cat(x.who, " broke the protocol while compiling ", x.program, " (", x.broken.message(), "); ", note);
      spdlog::error("{}", message);
      std::lock_guard lock(mu_);
      ++stats_.crashes;
      CompleteLocked(x.ticket, absl::UnavailableError(message));
      return;
    }
    case ExchangeEvent::kAnswer: {
      if (cancelling) return;  // a cancelled job finished within its grace; the worker is free
      if (absl::Status tools = CheckToolsAfter(x); !tools.ok()) {
        std::lock_guard lock(mu_);
        ++stats_.toolkit_refusals;
        CompleteLocked(x.ticket, std::move(tools));
        return;
      }
      std::lock_guard lock(mu_);
      if (x.response->status.ok()) {
        ++stats_.compiles;
        CompleteLocked(x.ticket, std::move(x.response->result));
      } else {
        ++(x.response->status.code() == absl::StatusCode::kCancelled ? stats_.cancellations : stats_.failures);
        CompleteLocked(x.ticket, std::move(x.response->status));
      }
      return;
    }
    case ExchangeEvent::kClosed: {
      const std::string note = ReplaceWorker(x.slot, kExitedWorkerGrace, &wait_status);
      const std::string message =
          text::Cat(x.who, " ", WorkerProcess::DescribeExit(wait_status), " while compiling ", x.program, "; ", note);
      if (cancelling) {
        spdlog::info("{} (after its job was cancelled)", message);
        return;
      }
      spdlog::warn("{}", message);
      std::lock_guard lock(mu_);
      ++stats_.crashes;
      CompleteLocked(x.ticket, absl::UnavailableError(message));
      return;
    }
    case ExchangeEvent::kDeadline: {
      const std::string note = ReplaceWorker(x.slot, std::chrono::milliseconds(0), &wait_status);
      if (cancelling) {
        spdlog::info("{} did not stop within {} ms of a cancel; killed, {}", x.who, options_.cancel_grace.count(),
                     note);
        return;
      }
      const std::string message = text::Cat(
          "compile of ", x.program, " exceeded its timeout of ", x.timeout.count(), " ms; ", x.who, " was killed and ",
          note == "it has been replaced" ? "has been replaced" : text::Cat("not replaced: ", note));
      spdlog::warn("{}", message);
      std::lock_guard lock(mu_);
      ++stats_.timeouts;
      CompleteLocked(x.ticket, absl::DeadlineExceededError(message));
      return;
    }
  }
}

}  // namespace jitd::compiler
