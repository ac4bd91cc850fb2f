// Progress of long work (warming hundreds of kernels, compiling them all in
// `jitd lint`) as a person sees it: on a terminal, one line redrawn in place
// that never wraps (bar, counts, elapsed time, ETA, then the item's name,
// cut to what fits); elsewhere (CI logs, pipes), one plain line per finished
// item. Thread-safe.
#pragma once

#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace jitd {

class Progress {
 public:
  // Seconds since some fixed point; tests pass their own.
  using Clock = std::function<double()>;

  // `out` is usually stderr; `interactive` defaults to whether it is a TTY,
  // `columns` to the terminal's width (else $COLUMNS, else 80), `clock` to
  // the steady clock.
  Progress(std::string title, size_t total, std::FILE* out = stderr);
  Progress(std::string title, size_t total, std::FILE* out, bool interactive, int columns = 0, Clock clock = {});

  // One item finished. `outcome` is a short word ("compiled", "cached",
  // "failed", "ok"); `what` names the item; `detail` is shown after it.
  // `work_s` is how long the item's own work took (its compile time, 0 when
  // it was already cached), when the caller knows it: the ETA then counts
  // only items that did work, so a run of cache hits neither shows 0:00
  // nor makes the compiles after it look fast.
  void Done(const std::string& outcome, const std::string& what, const std::string& detail = {},
            std::optional<double> work_s = std::nullopt);

  // Ends the redrawn line (call once, before printing a summary).
  void Finish();

  double elapsed_s() const;
  size_t done() const;

  // The ETA as Done() would show it now: "--:--" while nothing says how
  // long an item takes. Exposed for tests.
  std::string Eta() const;

 private:
  std::string StatusLine(const std::string& what) const;  // one terminal line, at most columns_ - 1 wide
  std::string EtaLocked(double elapsed) const;

  const std::string title_;
  const size_t total_;
  std::FILE* const out_;
  const bool interactive_;
  const int columns_;
  const Clock clock_;
  const double start_;
  mutable std::mutex mu_;
  size_t done_ = 0;
  // Items that reported work_s > 0, and when (seconds after the start) the
  // earliest of them began: the span since then over their count is what
  // one more such item costs in wall time, parallelism included.
  size_t worked_ = 0;
  double busy_since_s_ = 0;
  bool knows_work_ = false;  // some item reported work_s
  bool finished_ = false;
};

}  // namespace jitd
