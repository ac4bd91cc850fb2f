#include "src/grpc_status.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "jitd/base/text.h"
#include "src/local_channel.h"

namespace jitd::client_detail {

using text::Cat;

namespace {

// Words only gRPC's transport uses, in the versions since 1.51: a message
// with one of them is gRPC's, not the daemon's.
constexpr std::string_view kTransportMarks[] = {
    "failed to connect",  "last error:",    "connections to all backends failing",
    "empty address list", "connect failed", "DNS resolution failed",
    "errors resolving",   "Socket closed",  "Connection reset by peer",
    "Broken pipe",        "GOAWAY"};

// gRPC's chain of transport errors ("failed to connect to all addresses;
// last error: UNKNOWN: unix:/run/jitd.sock: No such file or directory")
// as its last cause, without status names and addresses.
std::string LastCause(std::string message) {
  if (const size_t last = message.rfind("last error:"); last != std::string::npos) {
    message = message.substr(last + 11);
  }
  const auto strip = [&message](std::string_view prefix) {
    while (!message.empty() && message.front() == ' ') message.erase(0, 1);
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  };
  strip("UNKNOWN:");
  strip("UNAVAILABLE:");
  for (std::string_view scheme : {"unix:", "ipv4:", "ipv6:", "unix-abstract:"}) {
    while (!message.empty() && message.front() == ' ') message.erase(0, 1);
    if (message.rfind(scheme, 0) == 0) {
      if (const size_t end = message.find(": "); end != std::string::npos) message.erase(0, end + 2);
    }
  }
  return message.empty() ? std::string("no connection") : message;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view endpoint) {
  if (status.ok()) return absl::OkStatus();
  // gRPC and absl both use the canonical status codes with the same numbers.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable) {
    const std::string& message = status.error_message();
    const bool transport =
        message.empty() || std::any_of(std::begin(kTransportMarks), std::end(kTransportMarks),
                                       [&](std::string_view mark) { return message.find(mark) != std::string::npos; });
    if (!transport) return absl::UnavailableError(Cat("jitd at ", endpoint, ": ", message));  // the daemon's own
    return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint, ": ", LastCause(message),
                                      " (is the daemon running? start it with `jitd`)"));
  }
  return absl::Status(code, status.error_message());
}

std::string RefusalReason(std::string_view endpoint) {
  if (!endpoint.starts_with("unix:")) return "";
  const std::string path(endpoint.substr(5));
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return "";
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  std::string got;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return err == ECONNREFUSED ? "connection refused: nothing accepts on the socket (is the daemon running? start "
                                 "it with `jitd`)"
                               : "";
  }
  pollfd p{fd, POLLIN, 0};
  char buffer[2048];
  while (got.size() < sizeof(buffer) && poll(&p, 1, 500) > 0) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const std::string text = GoAwayText(got);
  return text.empty() ? "" : Cat("the daemon refused the connection: ", text);
}

absl::Status WithRefusalReason(absl::Status status, std::string_view endpoint) {
  const std::string unreachable = Cat("cannot reach jitd at ", endpoint, ": ");
  if (!absl::IsUnavailable(status) || !endpoint.starts_with("unix:") ||
      !absl::StartsWith(status.message(), unreachable) ||
      status.message().find("refused the connection") != std::string::npos) {
    return status;
  }
  const std::string why = RefusalReason(endpoint);
  return why.empty() ? status : absl::UnavailableError(Cat(unreachable, why));
}

}  // namespace jitd::client_detail
