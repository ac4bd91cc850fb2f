// How jitctl shows sizes, times and counts to a person.
#pragma once

#include <cstdint>
#include <string>

namespace jitd::jitctl {

// 512 -> "512 B", 1536 -> "1.5 KiB", 10737418240 -> "10.0 GiB".
std::string FormatBytes(uint64_t bytes);

// Seconds as the largest whole unit: 42 -> "42s", 900 -> "15m", 7200 -> "2h",
// 604800 -> "7d"; one decimal below ten units ("1.5h").
std::string FormatSeconds(double seconds);

// A unix time in milliseconds as an age relative to `now_unix_ms`
// ("3m ago"); "-" for 0 (never), "just now" under a second.
std::string FormatAge(int64_t unix_ms, int64_t now_unix_ms);

// Milliseconds since the epoch, now.
int64_t NowUnixMs();

}  // namespace jitd::jitctl
