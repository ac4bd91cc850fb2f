#include "security/listen_address.h"

#include <cstring>

#include "absl/strings/match.h"
#include "jitd/base/endpoint.h"
#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

// sockaddr_un.sun_path holds 108 bytes including the terminating NUL; a
// longer path fails at bind with an error that does not say why.
constexpr size_t kMaxUnixPathBytes = 107;

}  // namespace

std::string ListenAddress::GrpcTarget() const {
  return kind == Kind::kUnix ? text::Cat("unix:", unix_path.string()) : host_port;
}

absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text) {
  ListenAddress address;
  if (absl::StartsWith(text, "unix:")) {
    const std::string path = text.substr(5);
    if (path.empty()) {
      return absl::InvalidArgumentError(text::Cat("'", text, "' names no socket path"));
    }
    address.kind = ListenAddress::Kind::kUnix;
    address.unix_path = std::filesystem::absolute(path).lexically_normal();
    if (address.unix_path.string().size() > kMaxUnixPathBytes) {
      return absl::InvalidArgumentError(text::Cat("socket path '", address.unix_path.string(), "' is longer than the ",
                                                  kMaxUnixPathBytes, " bytes a Unix socket address holds"));
    }
    return address;
  }
  // gRPC takes other URI schemes too; none of them is HOST:PORT, and an
  // abstract Unix socket has no file mode: anyone on the host could connect.
  for (const char* scheme : {"unix-abstract:", "vsock:", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(text, scheme)) {
      const std::string name(scheme, std::strlen(scheme) - 1);
      const std::string why =
          name == "unix-abstract" ? " (an abstract socket has no file permissions: any local user could connect)" : "";
      return absl::InvalidArgumentError(text::Cat("'", text, "' uses the gRPC scheme ", name,
                                                  ", which jitd does not listen on", why,
                                                  "; use unix:PATH or HOST:PORT"));
    }
  }
  absl::StatusOr<HostPort> split = SplitHostPort(text);
  if (!split.ok()) {
    return absl::InvalidArgumentError(text::Cat("'", text, "' is neither unix:PATH nor HOST:PORT (",
                                                split.status().message(),
                                                "; examples: unix:/run/jitd.sock, 127.0.0.1:7070)"));
  }
  if (!ParsePort(split->port, PortUse::kListen)) {
    return absl::InvalidArgumentError(text::Cat("'", text, "' has no valid port (expected HOST:PORT, PORT in ",
                                                PortRange(PortUse::kListen), "; 0: any free port)"));
  }
  address.kind = ListenAddress::Kind::kTcp;
  address.host_port = std::string(text);
  return address;
}

}  // namespace jitd::daemon
