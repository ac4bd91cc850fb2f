// String building for messages and SQL, shared by jitd's libraries. Debian's
// abseil is built without std::string_view support, so absl::StrCat does not
// take std::string_view; Cat does, along with numbers.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace jitd::text {

inline void AppendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void AppendPiece(std::string& out, const char* s) { out.append(s); }
inline void AppendPiece(std::string& out, const std::string& s) { out.append(s); }
inline void AppendPiece(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void AppendPiece(std::string& out, char c) { out.push_back(c); }
template <typename T>
requires std::is_arithmetic_v<T>
void AppendPiece(std::string& out, T v) { out.append(std::to_string(v)); }

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(out, args), ...);
  return out;
}

// Appends every piece to `out` (one growth per piece, no temporary).
template <typename... Args>
void Append(std::string& out, const Args&... args) {
  (AppendPiece(out, args), ...);
}

template <typename Container>
std::string Join(const Container& parts, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& p : parts) {
    if (!first) out.append(sep);
    first = false;
    AppendPiece(out, p);
  }
  return out;
}

}  // namespace jitd::text
