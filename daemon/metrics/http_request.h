// The request head of the metrics endpoint's HTTP/1.x, parsed: the one part
// of MetricsHttpServer that reads bytes from the network, kept apart from
// its socket loop so that it is unit-tested (tests/metrics) and fuzzed
// (tests/fuzz/fuzz_http_head.cpp).
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"

namespace jitd::metrics {

// The length of the request head at the start of `in`, up to and including
// the blank line that ends it (CRLF or bare LF line ends), or 0 while it is
// incomplete. Blank lines before the request line are skipped, as RFC 9112
// allows.
size_t RequestHeadLength(std::string_view in);

// What a well-formed head asks for. The views point into the parsed head.
struct RequestHead {
  std::string_view method;  // a token: "GET", "HEAD", ...
  std::string_view target;  // starts with '/', no spaces or controls
  std::string_view path;    // target without its query string
  bool http11 = false;      // HTTP/1.1 (else HTTP/1.0)
};

// Parses a complete head (RequestHeadLength bytes). Errors carry the words
// of the response: INVALID_ARGUMENT for a 400 (no request line, a request
// line that is not METHOD TARGET HTTP/VERSION, a bad method, target or
// version, a header line that is not NAME: VALUE or has a NUL or CR in its
// value, an HTTP/1.1 request without exactly one Host header),
// UNIMPLEMENTED for a 505 (HTTP/2.0 and other well-formed versions).
absl::StatusOr<RequestHead> ParseRequestHead(std::string_view head);

}  // namespace jitd::metrics
