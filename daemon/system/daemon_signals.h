// The signals a serving daemon acts on, taken synchronously:
//   SIGTERM, SIGINT  drain in-flight calls and exit 0
//   SIGHUP           re-read the kernels directory
//
// All three are blocked in every thread (Block() runs first in main, before
// gRPC, the cache or the compile workers start threads, and new threads
// inherit the mask) and main picks them up with sigwait(), so shutdown and
// reload run as ordinary code on the main thread, never inside a signal
// handler, and may take locks, log and allocate.
#pragma once

namespace jitd::daemon {

class DaemonSignals {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and in every
  // thread it creates afterwards. Call before any other thread exists.
  static void Block();

  // Undoes Block() in the calling thread, for the commands that do not
  // serve (`jitd lint`, `jitd warm`): they keep the default actions, so
  // Ctrl-C stops them. Call before they start any thread.
  static void Unblock();

  // Waits for one of them and returns its number.
  static int Wait();
};

}  // namespace jitd::daemon
