#include "rpc/local_server.h"

#include <poll.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "jitd/base/local_wire.h"
#include "jitd/base/text.h"

namespace jitd::daemon {

using text::Cat;
using Steady = std::chrono::steady_clock;
namespace wire = local_wire;

namespace {

// How long the thread sleeps when no connection has a deadline.
constexpr int kIdlePollMs = 1000;
// How long the thread keeps polling, without sleeping, after a connection
// arrives or a frame is answered. A client's next frame usually follows
// within this; met by a sleeping thread it would wait out a wakeup
// (see kSpinBeforeBlocking in client/src/local_channel.cpp for what the
// two save). Bounded: one thread, and only while there is traffic.
constexpr auto kLinger = std::chrono::microseconds(250);
// Serve() reads epoll's event bits as poll's, which they are.
static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT && EPOLLERR == POLLERR && EPOLLHUP == POLLHUP);

// Events one epoll_wait takes (the rest wait for the next turn).
constexpr size_t kEventsPerWait = 64;
// Requests answered from one connection before the others get their turn.
constexpr int kFramesPerTurn = 8;
// One read from a connection.
constexpr size_t kReadBytes = 16 << 10;

std::string PeerName(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return "uid:?";
  return Cat("uid:", cred.uid);
}

v1::LocalAnswer ErrorAnswer(absl::StatusCode code, std::string message) {
  v1::LocalAnswer answer;
  answer.set_code(static_cast<int32_t>(code));
  answer.set_message(std::move(message));
  return answer;
}

}  // namespace

struct LocalServer::Connection {
  Connection(int descriptor, bool greeted) : fd(descriptor), reader(/*preface_due=*/!greeted, wire::kMaxRequestBytes) {}
  // Whether the client owes bytes: the preface, or the rest of a frame.
  bool Owing() const { return reader.preface_due() || reader.buffered() > 0; }

  int fd = -1;
  std::string peer;
  // The preface (unless the acceptor read it), then request frames.
  wire::FrameReader reader;
  std::string out;  // an answer not yet sent
  size_t out_at = 0;
  bool close_after_send = false;
  // When the unfinished input or the unsent answer began; max() = none.
  Steady::time_point waiting_since = Steady::time_point::max();
  uint32_t events = 0;   // what the epoll set waits for on fd
  uint32_t revents = 0;  // what the last epoll_wait said of it
};

LocalServer::LocalServer(Options options) : options_(std::move(options)) {}

LocalServer::~LocalServer() { Stop(); }

absl::Status LocalServer::Start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError(Cat("epoll_create1: ", std::strerror(errno)));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError(Cat("eventfd: ", std::strerror(errno)));
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.ptr = nullptr;  // the one event without a connection
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake) != 0) {
    return absl::InternalError(Cat("epoll_ctl: ", std::strerror(errno)));
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void LocalServer::Adopt(int fd, bool greeted) {
  auto c = std::make_unique<Connection>(fd, greeted);
  c->peer = PeerName(fd);  // here, not when the connection's first frame waits
  // Ungreeted, the preface is due; greeted, nothing is until a frame begins.
  if (!greeted) c->waiting_since = Steady::now();
  c->events = EPOLLIN;
  epoll_event event{};
  event.events = c->events;
  event.data.ptr = c.get();
  bool taken = false;
  {
    std::lock_guard lock(mu_);
    // Watched from here on: the thread takes adopted_ before it looks at
    // any event, so the connection an event names is always its own.
    if (!stopping_ && thread_.joinable() && epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) == 0) {
      adopted_.push_back(std::move(c));
      taken = true;
    }
  }
  if (!taken) {
    close(fd);
    return;
  }
  // Woken now, the thread is awake and lingering (kLinger) when the
  // client's first frame comes, a few tens of microseconds after the
  // greeting; left asleep, that frame would wait out its wakeup. An
  // ungreeted connection has a deadline the thread must know of too.
  Wake();
}

void LocalServer::Wake() {
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void LocalServer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) {
    Wake();
    thread_.join();
  }
  for (const auto& c : adopted_) Close(*c);
  adopted_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  wake_fd_ = epoll_fd_ = -1;
}

void LocalServer::Close(const Connection& c) const {
  // Out of the epoll set first: a compile worker forked meanwhile may hold
  // the descriptor until its exec, and its events must not name a
  // connection that is gone.
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  close(c.fd);
}

void LocalServer::Run() {
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<epoll_event> events(kEventsPerWait);
  const auto drop = [&](size_t i) {
    // Uncounted before the peer can see the close: whoever sees it closed
    // and then reads connections() finds it gone.
    open_.fetch_sub(1, std::memory_order_relaxed);
    Close(*connections[i]);
    connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
  };
  Steady::time_point linger_until = Steady::time_point::min();
  while (true) {
    // Closed for taking too long: an unfinished frame or an untaken answer.
    const Steady::time_point now = Steady::now();
    Steady::time_point next_deadline = Steady::time_point::max();
    for (size_t i = connections.size(); i-- > 0;) {
      const Connection& c = *connections[i];
      if (c.waiting_since == Steady::time_point::max()) continue;
      const Steady::time_point deadline = c.waiting_since + options_.frame_timeout;
      if (deadline <= now) {
        spdlog::debug("local path: closing {}'s connection: {} unfinished for {} ms", c.peer,
                      c.out.empty() ? "a request" : "an answer", options_.frame_timeout.count());
        drop(i);
        continue;
      }
      next_deadline = std::min(next_deadline, deadline);
    }
    bool backlog = false;
    for (size_t i = connections.size(); i-- > 0;) {
      Connection& c = *connections[i];
      // A connection with an answer unsent, or a whole unit (a preface, a
      // frame) untaken (its turn comes first), is not read from: what one
      // buffers is an answer, a frame and one read. Any other needs bytes,
      // and waits for them: an unfinished preface or frame blocks here
      // until more come or its deadline. Only a change costs a system call.
      const uint32_t want = !c.out.empty() ? uint32_t{EPOLLOUT} : HasUnit(c) ? 0u : uint32_t{EPOLLIN};
      if (want != c.events) {
        epoll_event event{};
        event.events = want;
        event.data.ptr = &c;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &event) != 0) {
          drop(i);
          continue;
        }
        c.events = want;
      }
      // Frames left over from a connection's last turn are answered
      // without waiting for more bytes; each turn takes at least one.
      backlog = backlog || (c.out.empty() && HasUnit(c));
    }
    const bool lingering = now < linger_until;
    int timeout_ms = backlog || lingering ? 0 : kIdlePollMs;
    if (timeout_ms != 0 && next_deadline != Steady::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - now).count() + 1;
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 1, kIdlePollMs));
    }
    // A client woken by this thread may be queued on its core.
    if (lingering && !backlog) sched_yield();
    // epoll, not poll: a wakeup costs the same with one connection open or
    // thousands, and the acceptor adds connections to the set itself.
    const int ready = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("the local path's epoll_wait failed: {}; its connections are closed", std::strerror(errno));
      break;
    }
    {
      // Before any event is looked at: one may name a connection adopted
      // since the last turn.
      std::lock_guard lock(mu_);
      if (stopping_) break;
      for (auto& c : adopted_) {
        connections.push_back(std::move(c));
        open_.fetch_add(1, std::memory_order_relaxed);
      }
      adopted_.clear();
    }
    if (ready > 0) linger_until = Steady::now() + kLinger;
    for (int e = 0; e < std::max(ready, 0); ++e) {
      if (events[e].data.ptr == nullptr) {
        uint64_t count = 0;
        (void)read(wake_fd_, &count, sizeof(count));
      } else {
        static_cast<Connection*>(events[e].data.ptr)->revents = events[e].events;
      }
    }
    // Back to front, so that dropping one leaves the others' indices.
    for (size_t i = connections.size(); i-- > 0;) {
      const auto revents = static_cast<short>(connections[i]->revents);
      connections[i]->revents = 0;
      if (revents == 0 && !(connections[i]->out.empty() && HasUnit(*connections[i]))) continue;
      if (!Serve(*connections[i], revents)) drop(i);
    }
  }
  while (!connections.empty()) drop(connections.size() - 1);
}

bool LocalServer::Serve(Connection& c, short revents) {
  if ((revents & POLLERR) != 0) return false;
  // Hung up with an answer still to take: nobody will.
  if ((revents & POLLHUP) != 0 && !c.out.empty()) return false;
  if ((revents & POLLOUT) != 0 && !Send(c)) return false;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && c.out.empty() && !HasUnit(c)) {
    char buffer[kReadBytes];
    const ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
    // The client hung up: an unfinished preface or frame goes with it.
    if (n == 0) return false;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (n > 0) {
      if (c.waiting_since == Steady::time_point::max()) c.waiting_since = Steady::now();
      c.reader.Feed(std::string_view(buffer, static_cast<size_t>(n)));
      const size_t held = c.reader.buffered();
      size_t peak = peak_input_bytes_.load(std::memory_order_relaxed);
      while (held > peak && !peak_input_bytes_.compare_exchange_weak(peak, held)) {
      }
    }
  }
  // A few units per turn, each answer sent before the next is taken.
  for (int turn = 0; turn < kFramesPerTurn && c.out.empty(); ++turn) {
    const wire::Unit unit = c.reader.Next();
    if (unit == wire::Unit::kNone) break;
    // The acceptor peeked a start of the preface; the rest is not this
    // protocol.
    if (unit == wire::Unit::kNotPreface) return false;
    if (unit == wire::Unit::kWholePreface) {
      c.out.append(wire::kPreface);
    } else {
      AnswerOne(c, unit);
    }
    if (!Send(c)) return false;
  }
  if (c.out.empty() && c.close_after_send) return false;
  if (c.out.empty() && !c.Owing()) c.waiting_since = Steady::time_point::max();
  return true;
}

bool LocalServer::HasUnit(const Connection& c) { return c.reader.Ready(); }

void LocalServer::AnswerOne(Connection& c, wire::Unit unit) {
  v1::LocalAnswer answer;
  if (unit == wire::Unit::kOversized) {
    answer = ErrorAnswer(
        absl::StatusCode::kInvalidArgument,
        Cat("a local-path request of ", c.reader.oversized_length(), " bytes; the most is ", wire::kMaxRequestBytes));
    c.close_after_send = true;
  } else {
    v1::GetKernelRequest request;
    const std::string_view payload = c.reader.payload();
    if (request.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      answer = options_.answer(request, c.peer);
    } else {
      answer = ErrorAnswer(absl::StatusCode::kInvalidArgument, "a local-path frame that is not a GetKernelRequest");
      c.close_after_send = true;
    }
  }
  wire::AppendFrame(answer.SerializeAsString(), &c.out);
  c.waiting_since = Steady::now();  // the answer is due to leave
  answered_.fetch_add(1, std::memory_order_relaxed);
}

bool LocalServer::Send(Connection& c) {
  while (c.out_at < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_at, c.out.size() - c.out_at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;  // the rest when the socket has room
    }
    c.out_at += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out_at = 0;
  c.waiting_since = c.Owing() ? Steady::now() : Steady::time_point::max();
  return true;
}

}  // namespace jitd::daemon
