// The one canonical text of a kernel instantiation's params, which the
// cache keys and indexes by: the daemon's resolver, the client's fallback
// and jitd warm all call this function.
#pragma once

#include <map>
#include <string>

namespace jitd {

// The params as the cache stores them: "k=v,k=v", sorted ("" for none).
// The "k=v" texts are what is sorted, as the daemon does: that is key order
// except where one name extends another with a character below '='.
std::string CanonicalParams(const std::map<std::string, std::string>& params);

}  // namespace jitd
