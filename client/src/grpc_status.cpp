#include "src/grpc_status.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include "jitd/base/text.h"

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

}  // namespace jitd::client_detail
