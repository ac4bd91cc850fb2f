// WorkerPool: parallel NVRTC compiles in worker processes.
//
// NVRTC serialises compiles inside one process (two threads: 2.2-2.4 s
// where two processes take 1.19 s), and gRPC does not survive fork(), so the
// daemon compiles in long-lived worker processes started with posix_spawn
// (the program in Options::worker_argv, which must end up in
// RunCompileWorker) and spoken to over a socketpair. A worker that crashes,
// hangs past a job's timeout or ignores a cancel is killed and replaced; the
// pool stays usable. Long-lived workers also keep NVRTC's precompiled
// headers, which no per-process JIT can (see PchState).
//
// Scheduling: one queue, live jobs before warm ones, first come first
// served within a priority. One thread per worker takes the next job when its
// worker is free; the caller of Compile blocks until its job is answered.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/compile_job.h"
#include "compiler/toolkit_watch.h"

namespace jitd::compiler {

// A cancellation signal shared between whoever may cancel (a client's
// request going away) and the compiles it concerns. Thread-safe; may be
// shared by several Compile calls. Once cancelled it stays cancelled.
class CancelFlag {
 public:
  // Cancels every compile this flag was passed to that has not finished.
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class WorkerPool;
  // `callback` runs (once, under this flag's lock) when Cancel() is called.
  // Returns 0 without registering if the flag is already cancelled.
  std::uint64_t Subscribe(std::function<void()> callback);
  // After this returns the callback is not running and will not run.
  void Unsubscribe(std::uint64_t id);

  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::function<void()>> callbacks_;
};

// Whether `status` is a WorkerPool answer for a toolkit change: the job was
// refused (its key names a toolkit no longer on disk) or its result was
// discarded (the toolkit changed while it compiled). Nothing was stored or
// answered under the old key; resolving the request again gives the new
// toolkit's key, and compiling that is the retry. Never a property of the
// kernel: do not remember it as a compile failure.
bool IsToolkitChange(const absl::Status& status);

enum class Priority {
  kLive,  // a client is waiting for this kernel right now
  kWarm,  // ahead-of-time warming: runs when no live job is queued
};

class WorkerPool {
 public:
  struct Options {
    // The worker's command line; the pool appends --fd N --pch-dir DIR.
    // argv[0] is looked up in PATH if it has no '/'.
    std::vector<std::string> worker_argv;
    // Number of worker processes; 0 = std::thread::hardware_concurrency().
    // Each holds up to ~300 MB while compiling a CUB-sized kernel.
    size_t workers = 0;
    // Worker i gets scratch_dir/pch-<i> for its precompiled headers (up to
    // kDefaultMaxPchDirBytes each), emptied whenever a worker starts there.
    // Owned by this pool: two pools must not share it.
    std::filesystem::path scratch_dir;
    // Jobs allowed to wait for a worker; one more is refused with
    // RESOURCE_EXHAUSTED rather than queued without bound.
    size_t max_queue = 1024;
    // How long a running job's worker gets to answer a cancel before it is
    // killed and replaced. NVRTC polls its cancel callback only after the
    // front end (~1 s of a CUB compile), so a short grace often means a
    // restart; the caller is answered at once either way.
    std::chrono::milliseconds cancel_grace{500};
    // A new worker must answer its hello within this (exec + loading NVRTC).
    std::chrono::milliseconds start_timeout{std::chrono::seconds(10)};
    // At shutdown, how long an idle worker gets to exit after EOF before SIGKILL.
    std::chrono::milliseconds shutdown_grace{std::chrono::seconds(2)};
    // The toolkit the workers compile with (may be null: not watched).
    // With it, a job whose CompileJob::toolkit_fingerprint is set runs only
    // if that is the toolkit the watch last saw (ToolkitWatch::Last) and
    // nothing changed by the time the answer arrives (ToolkitWatch::Check,
    // one stat pass of the toolkit per compile: ~5-10 ms over ~2k headers,
    // bench_compile); otherwise it is answered UNAVAILABLE "toolkit
    // changed" and a cubin it produced is discarded. A worker started
    // before the last change the watch noticed is replaced before it gets a
    // job.
    std::shared_ptr<ToolkitWatch> toolkit;
    // Asked after a module build (ArtifactKind::kSharedObject) succeeds,
    // before it is answered: an error (the module toolchain on disk is no
    // longer ModuleBuild::toolchain_fingerprint, the one its key names)
    // discards the build, counted as a toolkit refusal and answered as a
    // toolkit change (IsToolkitChange). Null: not checked.
    std::function<absl::Status(const CompileJob&)> check_module_build;
  };

  struct Statistics {
    std::uint64_t compiles = 0;          // jobs a worker answered with a cubin
    std::uint64_t failures = 0;          // jobs a worker answered with an error (bad source or options)
    std::uint64_t crashes = 0;           // workers that died while compiling
    std::uint64_t timeouts = 0;          // jobs past their timeout (worker killed)
    std::uint64_t cancellations = 0;     // jobs answered CANCELLED (queued or running)
    std::uint64_t rejected = 0;          // jobs refused because the queue was full
    std::uint64_t restarts = 0;          // workers started to replace one (any reason)
    std::uint64_t toolkit_refusals = 0;  // jobs refused or discarded: the toolkit changed
    size_t queue_depth = 0;              // jobs waiting for a worker now
    size_t busy_workers = 0;             // workers with a job sent to them now
    size_t workers = 0;                  // worker processes running now
  };

  // Starts the workers and waits for each one's hello. Errors:
  // INVALID_ARGUMENT for an empty worker_argv or scratch_dir; UNAVAILABLE or
  // DEADLINE_EXCEEDED (see detail::WorkerProcess::Spawn) if any worker fails
  // to start, in which case the others are stopped again.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Start(Options options);

  // Stops the workers: closes their sockets (a worker exits on EOF), waits
  // shutdown_grace, SIGKILLs what is left and reaps every one (no zombies).
  // A compile in flight is abandoned. No Compile call may be in progress.
  ~WorkerPool();

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Compiles `job` on a worker; blocks the caller until it is answered.
  // Thread-safe: call it from as many threads as there are clients; `job`
  // must stay valid until it returns. Errors:
  //   FAILED_PRECONDITION, INVALID_ARGUMENT, ...  the compile's own error,
  //       as CompileInProcess returns it (NVRTC log in the message and in
  //       NvrtcLogOf).
  //   RESOURCE_EXHAUSTED  max_queue jobs are already waiting; nothing queued.
  //   DEADLINE_EXCEEDED   job.timeout passed while a worker compiled it
  //       (time spent queued does not count); the worker was killed and
  //       replaced.
  //   UNAVAILABLE  "toolkit changed": the toolkit on disk is not the one
  //       job.toolkit_fingerprint names, or changed while it compiled (see
  //       Options::toolkit); retry under the new toolkit's key.
  //   DATA_LOSS  the worker received other bytes than were sent (digest
  //       mismatch); not compiled.
  //   UNAVAILABLE  the worker crashed while compiling ("compile worker (pid P)
  //       died with signal S while compiling <program>; it has been
  //       replaced"), or no worker could be started for the job. Retrying
  //       is reasonable; a source that crashes NVRTC every time will crash
  //       every time.
  //   CANCELLED  `cancel` was set: a queued job is dropped without running;
  //       a running one is answered at once while its worker is sent a
  //       cancel (and is replaced if it does not answer within cancel_grace).
  //       A job whose result arrived before the cancel is answered normally.
  absl::StatusOr<CompileResult> Compile(const CompileJob& job, Priority priority,
                                        std::shared_ptr<CancelFlag> cancel = nullptr);

  // Compile() without a waiting thread: `job` is queued as Compile queues
  // it, and `done` is called once with what Compile would return. `done`
  // runs on the pool's completion thread (one per pool), in completion
  // order, with no lock of the pool held; it must be short (hand the result
  // on) and must not destroy the pool. A job refused at once (full queue,
  // cancelled, shutting down) is answered on that thread too, except when
  // the completion thread cannot be started: then RESOURCE_EXHAUSTED is
  // answered on the caller's thread. Every callback has run when the
  // destructor returns.
  void CompileAsync(CompileJob job, Priority priority, std::shared_ptr<CancelFlag> cancel,
                    std::function<void(absl::StatusOr<CompileResult>)> done);

  // Drains and restarts every worker: an idle one is replaced now, a busy
  // one after its job. For a toolkit change (the new workers load the
  // NVRTC on disk now). Thread-safe; does not wait.
  void RestartWorkers();

  // A snapshot of the counters. Thread-safe.
  Statistics Stats() const;
  // The pids of the running workers (for tests and diagnostics). Thread-safe.
  std::vector<pid_t> WorkerPids() const;
  // Number of worker slots (Options::workers after defaulting).
  size_t size() const;

 private:
  struct Ticket;
  struct Slot;

  explicit WorkerPool(Options options);
  void RunSlot(Slot& slot);
  // One job on one worker: ReadyForJob, then the Exchange (its states and
  // events are described in worker_pool.cpp).
  struct Exchange;
  enum class ExchangeEvent { kAnswer, kClosed, kWake, kDeadline, kBroken };
  void RunTicket(Slot& slot, const std::shared_ptr<Ticket>& ticket);
  // Answers the ticket without a compile and returns false when it was
  // cancelled while queued, names a toolkit no longer on disk, or no worker
  // can be started; otherwise leaves `slot` with a live worker started
  // after the toolkit's last change (*toolkit_epoch; none when the job's
  // toolkit is not checked).
  bool ReadyForJob(Slot& slot, Ticket& ticket, std::optional<std::uint64_t>* toolkit_epoch);
  // The exchange's steps: the next event; a wake (false: the exchange is
  // over); any other event, which ends it.
  ExchangeEvent NextEvent(Exchange& x);
  bool OnWake(Exchange& x);
  void Finish(Exchange& x, ExchangeEvent event);
  // After a job's answer: the toolkit (and, for a module, its toolchain)
  // still the one its key names; else the toolkit-change refusal.
  absl::Status CheckToolsAfter(const Exchange& x);
  // Starts `slot`'s worker; counts a restart unless it is the first start.
  absl::Status StartWorker(Slot& slot);
  // Kills and reaps `slot`'s worker and starts another; the description of
  // how the old one ended, plus a note if the new one failed to start.
  std::string ReplaceWorker(Slot& slot, std::chrono::milliseconds grace, int* wait_status);
  void OnCancel(const std::shared_ptr<Ticket>& ticket);
  // Requires mu_. Hands the ticket its answer and wakes its caller.
  void CompleteLocked(Ticket& ticket, absl::StatusOr<CompileResult> result);
  void Complete(Ticket& ticket, absl::StatusOr<CompileResult> result);
  // The completion thread: calls CompileAsync's callbacks.
  void RunCompletions();

  const Options options_;
  std::atomic<std::uint64_t> next_job_id_{1};

  // Lock order: a CancelFlag's lock, then mu_. No socket I/O and no process
  // waits happen under mu_.
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // slots wait here for jobs
  std::deque<std::shared_ptr<Ticket>> live_;
  std::deque<std::shared_ptr<Ticket>> warm_;
  bool shutting_down_ = false;
  // Bumped by RestartWorkers; a slot whose worker is older replaces it.
  std::uint64_t generation_ = 0;
  Statistics stats_;
  std::vector<std::unique_ptr<Slot>> slots_;
  // CompileAsync tickets answered and not yet called back (guarded by mu_).
  std::deque<std::shared_ptr<Ticket>> completions_;
  std::condition_variable completion_cv_;
  bool completer_stopping_ = false;  // guarded by mu_
  std::thread completer_;            // started by the first CompileAsync
};

}  // namespace jitd::compiler
