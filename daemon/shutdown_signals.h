// SIGTERM and SIGINT, taken synchronously.
//
// Both are blocked in every thread (Block() runs first in main, before gRPC
// or the cache start threads, and new threads inherit the mask) and main
// picks them up with sigwait(), so the shutdown sequence runs as ordinary
// code on the main thread instead of inside a signal handler.
#pragma once

namespace jitd::daemon {

class ShutdownSignals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread and in every thread it
  // creates afterwards. Call before any other thread exists.
  static void Block();

  // Waits for SIGTERM or SIGINT and returns its number.
  static int Wait();
};

}  // namespace jitd::daemon
