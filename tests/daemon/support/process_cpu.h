// The CPU time this process has used, for tests that a thread sleeps while
// it waits rather than spins.
#pragma once

#include <sys/resource.h>

namespace jitd::testing {

// User and system time of every thread so far, in milliseconds.
inline double ProcessCpuMs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + t.tv_usec / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

}  // namespace jitd::testing
