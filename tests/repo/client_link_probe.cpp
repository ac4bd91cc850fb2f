// A program that links jitd_client and nothing else: its link line is the
// client library's own closure, which repo.link_lines checks for the cache
// library (tests/repo/check_link_lines.py). It also runs: the client's
// canonical spec form, without a daemon.
#include <iostream>

#include "jitd/client.h"

int main() {
  const std::string spec = jitd::CanonicalSpec({.kernel = "norm.rms", .params = {{"dtype", "bf16"}}, .arch = "sm_90"});
  std::cout << spec << "\n";
  return spec.empty() ? 1 : 0;
}
