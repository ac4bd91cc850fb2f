// Gives the memory of large, short-lived buffers back to the kernel.
//
// Cubins are MiB-sized buffers that live for one request (read from disk,
// copied into a response, serialized), except those the hot cache keeps.
// glibc keeps freed buffers of that size in its per-thread arenas, so after
// a burst of large answers the daemon's resident memory stays above what it
// holds: measured with tests/bench/bench_start, a daemon with an 8 MiB hot
// cache stayed 28 MiB larger after serving 48 x 1 MiB cubins. A fixed mmap
// threshold would return each buffer at once but costs page faults on every
// large answer (+20% on a 1 MiB hit); instead, a background thread trims
// the heap (malloc_trim) at most once per interval, and only after large
// answers were given, so what stays resident is the hot cache's bounded
// bytes plus small change.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace jitd::daemon {

// Bytes the heap allocator has handed out and not yet taken back: what the
// daemon holds, as opposed to what is resident (RSS also counts freed
// memory an allocator keeps for reuse). glibc's count (mallinfo2) in a
// plain build; the sanitizer allocator's own count under ASan, whose
// quarantine and size-class regions keep RSS above the live heap. Walks
// glibc's arenas under their locks: for a scrape, not a request path.
size_t AllocatedHeapBytes();

// Buffers of at least this many bytes count as large.
inline constexpr size_t kLargeBufferBytes = 256 << 10;

// Notes that a large buffer was (or is about to be) freed; cheap, any
// thread. Does nothing unless a MemoryTrimmer runs.
void NoteLargeBuffer();

class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~MemoryTrimmer();  // stops and joins the thread
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  void Run();
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace jitd::daemon
