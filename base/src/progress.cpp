#include "jitd/base/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "jitd/base/text.h"

namespace jitd {
namespace {

std::string ClockText(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int TerminalColumns(std::FILE* out) {
  winsize size{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const int n = std::atoi(columns);
    if (n > 0) return n;
  }
  return 80;
}

// `text` in at most `width` characters: the start, "...", and the end (the
// end of an instantiation names its arch and options).
std::string Cut(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  if (width <= 3) return text.substr(0, width);
  const size_t tail = (width - 3) / 3;
  std::string out(text, 0, width - 3 - tail);
  out.append("...");
  out.append(text, text.size() - tail, tail);
  return out;
}

}  // namespace

Progress::Progress(std::string title, size_t total, std::FILE* out)
    : Progress(std::move(title), total, out, ::isatty(::fileno(out)) == 1) {}

Progress::Progress(std::string title, size_t total, std::FILE* out, bool interactive, int columns, Clock clock)
    : title_(std::move(title)),
      total_(total),
      out_(out),
      interactive_(interactive),
      columns_(columns > 0 ? columns : TerminalColumns(out)),
      clock_(clock ? std::move(clock) : Clock(SteadySeconds)),
      start_(clock_()) {
  // On a terminal the line is there at once ("0/N"), not after the first
  // item, which may take seconds.
  if (interactive_ && total_ > 0) {
    std::fprintf(out_, "\r\033[K%s", StatusLine("").c_str());
    std::fflush(out_);
  }
}

double Progress::elapsed_s() const { return clock_() - start_; }

size_t Progress::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

std::string Progress::Eta() const {
  std::lock_guard lock(mu_);
  return EtaLocked(elapsed_s());
}

std::string Progress::EtaLocked(double elapsed) const {
  const double left = static_cast<double>(total_ - done_);
  if (done_ >= total_) return ClockText(0);
  if (!knows_work_) {
    // No work times: the mean wall time per item so far.
    return done_ == 0 ? "--:--" : ClockText(elapsed / static_cast<double>(done_) * left);
  }
  // Only items that did work say what the rest will cost; every item left
  // is counted as one of those (an upper bound when some are cached).
  if (worked_ == 0) return "--:--";
  return ClockText((elapsed - busy_since_s_) / static_cast<double>(worked_) * left);
}

std::string Progress::StatusLine(const std::string& what) const {
  const double elapsed = elapsed_s();
  const std::string counts = text::Cat(done_, "/", total_);
  const std::string times = text::Cat(ClockText(elapsed), " eta ", EtaLocked(elapsed));
  // The line stays below the terminal's width, so it never wraps: the bar
  // shrinks first on a narrow terminal, then the item's name is cut.
  const size_t width = static_cast<size_t>(std::max(columns_ - 1, 20));
  const size_t fixed = title_.size() + 1 + counts.size() + 2 + times.size();
  constexpr size_t kNameRoom = 32;  // what the bar leaves to the item's name, where it can
  size_t bar_width = 20;
  while (bar_width > 0 && fixed + bar_width + 3 + 2 + kNameRoom > width) bar_width = bar_width > 8 ? bar_width - 4 : 0;
  std::string line = title_;
  line.push_back(' ');
  if (bar_width > 0) {
    const size_t filled = total_ == 0 ? bar_width : bar_width * done_ / total_;
    line.push_back('[');
    line.append(filled, '#');
    line.append(bar_width - filled, '.');
    line.append("] ");
  }
  line.append(counts).append("  ").append(times);
  if (!what.empty() && line.size() + 2 < width) line.append("  ").append(Cut(what, width - line.size() - 2));
  line.resize(std::min(line.size(), width));
  return line;
}

void Progress::Done(const std::string& outcome, const std::string& what, const std::string& detail,
                    std::optional<double> work_s) {
  std::lock_guard lock(mu_);
  ++done_;
  if (work_s) {
    knows_work_ = true;
    if (*work_s > 0) {
      const double began = std::max(0.0, elapsed_s() - *work_s);
      busy_since_s_ = worked_ == 0 ? began : std::min(busy_since_s_, began);
      ++worked_;
    }
  }
  if (interactive_) {
    // Failures stay on screen above the line; everything else is redrawn.
    if (outcome == "failed") {
      std::fprintf(out_, "\r\033[K%-8s %s%s%s\n", outcome.c_str(), what.c_str(), detail.empty() ? "" : "  ",
                   detail.c_str());
    }
    std::fprintf(out_, "\r\033[K%s", StatusLine(what).c_str());
  } else {
    std::fprintf(out_, "[%*zu/%zu] %-8s %s%s%s\n", static_cast<int>(std::to_string(total_).size()), done_, total_,
                 outcome.c_str(), what.c_str(), detail.empty() ? "" : "  ", detail.c_str());
  }
  std::fflush(out_);
}

void Progress::Finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (interactive_) {
    std::fprintf(out_, "\r\033[K%s\n", StatusLine({}).c_str());
    std::fflush(out_);
  }
}

}  // namespace jitd
