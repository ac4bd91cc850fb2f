// Precondition checks shared by the reference implementations.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace jitd::reference::detail {

inline void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("jitd::reference: ") + what);
}

inline void require_size(std::size_t actual, std::int64_t expected, const char* what) {
  require(expected >= 0 && actual == static_cast<std::uint64_t>(expected), what);
}

}  // namespace jitd::reference::detail
