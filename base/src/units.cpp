// Byte sizes and durations as users type them on command lines and in
// config files.
#include "jitd/base/units.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "jitd/base/text.h"

namespace jitd {

using text::Cat;
namespace {

// Splits "1.5GiB" into "1.5" and "gib" (lowercased).
absl::string_view ToAbsl(std::string_view text) { return {text.data(), text.size()}; }

std::string_view StripWhitespace(std::string_view text) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(ToAbsl(text));
  return {stripped.data(), stripped.size()};
}

void SplitNumberAndUnit(std::string_view text, std::string_view* number, std::string* unit) {
  size_t end = 0;
  while (end < text.size() && (absl::ascii_isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) {
    ++end;
  }
  *number = text.substr(0, end);
  *unit = absl::AsciiStrToLower(ToAbsl(StripWhitespace(text.substr(end))));
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  text = StripWhitespace(text);
  std::string_view number;
  std::string unit;
  SplitNumberAndUnit(text, &number, &unit);
  auto invalid = [&] {
    return absl::InvalidArgumentError(Cat("'", text, "' is not a byte size (examples: 1048576, 512M, 10G, 1.5GiB)"));
  };
  if (number.empty() || number == ".") return invalid();

  int shift = 0;
  if (!unit.empty() && unit != "b") {
    static constexpr std::string_view kPrefixes = "kmgtp";
    const size_t index = kPrefixes.find(unit[0]);
    const std::string_view rest = std::string_view(unit).substr(1);
    if (index == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib")) {
      return invalid();
    }
    shift = 10 * static_cast<int>(index + 1);
  }

  uint64_t whole = 0;
  if (number.find('.') == std::string_view::npos) {
    if (!absl::SimpleAtoi(ToAbsl(number), &whole)) return invalid();
    if (shift > 0 && whole > (std::numeric_limits<uint64_t>::max() >> shift)) {
      return absl::InvalidArgumentError(Cat("'", text, "' is more than 2^64-1 bytes"));
    }
    return whole << shift;
  }
  double value = 0;
  if (!absl::SimpleAtod(ToAbsl(number), &value)) return invalid();
  const long double bytes = std::ldexp(static_cast<long double>(value), shift);
  // 2^64 itself is not representable; compare against it exactly.
  if (bytes >= std::ldexp(1.0L, 64)) {
    return absl::InvalidArgumentError(Cat("'", text, "' is more than 2^64-1 bytes"));
  }
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<std::chrono::seconds> ParseDuration(std::string_view text) {
  text = StripWhitespace(text);
  std::string_view number;
  std::string unit;
  SplitNumberAndUnit(text, &number, &unit);
  int64_t count = 0;
  if (number.empty() || !absl::SimpleAtoi(ToAbsl(number), &count)) {
    return absl::InvalidArgumentError(Cat("'", text, "' is not a duration (examples: 90, 30s, 15m, 2h, 7d)"));
  }
  int64_t scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else if (unit == "d") {
    scale = 86400;
  } else {
    return absl::InvalidArgumentError(
        Cat("'", text, "' has an unknown unit '", unit, "' (use s, m, h or d: 30s, 15m, 2h, 7d)"));
  }
  if (count > std::numeric_limits<int64_t>::max() / scale) {
    return absl::InvalidArgumentError(Cat("'", text, "' is too long a duration"));
  }
  return std::chrono::seconds(count * scale);
}

}  // namespace jitd
