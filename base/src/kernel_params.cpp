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

}  // namespace jitd
