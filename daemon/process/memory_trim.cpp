#include "process/memory_trim.h"

#include <malloc.h>

#include <atomic>

namespace jitd::daemon {
namespace {

std::atomic<bool> large_buffer_noted{false};

}  // namespace

void NoteLargeBuffer() { large_buffer_noted.store(true, std::memory_order_relaxed); }

MemoryTrimmer::MemoryTrimmer(std::chrono::milliseconds interval) : interval_(interval), thread_([this] { Run(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MemoryTrimmer::Run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    // The buffers noted before this exchange have been freed by the time
    // the next interval ends (they live for one answer).
    if (large_buffer_noted.exchange(false, std::memory_order_relaxed)) {
      lock.unlock();
      malloc_trim(0);
      lock.lock();
    }
  }
}

}  // namespace jitd::daemon
