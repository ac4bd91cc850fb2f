// Endpoints: where a jitd daemon listens and a client connects.
//
// An endpoint is "unix:PATH" (a Unix socket; PATH may be relative) or
// "HOST:PORT" (TCP; "[::1]:7070" for IPv6 literals).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace jitd {

// Where a daemon started without --listen listens:
//   unix:$XDG_RUNTIME_DIR/jitd.sock        when XDG_RUNTIME_DIR is set,
//   unix:$XDG_CACHE_HOME/jitd/jitd.sock    else when XDG_CACHE_HOME is set,
//   unix:$HOME/.cache/jitd/jitd.sock       otherwise.
// It depends on the environment only (never on the daemon's --cache-dir), so
// that a client can compute it without asking anyone. The daemon calls this
// same function for its default, which is why it lives in jitd_base.
std::string DefaultEndpoint();

// The endpoint a client should use: `explicit_endpoint` when non-empty, else
// $JITD_ENDPOINT when set and non-empty, else DefaultEndpoint().
std::string ResolveEndpoint(std::string_view explicit_endpoint);

// Whether `endpoint` is well-formed (see above); INVALID_ARGUMENT naming
// what is wrong otherwise. Nothing is resolved or connected.
absl::Status ValidateEndpoint(std::string_view endpoint);

}  // namespace jitd
