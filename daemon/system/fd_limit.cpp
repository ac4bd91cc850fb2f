#include "system/fd_limit.h"

#include <sys/resource.h>

#include <algorithm>

namespace jitd::daemon {

FileLimit RaiseFileLimit() {
  constexpr rlim_t kUnlimitedCap = 1 << 20;
  FileLimit result;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return result;
  result.before = result.now = limit.rlim_cur;
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? std::max(limit.rlim_cur, kUnlimitedCap) : limit.rlim_max;
  if (limit.rlim_cur != RLIM_INFINITY && target > limit.rlim_cur) {
    struct rlimit raised = limit;
    raised.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) result.now = target;
  }
  return result;
}

size_t DescriptorReserve(uint64_t limit) { return static_cast<size_t>(std::max<uint64_t>(64, limit / 4)); }

size_t AutoMaxConnections(uint64_t limit) {
  const uint64_t reserve = DescriptorReserve(limit);
  const uint64_t left = limit > reserve ? limit - reserve : 0;
  return static_cast<size_t>(std::clamp<uint64_t>(left, 16, 4096));
}

}  // namespace jitd::daemon
