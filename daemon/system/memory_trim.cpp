#include "system/memory_trim.h"

#include <malloc.h>

#include <atomic>

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's count of live heap bytes (declared here: GCC
// ships no allocator_interface.h).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace jitd::daemon {
namespace {

std::atomic<bool> large_buffer_noted{false};

}  // namespace

size_t AllocatedHeapBytes() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;  // in use in arenas, plus mmapped chunks
#endif
}

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
