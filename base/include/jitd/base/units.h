// Sizes and durations, as jitd's command lines and config files spell them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace jitd {

// "1048576", "512K", "512M", "10G", "1T", "1.5G", with an optional "B" or
// "iB" ("10GiB", "10GB"); case-insensitive. Suffixes are powers of 1024.
// INVALID_ARGUMENT for anything else, or a value past 2^64-1.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// "90" (seconds), "30s", "15m", "2h", "7d". INVALID_ARGUMENT otherwise.
absl::StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

}  // namespace jitd
