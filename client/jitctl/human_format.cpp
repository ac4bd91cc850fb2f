#include "human_format.h"

#include <array>
#include <chrono>

#include "absl/strings/str_format.h"
#include "jitd/base/text.h"

namespace jitd::jitctl {

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatSeconds(double seconds) {
  struct Unit {
    double seconds;
    const char* suffix;
  };
  static constexpr std::array<Unit, 4> kUnits = {{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}}};
  for (const Unit& unit : kUnits) {
    const double count = seconds / unit.seconds;
    if (count >= 1 || unit.seconds == 1) {
      if (count < 10 && unit.seconds > 1) return absl::StrFormat("%.1f%s", count, unit.suffix);
      return absl::StrFormat("%.0f%s", count, unit.suffix);
    }
  }
  return "0s";
}

std::string FormatAge(int64_t unix_ms, int64_t now_unix_ms) {
  if (unix_ms <= 0) return "-";
  const int64_t age_ms = now_unix_ms - unix_ms;
  if (age_ms < 1000) return "just now";
  return text::Cat(FormatSeconds(static_cast<double>(age_ms) / 1000), " ago");
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace jitd::jitctl
