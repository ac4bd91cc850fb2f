#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "jitd/base/endpoint.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "metrics/http_request.h"

namespace jitd::metrics {

namespace {

using Clock = std::chrono::steady_clock;

// How long a connection whose response is sent stays open to swallow what
// the client still sends (a body we ignore): closing a socket with unread
// input sends a reset, which can destroy the response before it is read.
constexpr std::chrono::milliseconds kMaxLinger{2000};
// How long accepting pauses when the process is out of descriptors.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

struct ResolvedAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool ipv6 = false;
  std::string host;  // as printed back: "127.0.0.1", "::1"
};

absl::Status BadAddress(const std::string& text, std::string_view why) {
  return absl::InvalidArgumentError(jitd::text::Cat("metrics address \"", text, "\": ", why));
}

absl::StatusOr<ResolvedAddress> ParseAddress(const std::string& text) {
  absl::StatusOr<jitd::HostPort> split = jitd::SplitHostPort(text);
  if (!split.ok()) {
    if (!text.empty() && text[0] == ':') return BadAddress(text, "no host (0.0.0.0 or [::] for every interface)");
    return BadAddress(text, std::string(split.status().message()));
  }
  if (!jitd::ParsePort(split->port, jitd::PortUse::kListen)) {
    return BadAddress(text, jitd::text::Cat("the port must be a number in ", jitd::PortRange(jitd::PortUse::kListen)));
  }
  std::string host = split->host;
  const std::string& port_text = split->port;
  if (host == "localhost") host = "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return BadAddress(text, jitd::text::Cat("\"", host, "\" is not an IPv4 or IPv6 address or localhost"));
  }
  ResolvedAddress out;
  std::memcpy(&out.addr, result->ai_addr, result->ai_addrlen);
  out.len = result->ai_addrlen;
  out.ipv6 = result->ai_family == AF_INET6;
  out.host = host;
  freeaddrinfo(result);
  return out;
}

absl::Status ListenError(const std::string& what, const std::string& address, int err) {
  std::string message = jitd::text::Cat("metrics: cannot ", what, " ", address, ": ", ErrnoText(err));
  switch (err) {
    case EADDRINUSE:
      return absl::UnavailableError(message);
    case EADDRNOTAVAIL:
      return absl::InvalidArgumentError(jitd::text::Cat(message, " (not an address of this host)"));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string Response(int code, std::string_view reason, std::string_view content_type, const std::string& body,
                     bool head_only, std::string_view extra_headers = "") {
  std::string out =
      jitd::text::Cat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n", extra_headers, "\r\n");
  if (!head_only) out += body;
  return out;
}

std::string TextResponse(int code, std::string_view reason, const std::string& body, bool head_only = false,
                         std::string_view extra_headers = "") {
  return Response(code, reason, "text/plain; charset=utf-8", body, head_only, extra_headers);
}

std::string BadRequest(std::string_view why) {
  return TextResponse(400, "Bad Request", jitd::text::Cat("400 bad request: ", why, "\n"));
}

}  // namespace

std::string MetricsHttpServer::Respond(std::string_view head) const {
  absl::StatusOr<RequestHead> request = ParseRequestHead(head);
  if (absl::IsUnimplemented(request.status())) {
    return TextResponse(505, "HTTP Version Not Supported", "505 only HTTP/1.0 and HTTP/1.1 are served\n");
  }
  if (!request.ok()) return BadRequest(std::string(request.status().message()));
  const std::string_view path = request->path;
  const bool head_only = request->method == "HEAD";
  if (path != "/metrics" && path != "/") {
    return TextResponse(404, "Not Found", "404 not found: the metrics are at /metrics\n", head_only);
  }
  if (request->method != "GET" && !head_only) {
    return TextResponse(405, "Method Not Allowed", "405 method not allowed: GET or HEAD\n", false,
                        "Allow: GET, HEAD\r\n");
  }
  if (path == "/") {
    return Response(200, "OK", "text/html; charset=utf-8",
                    "<html><body>Metrics are at <a href=\"/metrics\">/metrics</a>.</body></html>\n", head_only);
  }
  std::string body;
  try {
    body = options_.render();
  } catch (const std::exception& e) {
    spdlog::error("metrics: rendering the metrics failed: {}", e.what());
    return TextResponse(500, "Internal Server Error", "500 rendering the metrics failed\n", head_only);
  } catch (...) {
    spdlog::error("metrics: rendering the metrics failed");
    return TextResponse(500, "Internal Server Error", "500 rendering the metrics failed\n", head_only);
  }
  return Response(200, "OK", kContentType, body, head_only);
}

struct MetricsHttpServer::Connection {
  enum class State { kReading, kWriting, kLingering };
  int fd = -1;
  State state = State::kReading;
  std::string in;
  std::string out;
  size_t sent = 0;
  Clock::time_point accepted;
  Clock::time_point deadline;
};

MetricsHttpServer::MetricsHttpServer(Options options) : options_(std::move(options)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start() {
  if (started_) return absl::FailedPreconditionError("metrics: the HTTP server was started before");
  if (!options_.render) return absl::FailedPreconditionError("metrics: the HTTP server has no render callback");
  JITD_ASSIGN_OR_RETURN(ResolvedAddress addr, ParseAddress(options_.address));

  const int fd = socket(addr.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ListenError("open a socket for", options_.address, errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // restarts need not wait out TIME_WAIT
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0) {
    const int err = errno;
    close(fd);
    return ListenError("listen on", options_.address, err);
  }
  if (listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    return ListenError("listen on", options_.address, err);
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    const int err = errno;
    close(fd);
    return ListenError("read the port of", options_.address, err);
  }
  port_ = ntohs(addr.ipv6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                          : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  bound_address_ = addr.ipv6 ? jitd::text::Cat("[", addr.host, "]:", port_) : jitd::text::Cat(addr.host, ":", port_);

  const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(jitd::text::Cat("metrics: eventfd: ", ErrnoText(err)));
  }
  listen_fd_ = fd;
  wake_fd_ = wake;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  spdlog::info("metrics: serving http://{}/metrics", bound_address_);
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

// One poll loop over the listener, the wake eventfd and every connection.
// A connection is read until its request head is whole (kReading), written
// its response (kWriting), then drained until the client closes or the
// linger passes (kLingering); each state has a deadline. Each step returns
// false when the connection is to be closed.
class MetricsHttpServer::Loop {
 public:
  explicit Loop(MetricsHttpServer& server)
      : server_(server),
        timeout_(std::max(server.options_.client_timeout, std::chrono::milliseconds(1))),
        linger_(std::min(timeout_, kMaxLinger)),
        max_connections_(std::max<size_t>(server.options_.max_connections, 1)),
        max_head_(std::max<size_t>(server.options_.max_request_head_bytes, 16)) {}
  ~Loop() {
    for (const auto& c : conns_) close(c->fd);
    server_.connections_.store(0, std::memory_order_relaxed);
  }

  void Run() {
    while (true) {
      const int ready = Poll();
      if (ready < 0) return;
      const Clock::time_point now = Clock::now();
      // Connections first, so that fds_[i + 2] still matches conns_[i].
      for (size_t i = 0; i < conns_.size(); ++i) {
        Connection& c = *conns_[i];
        if (!Serve(c, ready > 0 && fds_[i + 2].revents != 0, now)) {
          close(c.fd);
          c.fd = -1;
        }
      }
      std::erase_if(conns_, [](const std::unique_ptr<Connection>& c) { return c->fd < 0; });
      if (ready > 0 && fds_[1].revents != 0) AcceptAll(now);
      server_.connections_.store(conns_.size(), std::memory_order_relaxed);
    }
  }

 private:
  // Waits for the next event or deadline: the number of ready descriptors,
  // or -1 when the loop is to end (Stop(), or poll failed).
  int Poll() {
    const Clock::time_point now = Clock::now();
    const bool accepting = now >= accept_paused_until_;
    fds_.clear();
    fds_.push_back({server_.wake_fd_, POLLIN, 0});
    fds_.push_back({accepting ? server_.listen_fd_ : -1, POLLIN, 0});
    Clock::time_point next = accepting ? Clock::time_point::max() : accept_paused_until_;
    for (const auto& c : conns_) {
      fds_.push_back({c->fd, static_cast<short>(c->state == Connection::State::kWriting ? POLLOUT : POLLIN), 0});
      next = std::min(next, c->deadline);
    }
    int wait_ms = -1;
    if (next != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
    }
    const int ready = poll(fds_.data(), fds_.size(), wait_ms);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("metrics: poll failed: {}; the metrics endpoint stops", ErrnoText(errno));
      return -1;
    }
    if (fds_[0].revents != 0) return -1;  // Stop()
    return std::max(ready, 0);
  }

  // One connection's turn: its step if it is ready, then its deadline.
  bool Serve(Connection& c, bool ready, Clock::time_point now) {
    bool keep = true;
    if (ready) {
      switch (c.state) {
        case Connection::State::kReading:
          keep = ReadHead(c, now);
          break;
        case Connection::State::kWriting:
          keep = SendOutput(c, now);
          break;
        case Connection::State::kLingering:
          keep = DrainInput(c);
          break;
      }
    }
    if (!keep || now < c.deadline) return keep;
    if (c.state == Connection::State::kReading) {
      TellTooSlow(c.fd);
      spdlog::debug("metrics: dropped a client that sent no complete request in {} ms", timeout_.count());
    } else if (c.state == Connection::State::kWriting) {
      spdlog::debug("metrics: dropped a client that did not take its response in {} ms", timeout_.count());
    }
    return false;
  }

  bool DrainInput(Connection& c) {
    while (true) {
      const ssize_t n = recv(c.fd, scratch_, sizeof(scratch_), 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }

  bool SendOutput(Connection& c, Clock::time_point now) {
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      }
    }
    shutdown(c.fd, SHUT_WR);
    c.state = Connection::State::kLingering;
    c.deadline = now + linger_;
    std::string().swap(c.out);
    std::string().swap(c.in);
    return DrainInput(c);
  }

  bool ReadHead(Connection& c, Clock::time_point now) {
    while (true) {
      const size_t room = max_head_ + 1 - c.in.size();
      const ssize_t n = recv(c.fd, scratch_, std::min(room, sizeof(scratch_)), 0);
      if (n == 0) return false;  // gone before the whole head came
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
      }
      c.in.append(scratch_, static_cast<size_t>(n));
      const size_t head = RequestHeadLength(c.in);
      if (head != 0 && head <= max_head_) {
        c.out = server_.Respond(std::string_view(c.in).substr(0, head));
      } else if (c.in.size() > max_head_) {
        c.out = TextResponse(431, "Request Header Fields Too Large",
                             jitd::text::Cat("431 the request head is larger than ", max_head_, " bytes\n"));
      } else {
        continue;
      }
      c.state = Connection::State::kWriting;
      c.deadline = now + timeout_;
      return SendOutput(c, now);
    }
  }

  // The best-effort answer to a client dropped before its request head came.
  static void TellTooSlow(int fd) {
    static const std::string slow = TextResponse(408, "Request Timeout", "408 the request took too long\n");
    (void)send(fd, slow.data(), slow.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  static void Refuse(int fd) {
    static const std::string busy =
        TextResponse(503, "Service Unavailable", "503 too many connections to the metrics endpoint\n");
    (void)send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  }

  // Makes a place for a newcomer when all are taken: drops (408) the
  // connection that has been sending its request head the longest, so that
  // slow clients cannot keep a scrape out. Only conns_[0, settled), the
  // connections accepted before this accept pass, qualify: each newcomer is
  // read at least once before it can be dropped in turn. A connection that
  // has sent part of a head goes before one that has sent nothing yet: a
  // scraper sends its head in one write, so one caught between its connect
  // and that write is not what a slow client looks like, however long
  // churning slow clients make it the oldest. False when none qualifies
  // (all are writing or lingering: real work), and nothing changes.
  bool MakeRoom(size_t& settled) {
    size_t oldest = settled;
    const auto before = [](const Connection& a, const Connection& b) {
      if (a.in.empty() != b.in.empty()) return !a.in.empty();
      return a.accepted < b.accepted;
    };
    for (size_t i = 0; i < settled; ++i) {
      if (conns_[i]->state == Connection::State::kReading &&
          (oldest == settled || before(*conns_[i], *conns_[oldest]))) {
        oldest = i;
      }
    }
    if (oldest == settled) return false;
    TellTooSlow(conns_[oldest]->fd);
    close(conns_[oldest]->fd);
    conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(oldest));
    --settled;
    server_.slow_clients_dropped_.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("metrics: dropped a client still sending its request head to make room for a new one");
    return true;
  }

  void AcceptAll(Clock::time_point now) {
    size_t settled = conns_.size();
    for (int i = 0; i < 64; ++i) {
      const int fd = accept4(server_.listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return;
        if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
        // Out of descriptors or memory: the listener would stay readable,
        // so stop polling it for a moment rather than spin.
        spdlog::warn("metrics: accept failed: {}; pausing for {} ms", ErrnoText(err), kAcceptBackoff.count());
        accept_paused_until_ = now + kAcceptBackoff;
        return;
      }
      if (conns_.size() >= max_connections_ && !MakeRoom(settled)) {
        Refuse(fd);
        continue;
      }
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->accepted = now;
      c->deadline = now + timeout_;
      conns_.push_back(std::move(c));
    }
  }

  MetricsHttpServer& server_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds linger_;
  const size_t max_connections_;
  const size_t max_head_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<pollfd> fds_;
  Clock::time_point accept_paused_until_{};
  char scratch_[4096];
};

void MetricsHttpServer::Run() { Loop(*this).Run(); }

}  // namespace jitd::metrics
