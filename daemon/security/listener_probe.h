// ListenerProbe: the daemon checks, from outside, that its listeners still
// accept.
//
// A listener can stop accepting while the process lives on (gRPC's TCP
// listener after an accept4() that failed with EMFILE, a wedged accept
// thread): clients then hang or time out, and nothing restarts the daemon.
// Every `interval` the probe connects to each address the daemon serves,
// sends the HTTP/2 client preface and waits up to `answer_within` for any
// answer: bytes (gRPC's SETTINGS; a TLS alert; a GOAWAY of a refusal) or
// the connection closed. Each of these proves that something accepted and
// read. After `failures_to_act` probes in a row unanswered on one address,
// `on_deaf(address, why)` is called once, from the probe's thread; the
// daemon logs it and exits non-zero so that its supervisor restarts it.
// A probe that cannot even make its socket (the process is out of
// descriptors, which the Unix acceptor survives) proves nothing either way
// and is not counted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::daemon {

class ListenerProbe {
 public:
  struct Options {
    // The addresses as Server::addresses() gives them: "unix:/abs/path",
    // "127.0.0.1:43127", "[::1]:7070"; a wildcard host (0.0.0.0, [::]) is
    // probed on loopback.
    std::vector<std::string> addresses;
    std::chrono::milliseconds interval{10000};
    std::chrono::milliseconds answer_within{2000};
    int failures_to_act = 3;
    std::function<void(const std::string& address, const std::string& why)> on_deaf;
  };

  // Starts probing (the first probe after one interval).
  explicit ListenerProbe(Options options);
  // Stops and joins the thread; returns at once, whatever a probe waits on.
  ~ListenerProbe();
  ListenerProbe(const ListenerProbe&) = delete;
  ListenerProbe& operator=(const ListenerProbe&) = delete;

  // One probe of `address`: OK when it answered, UNAVAILABLE saying how it
  // did not, or ABORTED when no socket could be made (not counted) or
  // `wake_fd` (when not -1) turned readable meanwhile.
  static absl::Status ProbeOnce(const std::string& address, std::chrono::milliseconds answer_within, int wake_fd = -1);

 private:
  void Run();

  const Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  int wake_fd_ = -1;       // an eventfd: the destructor ends a probe's wait
  std::thread thread_;
};

}  // namespace jitd::daemon
