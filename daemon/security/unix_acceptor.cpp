#include "security/unix_acceptor.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "jitd/base/local_wire.h"
#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

using text::Cat;

// How often closed connections are noticed (and always before a refusal).
// Not at every wakeup: a sweep costs a stat per open connection, which
// would delay each accept on a daemon with many clients.
constexpr std::chrono::milliseconds kSweepInterval{1000};
// How long accepting pauses when descriptors are out and no reserve is left.
constexpr int kNoFdsPauseMs = 100;

// The server's connection preface (an empty SETTINGS frame) and a GOAWAY
// with ENHANCE_YOUR_CALM and `why` as its debug data: what a gRPC client
// shows as the reason its connection ended.
std::string GoAway(const std::string& why) {
  const std::string debug = why.substr(0, 1024);
  std::string frames;
  frames += std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);  // SETTINGS, no settings
  const size_t length = 8 + debug.size();
  frames += static_cast<char>((length >> 16) & 0xff);
  frames += static_cast<char>((length >> 8) & 0xff);
  frames += static_cast<char>(length & 0xff);
  frames += std::string("\x07\x00\x00\x00\x00\x00", 6);          // GOAWAY, no flags, stream 0
  frames += std::string("\x00\x00\x00\x00\x00\x00\x00\x0b", 8);  // last stream 0, ENHANCE_YOUR_CALM
  frames += debug;
  return frames;
}

void TellAndClose(int fd, const std::string& why) {
  const std::string frames = GoAway(why);
  (void)send(fd, frames.data(), frames.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
}

std::string DescriptorLimit() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return "unknown";
  return std::to_string(limit.rlim_cur);
}

}  // namespace

UnixAcceptor::UnixAcceptor(Options options) : options_(std::move(options)) {}

UnixAcceptor::~UnixAcceptor() { Stop(); }

absl::Status UnixAcceptor::Listen(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string text = path.string();
  if (text.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(Cat("the socket path ", text, " is ", text.size(),
                                          " bytes; a Unix socket path has at most ", sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, text.c_str(), text.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(Cat("cannot listen on unix:", text, ": socket: ", std::strerror(errno)));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(Cat("cannot listen on unix:", text, ": ", std::strerror(err)));
  }
  listen_fds_.push_back(fd);
  return absl::OkStatus();
}

absl::Status UnixAcceptor::Start(std::function<void(int fd)> hand_off,
                                 std::function<void(int fd, bool greeted)> local_hand_off) {
  hand_off_ = std::move(hand_off);
  local_hand_off_ = std::move(local_hand_off);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError(Cat("eventfd: ", std::strerror(errno)));
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void UnixAcceptor::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  for (int fd : listen_fds_) close(fd);
  listen_fds_.clear();
  for (const Undecided& u : undecided_) close(u.fd);
  undecided_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (reserve_fd_ >= 0) close(reserve_fd_);
  wake_fd_ = reserve_fd_ = -1;
}

std::string UnixAcceptor::PeerOf(const std::string& grpc_peer) const {
  if (grpc_peer.rfind("fd:", 0) != 0) return grpc_peer;
  int fd = -1;
  try {
    fd = std::stoi(grpc_peer.substr(3));
  } catch (const std::exception&) {
    return grpc_peer;
  }
  std::lock_guard lock(mu_);
  const auto it = open_.find(fd);
  if (it == open_.end()) return grpc_peer;
  return Cat("uid:", it->second.uid);
}

void UnixAcceptor::Run() {
  std::vector<pollfd> fds;
  int pause_ms = 0;
  auto swept = std::chrono::steady_clock::now();
  while (true) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    for (int fd : listen_fds_) fds.push_back({pause_ms > 0 ? -1 : fd, POLLIN, 0});
    const size_t first_undecided = fds.size();
    const auto now = std::chrono::steady_clock::now();
    const auto until_sweep =
        std::chrono::duration_cast<std::chrono::milliseconds>(swept + kSweepInterval - now).count() + 1;
    int timeout_ms = static_cast<int>(std::clamp<int64_t>(until_sweep, 0, kSweepInterval.count()));
    if (pause_ms > 0) timeout_ms = std::min(timeout_ms, pause_ms);
    for (const Undecided& u : undecided_) {
      fds.push_back({u.fd, POLLIN, 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(u.deadline - now).count() + 1;
      timeout_ms = std::min<int>(timeout_ms, static_cast<int>(std::max<int64_t>(left, 0)));
    }
    const int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("the Unix socket acceptor's poll failed: {}; no new connections are accepted",
                    std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;  // Stop()
    pause_ms = 0;
    const auto after = std::chrono::steady_clock::now();
    if (after - swept >= kSweepInterval) {
      std::lock_guard lock(mu_);
      SweepLocked();
      swept = after;
    }
    // Those that spoke (or ran out of time) go where their bytes say.
    std::vector<Undecided> still;
    for (size_t i = 0; i < undecided_.size(); ++i) {
      const Undecided& u = undecided_[i];
      const bool spoke = ready > 0 && fds[first_undecided + i].revents != 0;
      if (!spoke && u.deadline > after) {
        still.push_back(u);
      } else if (!Route(u.fd, /*silent_goes_to_grpc=*/!spoke || u.deadline <= after)) {
        still.push_back(u);
      }
    }
    undecided_ = std::move(still);
    if (ready <= 0) continue;
    for (size_t i = 1; i < first_undecided; ++i) {
      if (fds[i].revents == 0) continue;
      AcceptReady(fds[i].fd);
      if (out_of_fds_ && reserve_fd_ < 0) pause_ms = kNoFdsPauseMs;
    }
  }
}

void UnixAcceptor::AcceptReady(int listen_fd) {
  for (int i = 0; i < 64; ++i) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) OnNoDescriptors(listen_fd, err);
      return;  // EAGAIN: nothing more waits
    }
    if (out_of_fds_) {
      out_of_fds_ = false;
      spdlog::info("file descriptors are available again: accepting connections");
    }
    if (reserve_fd_ < 0) reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);

    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) cred.uid = static_cast<uid_t>(-1);
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      close(fd);
      continue;
    }
    Refusal refusal;
    {
      std::lock_guard lock(mu_);
      refusal = CheckLocked(cred.uid);
      if (refusal == Refusal::kNone) {
        // A descriptor number gRPC closed and the kernel gave again: the
        // sweep had not seen it go yet.
        if (const auto old = open_.find(fd); old != open_.end()) {
          if (--per_peer_[old->second.uid] == 0) per_peer_.erase(old->second.uid);
          open_.erase(old);
        }
        open_[fd] = Open{st.st_ino, cred.uid};
        ++per_peer_[cred.uid];
      }
    }
    NoteRefusal(refusal, cred.uid);
    if (refusal != Refusal::kNone) {
      TellAndClose(fd, RefusalText(refusal));
      continue;
    }
    if (!Route(fd, /*silent_goes_to_grpc=*/false)) {
      undecided_.push_back({fd, std::chrono::steady_clock::now() + kSniffTimeout});
    }
  }
}

UnixAcceptor::Protocol UnixAcceptor::Sniff(int fd) {
  char first[local_wire::kPreface.size()];
  ssize_t n;
  do {
    n = recv(fd, first, sizeof(first), MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Protocol::kUndecided : Protocol::kGone;
  if (n == 0) return Protocol::kGone;  // hung up without a word
  // A start of the preface is enough: no HTTP/2 client sends one, and the
  // local server reads the rest (or closes the connection) on its own.
  const std::string_view got(first, static_cast<size_t>(n));
  if (got != local_wire::kPreface.substr(0, got.size())) return Protocol::kGrpc;
  return got.size() == local_wire::kPreface.size() ? Protocol::kLocalWhole : Protocol::kLocal;
}

bool UnixAcceptor::Greet(int fd) {
  // Only this thread reads the connection so far: the bytes peeked are
  // there. The answer is 8 bytes into an empty socket buffer, so neither
  // call waits.
  char preface[local_wire::kPreface.size()];
  ssize_t n;
  do {
    n = recv(fd, preface, sizeof(preface), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(preface))) return false;
  do {
    n = send(fd, local_wire::kPreface.data(), local_wire::kPreface.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(local_wire::kPreface.size());
}

bool UnixAcceptor::Route(int fd, bool silent_goes_to_grpc) {
  if (!local_hand_off_) {
    hand_off_(fd);
    return true;
  }
  switch (Sniff(fd)) {
    case Protocol::kLocalWhole:
      if (!Greet(fd)) {
        close(fd);  // the next sweep forgets it
        return true;
      }
      local_hand_off_(fd, /*greeted=*/true);
      return true;
    case Protocol::kLocal:
      local_hand_off_(fd, /*greeted=*/false);
      return true;
    case Protocol::kGone:
      close(fd);  // the next sweep forgets it
      return true;
    case Protocol::kUndecided:
      if (!silent_goes_to_grpc) return false;
      [[fallthrough]];
    case Protocol::kGrpc:
      hand_off_(fd);
      return true;
  }
  return true;
}

void UnixAcceptor::OnNoDescriptors(int listen_fd, int err) {
  if (!out_of_fds_) {
    out_of_fds_ = true;
    std::lock_guard lock(mu_);
    spdlog::warn(
        "out of file descriptors ({}; {} connections open, the limit is {} descriptors): new connections are "
        "closed at once until some are freed",
        std::strerror(err), open_.size(), DescriptorLimit());
  }
  // The waiting client is told and let go, so that the listener does not
  // stay readable with nobody able to take it.
  if (reserve_fd_ < 0) return;
  close(reserve_fd_);
  reserve_fd_ = -1;
  const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    TellAndClose(fd, Cat("jitd is out of file descriptors (limit ", DescriptorLimit(), "); retry shortly"));
  }
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void UnixAcceptor::SweepLocked() {
  for (auto it = open_.begin(); it != open_.end();) {
    struct stat st {};
    if (fstat(it->first, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == it->second.inode) {
      ++it;
      continue;
    }
    if (--per_peer_[it->second.uid] == 0) per_peer_.erase(it->second.uid);
    it = open_.erase(it);
  }
}

UnixAcceptor::Refusal UnixAcceptor::CheckLocked(uid_t uid) {
  auto over = [&] {
    if (options_.max_connections != 0 && open_.size() >= options_.max_connections) return Refusal::kTotal;
    if (options_.max_per_peer != 0) {
      const auto it = per_peer_.find(uid);
      if (it != per_peer_.end() && it->second >= options_.max_per_peer) return Refusal::kPeer;
    }
    return Refusal::kNone;
  };
  if (over() == Refusal::kNone) return Refusal::kNone;
  SweepLocked();  // before refusing: some may have closed since the last sweep
  return over();
}

void UnixAcceptor::NoteRefusal(Refusal refusal, uid_t uid) {
  size_t open = 0;
  {
    std::lock_guard lock(mu_);
    open = open_.size();
  }
  if (refusal == Refusal::kNone) {
    if (over_total_) {
      over_total_ = false;
      spdlog::info("connections: {} open, under --max-connections again: accepting", open);
    }
    if (auto it = over_peer_.find(uid); it != over_peer_.end()) {
      over_peer_.erase(it);
      spdlog::info("connections: uid {} is under its bound again", uid);
    }
    return;
  }
  if (refusal == Refusal::kTotal && !over_total_) {
    over_total_ = true;
    spdlog::warn("connections: {} open, the most {} {} allows: new connections are closed at once", open,
                 options_.max_connections_flag, options_.max_connections);
  }
  if (refusal == Refusal::kPeer && !over_peer_[uid]) {
    over_peer_[uid] = true;
    spdlog::warn("connections: uid {} holds {}, the most {} {} allows: its new connections are closed at once", uid,
                 options_.max_per_peer, options_.max_per_peer_flag, options_.max_per_peer);
  }
}

std::string UnixAcceptor::RefusalText(Refusal refusal) const {
  if (refusal == Refusal::kTotal) {
    return Cat("jitd has ", options_.max_connections, " connections open, the most ", options_.max_connections_flag,
               " allows; retry when some have closed");
  }
  return Cat("this user holds ", options_.max_per_peer, " connections to jitd, the most ", options_.max_per_peer_flag,
             " allows; close some (one channel per process is enough)");
}

}  // namespace jitd::daemon
