// Uses jitd::client as an outside program would: the header compiles, the
// library links, and a call reaches gRPC (no daemon runs, so UNAVAILABLE).
#include <iostream>

#include "jitd/client.h"

int main() {
  jitd::ClientOptions options;
  options.endpoint = "unix:/nonexistent/jitd-consumer.sock";
  auto client = jitd::Client::Connect(options);
  const bool unavailable = client.status().code() == absl::StatusCode::kUnavailable;
  const bool sized = jitd::ParseByteSize("10G").value_or(0) == (uint64_t{10} << 30);
  std::cout << (unavailable && sized ? "consumer ok" : "consumer FAILED") << '\n';
  return unavailable && sized ? 0 : 1;
}
