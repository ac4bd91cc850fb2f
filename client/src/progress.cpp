#include "jitd/progress.h"

#include <unistd.h>

#include <cmath>

namespace jitd {
namespace {

std::string Clock(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

Progress::Progress(std::string title, size_t total, std::FILE* out)
    : Progress(std::move(title), total, out, ::isatty(::fileno(out)) == 1) {}

Progress::Progress(std::string title, size_t total, std::FILE* out, bool interactive)
    : title_(std::move(title)),
      total_(total),
      out_(out),
      interactive_(interactive),
      start_(std::chrono::steady_clock::now()) {}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

size_t Progress::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

std::string Progress::Bar() const {
  constexpr int kWidth = 24;
  int filled = total_ == 0 ? kWidth : static_cast<int>(kWidth * done_ / total_);
  std::string bar(static_cast<size_t>(kWidth + 2), '.');
  bar.front() = '[';
  bar.back() = ']';
  for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i + 1)] = '#';
  double elapsed = elapsed_s();
  std::string eta =
      done_ == 0 ? "--:--" : Clock(elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_));
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %s %zu/%zu  elapsed %s  eta %s", title_.c_str(), bar.c_str(), done_, total_,
                Clock(elapsed).c_str(), eta.c_str());
  return buf;
}

void Progress::Done(const std::string& outcome, const std::string& what, const std::string& detail) {
  std::lock_guard lock(mu_);
  ++done_;
  if (interactive_) {
    // Failures stay on screen above the bar; everything else is redrawn.
    if (outcome == "failed") {
      std::fprintf(out_, "\r\033[K%-8s %s%s%s\n", outcome.c_str(), what.c_str(), detail.empty() ? "" : "  ",
                   detail.c_str());
    }
    std::fprintf(out_, "\r\033[K%s  %.60s", Bar().c_str(), what.c_str());
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
    std::fprintf(out_, "\r\033[K%s\n", Bar().c_str());
    std::fflush(out_);
  }
}

}  // namespace jitd
