// Endpoints: where a jitd daemon listens and a client connects.
//
// An endpoint is "unix:PATH" (a Unix socket; PATH may be relative) or
// "HOST:PORT" (TCP; "[::1]:7070" for IPv6 literals).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd {

// Where a daemon started without --listen listens:
//   unix:$XDG_RUNTIME_DIR/jitd.sock        when XDG_RUNTIME_DIR is set,
//   unix:$XDG_CACHE_HOME/jitd/jitd.sock    else when XDG_CACHE_HOME is set,
//   unix:$HOME/.cache/jitd/jitd.sock       otherwise.
// It depends on the environment only (never on the daemon's --cache-dir), so
// that a client can compute it without asking anyone. The daemon calls this
// same function for its default, which is why it lives in jitd_base.
std::string DefaultEndpoint();

// The user's jitd directory: $XDG_CACHE_HOME/jitd, else $HOME/.cache/jitd
// ($HOME from the password database when unset, as under systemd without a
// session or `env -i`; /tmp when neither says). The daemon's default cache
// and, without XDG_RUNTIME_DIR, the default socket live there, so that both
// agree on where HOME is.
std::string UserJitdDir();

// The endpoint a client should use: `explicit_endpoint` when non-empty, else
// $JITD_ENDPOINT when set and non-empty, else DefaultEndpoint().
std::string ResolveEndpoint(std::string_view explicit_endpoint);

// Whether `endpoint` is well-formed (see above); INVALID_ARGUMENT naming
// what is wrong otherwise. Nothing is resolved or connected.
absl::Status ValidateEndpoint(std::string_view endpoint);

// ---------------------------------------------------------------------------
// HOST:PORT, the one grammar of every TCP address jitd reads: client
// endpoints, --listen, --metrics-listen and redis:// URLs.
//
//   HOST:PORT      HOST a name or an IPv4 address, without ':'
//   [IPV6]:PORT    an IPv6 literal, always in brackets ("::1:7070" is
//                  ambiguous and refused)
//   PORT           decimal digits only, 1..65535; 0 as well where a server
//                  listens (PortUse::kListen: the kernel picks a free one)
// tests/vectors/endpoints.json lists the cases; the Python client's
// validate_endpoint is tested against the same file.

enum class PortUse { kConnect, kListen };

struct HostPort {
  std::string host;  // without brackets: "::1", "127.0.0.1", "cache.internal"
  std::string port;  // the digits as written, not yet checked
  bool bracketed = false;
};

// Splits `text` into host and port text. INVALID_ARGUMENT with a message
// that says what is wrong, for callers to put after their own framing
// ("expected HOST:PORT", "no host", "an IPv6 address goes in brackets...").
absl::StatusOr<HostPort> SplitHostPort(std::string_view text);

// The port `text` spells under `use`, or nothing.
std::optional<uint32_t> ParsePort(std::string_view text, PortUse use);

// "1..65535" or "0..65535": what ParsePort accepts, for messages.
std::string_view PortRange(PortUse use);

}  // namespace jitd
