#include "src/grpc_status.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

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

// UNAVAILABLE from gRPC's transport (no connection, one closed), not from
// the daemon.
bool IsTransportError(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string& message = status.error_message();
  return message.empty() || std::any_of(std::begin(kTransportMarks), std::end(kTransportMarks),
                                        [&](std::string_view mark) { return message.find(mark) != std::string::npos; });
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view endpoint) {
  if (status.ok()) return absl::OkStatus();
  // gRPC and absl both use the canonical status codes with the same numbers.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable) {
    const std::string& message = status.error_message();
    if (!IsTransportError(status)) return absl::UnavailableError(Cat("jitd at ", endpoint, ": ", message));
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

std::optional<absl::Status> RefusedBy(const grpc::Status& status, std::string_view endpoint) {
  if (!endpoint.starts_with("unix:") || !IsTransportError(status)) return std::nullopt;
  std::string why = RefusalReason(endpoint);
  if (why.empty()) return std::nullopt;
  return absl::UnavailableError(Cat("cannot reach jitd at ", endpoint, ": ", why));
}

absl::Status FromGrpcCall(const grpc::Status& status, std::string_view endpoint) {
  if (std::optional<absl::Status> refused = RefusedBy(status, endpoint)) return *std::move(refused);
  return FromGrpcStatus(status, endpoint);
}

}  // namespace jitd::client_detail
