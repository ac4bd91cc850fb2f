// String building for messages and SQL. (Debian's abseil is built without
// std::string_view support, so absl::StrCat does not take std::string_view;
// this small Cat does, along with numbers.)
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace jitd::cache::detail {

inline void AppendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void AppendPiece(std::string& out, const char* s) { out.append(s); }
inline void AppendPiece(std::string& out, const std::string& s) { out.append(s); }
inline void AppendPiece(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void AppendPiece(std::string& out, char c) { out.push_back(c); }
template <typename T>
  requires std::is_arithmetic_v<T>
void AppendPiece(std::string& out, T v) {
  out.append(std::to_string(v));
}

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(out, args), ...);
  return out;
}

inline std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

}  // namespace jitd::cache::detail
