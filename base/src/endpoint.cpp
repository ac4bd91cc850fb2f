// Endpoint defaults and checks, shared by the client and (for its default
// listen address) the daemon.
#include "jitd/base/endpoint.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "jitd/base/text.h"

namespace jitd {

using text::Cat;
namespace {

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// $HOME, or the password database's home when HOME is unset (systemd
// services without User= session, containers started with env -i).
std::string HomeDir() {
  std::string home = EnvOrEmpty("HOME");
  if (!home.empty()) return home;
  if (const passwd* entry = getpwuid(getuid()); entry != nullptr && entry->pw_dir != nullptr) {
    return entry->pw_dir;
  }
  return "/tmp";
}

}  // namespace

std::string UserJitdDir() {
  std::string cache_home = EnvOrEmpty("XDG_CACHE_HOME");
  if (cache_home.empty()) cache_home = Cat(HomeDir(), "/.cache");
  return Cat(cache_home, "/jitd");
}

std::string DefaultEndpoint() {
  if (std::string runtime = EnvOrEmpty("XDG_RUNTIME_DIR"); !runtime.empty()) {
    return Cat("unix:", runtime, "/jitd.sock");
  }
  return Cat("unix:", UserJitdDir(), "/jitd.sock");
}

std::string ResolveEndpoint(std::string_view explicit_endpoint) {
  if (!explicit_endpoint.empty()) return std::string(explicit_endpoint);
  if (std::string from_env = EnvOrEmpty("JITD_ENDPOINT"); !from_env.empty()) return from_env;
  return DefaultEndpoint();
}

absl::Status ValidateEndpoint(std::string_view endpoint) {
  if (endpoint.starts_with("unix:")) {
    if (endpoint.size() == 5) {
      return absl::InvalidArgumentError(Cat("endpoint '", endpoint, "' names no socket path (expected unix:PATH)"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<HostPort> split = SplitHostPort(endpoint);
  if (!split.ok()) {
    // A bare socket path is the usual slip: say what it should read.
    const bool path = endpoint.starts_with("/") || endpoint.starts_with("./") || endpoint.starts_with("~") ||
                      endpoint.ends_with(".sock");
    return absl::InvalidArgumentError(Cat("endpoint '", endpoint, "' is neither unix:PATH nor HOST:PORT (",
                                          split.status().message(), ")",
                                          path ? Cat("; did you mean unix:", endpoint, "?") : std::string()));
  }
  if (!ParsePort(split->port, PortUse::kConnect)) {
    return absl::InvalidArgumentError(Cat("endpoint '", endpoint, "' has no valid port (expected HOST:PORT, PORT in ",
                                          PortRange(PortUse::kConnect), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HostPort> SplitHostPort(std::string_view text) {
  HostPort out;
  if (text.starts_with("[")) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return absl::InvalidArgumentError("no ] after the IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') return absl::InvalidArgumentError("expected [IPV6]:PORT");
    out.host = std::string(text.substr(1, close - 1));
    out.port = std::string(text.substr(close + 2));
    out.bracketed = true;
    if (out.host.empty()) return absl::InvalidArgumentError("the host is empty");
    if (out.host.find(':') == std::string::npos) {
      return absl::InvalidArgumentError("brackets are for IPv6 addresses only");
    }
    return out;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return absl::InvalidArgumentError("expected HOST:PORT");
  out.host = std::string(text.substr(0, colon));
  out.port = std::string(text.substr(colon + 1));
  if (out.host.empty()) return absl::InvalidArgumentError("the host is empty");
  if (out.host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError("an IPv6 address goes in brackets, as in [::1]:7070");
  }
  return out;
}

std::optional<uint32_t> ParsePort(std::string_view text, PortUse use) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  uint32_t port = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port > 65535 || (port == 0 && use == PortUse::kConnect)) return std::nullopt;
  return port;
}

std::string_view PortRange(PortUse use) { return use == PortUse::kListen ? "0..65535" : "1..65535"; }

}  // namespace jitd
