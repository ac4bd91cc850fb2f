// Executor: a fixed set of threads that run the request path's background
// steps (a flight's ask of the fleet, its store after a compile, the
// write-back), now or after a delay. A flight parks no thread: while it
// waits for a worker or for another daemon's lease, it is a queued task or
// a pending callback, and the number of threads is the same whatever the
// number of flights.
//
// Tasks run in order of their due time (FIFO among equals). A task must not
// wait on another task of the same executor. At destruction no new task is
// accepted, every task still queued runs (delayed ones at once) and the
// threads are joined.
//
// Thread safety: Post and PostAfter may be called from any thread,
// including from a task.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace jitd::serving {

class Executor {
 public:
  // `threads` at least 1. Starting a thread can fail (a pids limit): then
  // the executor runs with the threads it got, and with none it runs each
  // task on the thread that posts it (see Post).
  explicit Executor(size_t threads);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs `task` soon on one of the threads. After destruction has begun,
  // or when no thread could be started, it runs on the caller's thread.
  void Post(std::function<void()> task) { PostAfter(std::chrono::milliseconds(0), std::move(task)); }
  // Runs `task` once `delay` has passed (at once when shutting down).
  void PostAfter(std::chrono::milliseconds delay, std::function<void()> task);

  // Tasks queued now (due or not), for stats.
  size_t queued() const;
  size_t threads() const { return threads_.size(); }

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // (due time, sequence) -> task; the sequence keeps FIFO among equal times.
  std::map<std::pair<std::chrono::steady_clock::time_point, uint64_t>, std::function<void()>> tasks_;
  uint64_t next_seq_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace jitd::serving
