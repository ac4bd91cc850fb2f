// Request heads as a client of the metrics endpoint sends them: the only
// bytes jitd reads from a TCP peer without gRPC. RequestHeadLength must
// stay inside its input, and a head it delimits must parse to an answer
// (an error or a request) whose views lie inside that head and satisfy the
// grammar ParseRequestHead promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "metrics/http_request.h"

namespace {

bool Inside(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t length = jitd::metrics::RequestHeadLength(in);
  if (length > in.size()) std::abort();
  // Complete heads, and the whole input as if it were one (the parser must
  // not rely on its caller having found the blank line).
  for (const std::string_view head : {in.substr(0, length), in}) {
    auto request = jitd::metrics::ParseRequestHead(head);
    if (!request.ok()) {
      if (!absl::IsInvalidArgument(request.status()) && !absl::IsUnimplemented(request.status())) std::abort();
      continue;
    }
    if (!Inside(request->method, head) || !Inside(request->target, head) || !Inside(request->path, head)) std::abort();
    if (request->method.empty() || request->target.empty() || request->target[0] != '/') std::abort();
    if (request->path.size() > request->target.size() || request->path.find('?') != std::string_view::npos) {
      std::abort();
    }
    for (const char c : request->target) {
      if (c <= ' ' || c == '\x7f') std::abort();
    }
  }
  return 0;
}
