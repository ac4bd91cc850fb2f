// Progress of long work (warming hundreds of kernels, compiling them all in
// `jitd lint`) as a person sees it: on a terminal, one line redrawn in place
// with a bar, counts and an ETA; elsewhere (CI logs, pipes), one plain line
// per finished item. Thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace jitd {

class Progress {
 public:
  // `out` is usually stderr; `interactive` defaults to whether it is a TTY.
  Progress(std::string title, size_t total, std::FILE* out = stderr);
  Progress(std::string title, size_t total, std::FILE* out, bool interactive);

  // One item finished. `outcome` is a short word ("compiled", "cached",
  // "failed", "ok"); `what` names the item; `detail` is shown after it.
  void Done(const std::string& outcome, const std::string& what, const std::string& detail = {});

  // Ends the redrawn line (call once, before printing a summary).
  void Finish();

  double elapsed_s() const;
  size_t done() const;

 private:
  std::string Bar() const;

  const std::string title_;
  const size_t total_;
  std::FILE* const out_;
  const bool interactive_;
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  size_t done_ = 0;
  bool finished_ = false;
};

}  // namespace jitd
