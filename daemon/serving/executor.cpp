#include "serving/executor.h"

#include <spdlog/spdlog.h>

#include <system_error>

namespace jitd::serving {

using Clock = std::chrono::steady_clock;

Executor::Executor(size_t threads) {
  threads_.reserve(threads);
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    try {
      threads_.emplace_back([this] { Run(); });
    } catch (const std::system_error& e) {
      // A pids limit: run with fewer threads rather than terminate.
      spdlog::warn("request path: started {} of {} background threads ({})", threads_.size(), threads, e.what());
      break;
    }
  }
}

Executor::~Executor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  // Without threads, what is left runs here.
  std::unique_lock lock(mu_);
  while (!tasks_.empty()) {
    auto task = std::move(tasks_.begin()->second);
    tasks_.erase(tasks_.begin());
    lock.unlock();
    task();
    lock.lock();
  }
}

void Executor::PostAfter(std::chrono::milliseconds delay, std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_ && !threads_.empty()) {
      tasks_.emplace(std::make_pair(Clock::now() + delay, next_seq_++), std::move(task));
      cv_.notify_one();
      return;
    }
  }
  task();
}

size_t Executor::queued() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

void Executor::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (tasks_.empty()) {
      if (stopping_) return;
      cv_.wait(lock);
      continue;
    }
    auto first = tasks_.begin();
    if (!stopping_ && first->first.first > Clock::now()) {
      // A copy, not the key: while this thread waits (the lock released),
      // another one may run this task and erase it, and wait_until reads
      // the time again when it wakes.
      const Clock::time_point due = first->first.first;
      cv_.wait_until(lock, due);
      continue;
    }
    auto task = std::move(first->second);
    tasks_.erase(first);
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace jitd::serving
