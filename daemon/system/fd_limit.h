// The daemon's file-descriptor budget.
//
// Every connection costs a descriptor, and so do the cache (index, blobs
// being read), the workers' pipes, Redis, the metrics endpoint and gRPC's
// own event fds. A start raises the soft RLIMIT_NOFILE to the hard one
// (systemd's default soft limit is 1024 while the hard one is far higher),
// then bounds connections below it, keeping a reserve for the rest, so that
// a connection flood can never take the descriptors the daemon needs to
// answer the connections it has.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitd::daemon {

struct FileLimit {
  uint64_t before = 0;  // the soft limit found at start
  uint64_t now = 0;     // the soft limit after raising it
};

// Raises the soft limit to the hard limit (an unlimited hard limit: to
// 1,048,576). Never lowers it; a failure leaves it as it was.
FileLimit RaiseFileLimit();

// The reserve kept for the daemon's own descriptors at `limit`.
size_t DescriptorReserve(uint64_t limit);

// The connection bound when --max-connections is not given: the limit less
// its reserve, between 16 and 4096 (each gRPC connection costs memory too).
size_t AutoMaxConnections(uint64_t limit);

}  // namespace jitd::daemon
