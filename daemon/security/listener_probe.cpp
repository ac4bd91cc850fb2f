#include "security/listener_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

using text::Cat;

// The HTTP/2 client connection preface and an empty SETTINGS frame.
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
constexpr size_t kPrefaceBytes = sizeof(kPreface) - 1;

struct Target {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

absl::StatusOr<Target> TargetOf(const std::string& address) {
  Target t;
  if (address.rfind("unix:", 0) == 0) {
    auto* un = reinterpret_cast<sockaddr_un*>(&t.addr);
    const std::string path = address.substr(5);
    if (path.size() >= sizeof(un->sun_path)) return absl::InvalidArgumentError("socket path too long");
    un->sun_family = AF_UNIX;
    std::memcpy(un->sun_path, path.c_str(), path.size() + 1);
    t.len = sizeof(sockaddr_un);
    return t;
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError(Cat("not HOST:PORT: ", address));
  std::string host = address.substr(0, colon);
  const int port = std::atoi(address.c_str() + colon + 1);
  const bool ipv6 = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (ipv6) host = host.substr(1, host.size() - 2);
  if (ipv6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&t.addr);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    if (host == "::") host = "::1";
    if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) != 1) return absl::InvalidArgumentError(host);
    t.len = sizeof(sockaddr_in6);
    return t;
  }
  auto* in = reinterpret_cast<sockaddr_in*>(&t.addr);
  in->sin_family = AF_INET;
  in->sin_port = htons(static_cast<uint16_t>(port));
  if (host == "0.0.0.0" || host == "localhost" || host.empty()) host = "127.0.0.1";
  if (inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) {
    return absl::InvalidArgumentError(Cat("cannot probe host ", host));
  }
  t.len = sizeof(sockaddr_in);
  return t;
}

}  // namespace

absl::Status ListenerProbe::ProbeOnce(const std::string& address, std::chrono::milliseconds answer_within,
                                      int wake_fd) {
  absl::StatusOr<Target> target = TargetOf(address);
  if (!target.ok()) return absl::AbortedError(target.status().message());
  const int fd = socket(target->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::AbortedError(Cat("no socket for the probe: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  const int timeout_ms = static_cast<int>(answer_within.count());
  if (connect(fd, reinterpret_cast<const sockaddr*>(&target->addr), target->len) != 0) {
    if (errno == EAGAIN) return absl::UnavailableError("its backlog is full: nothing takes the connections");
    if (errno != EINPROGRESS) return absl::UnavailableError(Cat("connect: ", std::strerror(errno)));
    pollfd p[2] = {{fd, POLLOUT, 0}, {wake_fd, POLLIN, 0}};
    if (poll(p, 2, timeout_ms) <= 0) return absl::UnavailableError("connect did not complete");
    if (p[1].revents != 0) return absl::AbortedError("stopping");
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return absl::UnavailableError(Cat("connect: ", std::strerror(err)));
  }
  (void)send(fd, kPreface, kPrefaceBytes, MSG_NOSIGNAL);
  pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const int ready = poll(p, 2, timeout_ms);
  if (ready > 0 && p[1].revents != 0) return absl::AbortedError("stopping");
  if (ready > 0) return absl::OkStatus();  // bytes, a close or a reset: something accepted and read
  return absl::UnavailableError(Cat("connected, but nothing answered in ", timeout_ms, " ms"));
}

ListenerProbe::ListenerProbe(Options options) : options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
}

ListenerProbe::~ListenerProbe() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ListenerProbe::Run() {
  std::map<std::string, int> failures;
  bool acted = false;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, options_.interval, [&] { return stopping_; })) return;
    }
    for (const std::string& address : options_.addresses) {
      const absl::Status probed = ProbeOnce(address, options_.answer_within, wake_fd_);
      if (probed.ok()) {
        failures[address] = 0;
        continue;
      }
      if (absl::IsAborted(probed)) continue;  // proves nothing
      const int n = ++failures[address];
      spdlog::warn("listener probe: {} did not answer ({} of {} in a row): {}", address, n, options_.failures_to_act,
                   std::string(probed.message()));
      if (n >= options_.failures_to_act && !acted && options_.on_deaf) {
        acted = true;
        options_.on_deaf(address, std::string(probed.message()));
      }
    }
  }
}

}  // namespace jitd::daemon
