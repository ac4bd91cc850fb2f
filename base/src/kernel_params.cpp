#include "jitd/base/kernel_params.h"

#include <algorithm>
#include <vector>

#include "jitd/base/text.h"

namespace jitd {

std::string CanonicalParams(const std::map<std::string, std::string>& params) {
  // The "k=v" texts are sorted, not the names: that differs from key order
  // where a name extends another with a character below '=' ("n2=" sorts
  // before "n="). Every cache entry ever written is indexed by this text.
  std::vector<std::string> pairs;
  pairs.reserve(params.size());
  for (const auto& [name, value] : params) pairs.push_back(text::Cat(name, "=", value));
  std::sort(pairs.begin(), pairs.end());
  return text::Join(pairs, ",");
}

std::optional<std::map<std::string, std::string>> ParseCanonicalParams(std::string_view text) {
  std::map<std::string, std::string> params;
  for (std::string_view rest = text; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string_view pair = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    if (!params.emplace(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1))).second) return std::nullopt;
  }
  // Read back only what would be written back the same way.
  if (CanonicalParams(params) != text) return std::nullopt;
  return params;
}

}  // namespace jitd
