// String building for messages and SQL, shared by jitd's libraries. Debian's
// abseil is built without std::string_view support, so absl::StrCat does not
// take std::string_view; Cat does, along with numbers.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

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

// The one spelling of an instantiation in jitd's messages, logs and progress
// lines: `kernel{k=v,k=v}@arch`, then any extra options in brackets, as in
// `moe.topk_sum{dtype=bf16}@sm_90` or `small.fill{dtype=fp32}@sm_90[-lineinfo]`.
// `params` is the canonical "k=v,k=v" text the cache keeps; an empty arch
// (the daemon's default) leaves out the "@".
inline std::string Instantiation(std::string_view kernel, std::string_view params, std::string_view arch,
                                 const std::vector<std::string>& options = {}) {
  std::string out = Cat(kernel, "{", params, "}");
  if (!arch.empty()) Append(out, "@", arch);
  if (!options.empty()) Append(out, "[", Join(options, ","), "]");
  return out;
}

// Levenshtein distance: insertions, deletions and substitutions.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The rule behind every "did you mean" of jitd (kernel names, verbs, flags,
// config keys): up to `n` of `candidates` close to `name`, closest first.
// Close is within a third of the candidate's length (at least 3 edits), or
// containing the name or contained in it ("rmsnorm" finds "norm.rmsnorm").
template <typename Candidates>
std::vector<std::string> CloseMatches(std::string_view name, const Candidates& candidates, size_t n = 3) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& c : candidates) {
    const std::string_view candidate(c);
    size_t d = EditDistance(name, candidate);
    if (candidate.find(name) != std::string_view::npos ||
        (!name.empty() && name.find(candidate) != std::string_view::npos)) {
      d = 0;
    }
    if (d <= std::max<size_t>(3, candidate.size() / 3)) scored.emplace_back(d, std::string(candidate));
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < n; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace jitd::text
