#include "verb.h"

namespace jitd::jitctl {

std::vector<std::unique_ptr<Verb>> MakeVerbs() {
  std::vector<std::unique_ptr<Verb>> verbs;
  verbs.push_back(MakeGetVerb());
  verbs.push_back(MakeKernelsVerb());
  verbs.push_back(MakeWarmVerb());
  verbs.push_back(MakeLsVerb());
  verbs.push_back(MakeStatsVerb());
  verbs.push_back(MakeEvictVerb());
  verbs.push_back(MakeVerifyVerb());
  verbs.push_back(MakeHealthVerb());
  return verbs;
}

}  // namespace jitd::jitctl
