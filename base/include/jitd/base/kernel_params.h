// The one canonical text of a kernel instantiation's params, which the
// cache keys and indexes by: the daemon's resolver, the client's fallback
// and jitd warm all call this function.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace jitd {

// The params as the cache stores them: "k=v,k=v", sorted ("" for none).
// The "k=v" texts are what is sorted, as the daemon does: that is key order
// except where one name extends another with a character below '='.
std::string CanonicalParams(const std::map<std::string, std::string>& params);

// The params a canonical text names (an index row's, a lock entry's), the
// inverse of CanonicalParams; nullopt for a text CanonicalParams would not
// have written (a name twice, out of order, a pair without '=').
std::optional<std::map<std::string, std::string>> ParseCanonicalParams(std::string_view text);

}  // namespace jitd
