// Endpoint defaults and checks, shared by the client and (for its default
// listen address) the daemon.
#include "jitd/base/endpoint.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
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

std::string DefaultEndpoint() {
  if (std::string runtime = EnvOrEmpty("XDG_RUNTIME_DIR"); !runtime.empty()) {
    return Cat("unix:", runtime, "/jitd.sock");
  }
  std::string cache_home = EnvOrEmpty("XDG_CACHE_HOME");
  if (cache_home.empty()) cache_home = HomeDir() + "/.cache";
  return Cat("unix:", cache_home, "/jitd/jitd.sock");
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
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(Cat("endpoint '", endpoint, "' is neither unix:PATH nor HOST:PORT"));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(std::string(endpoint.substr(colon + 1)), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        Cat("endpoint '", endpoint, "' has no valid port (expected HOST:PORT, PORT in 1..65535)"));
  }
  return absl::OkStatus();
}

}  // namespace jitd
