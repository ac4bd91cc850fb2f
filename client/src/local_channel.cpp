#include "src/local_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "jitd/base/local_wire.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::client_detail {
namespace {

using text::Cat;
namespace wire = local_wire;

constexpr size_t kEnhanceYourCalm = 11;  // the HTTP/2 error code of a refusal

using Clock = LocalChannel::Clock;

int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// How long a wait spins before it blocks. A daemon that is awake answers
// in tens of microseconds; blocking lets this core sleep, and waking it
// again costs about as much as the answer. With this spin and the daemon's
// linger (daemon/rpc/local_server.cpp), a fresh process's Connect +
// GetKernelBinary took 0.482 ms p50 on the H200 host, against 0.550 ms
// without either (docs/gpu-runs/2026-12-02-first-use). A client waits on
// the local path once per kernel it fetches, so the spin costs it little.
constexpr std::chrono::microseconds kSpinBeforeBlocking{200};

// Waits for `events` on fd until `deadline`; false when it passed.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (const Clock::time_point spin_end = std::min(deadline, Clock::now() + kSpinBeforeBlocking);
       Clock::now() < spin_end;) {
    const int ready = poll(&p, 1, 0);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
    // The daemon's thread, woken by this client, is often queued on this
    // very core: yielding lets it run instead of waiting out the spin.
    sched_yield();
  }
  while (true) {
    const int ready = poll(&p, 1, MsLeft(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return false;
  }
}

absl::Status SendAll(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd, POLLOUT, deadline)) continue;
    return absl::UnavailableError(n < 0 && errno != EAGAIN ? Cat("send: ", std::strerror(errno)) : "send timed out");
  }
  return absl::OkStatus();
}

// Exactly `size` bytes into `out`.
absl::Status ReceiveExactly(int fd, size_t size, std::string* out, Clock::time_point deadline) {
  out->resize(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = recv(fd, out->data() + got, size - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("the daemon closed the connection");
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd, POLLIN, deadline)) continue;
    return absl::UnavailableError(errno == EAGAIN ? "no answer in time" : Cat("recv: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string GoAwayText(std::string_view frames) {
  // Frames: 3 bytes length, type, flags, 4 bytes stream; GOAWAY is type 7:
  // 4 bytes last stream, 4 bytes error code, then its text. Only the
  // daemon's refusals use ENHANCE_YOUR_CALM (11); gRPC's own GOAWAYs (an
  // older daemon rejecting the local preface) are not refusals.
  const auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(frames[i])); };
  for (size_t at = 0; at + 9 <= frames.size();) {
    const size_t length = (byte(at) << 16) | (byte(at + 1) << 8) | byte(at + 2);
    if (byte(at + 3) == 7 && length >= 8 && at + 9 + length <= frames.size()) {
      const size_t code = (byte(at + 13) << 24) | (byte(at + 14) << 16) | (byte(at + 15) << 8) | byte(at + 16);
      return code == kEnhanceYourCalm ? std::string(frames.substr(at + 17, length - 8)) : "";
    }
    at += 9 + length;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<LocalChannel>> LocalChannel::Open(const std::string& path,
                                                                 std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return absl::InvalidArgumentError(Cat("socket path too long: ", path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(Cat("socket: ", std::strerror(errno)));
  std::unique_ptr<LocalChannel> channel(new LocalChannel(fd));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    // A Unix socket connects at once or not at all; EAGAIN is a full backlog.
    return absl::UnavailableError(Cat("connect to ", path, ": ", std::strerror(errno)));
  }
  // The daemon's preface is not waited for here: that costs a round trip.
  // A send that fails (the daemon refused the connection and closed it)
  // shows when the preface is read, with the daemon's reason.
  (void)SendAll(fd, wire::kPreface, deadline);
  return channel;
}

absl::Status LocalChannel::AwaitPreface(Clock::time_point deadline) {
  if (greeted_) return absl::OkStatus();
  absl::Status got = ReadPreface(deadline);
  if (!got.ok()) NoteRefusal(deadline);
  return got;
}

LocalChannel::~LocalChannel() { close(fd_); }

absl::StatusOr<v1::LocalAnswer> LocalChannel::Ask(const v1::GetKernelRequest& request,
                                                  std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  absl::StatusOr<v1::LocalAnswer> answer = Exchange(request, deadline);
  if (!answer.ok() && !greeted_) NoteRefusal(deadline);
  return answer;
}

absl::Status LocalChannel::ReadPreface(Clock::time_point deadline) {
  std::string preface;
  if (absl::Status got = ReceiveExactly(fd_, wire::kPreface.size(), &preface, deadline); !got.ok()) {
    first_bytes_ = preface;
    return got;
  }
  if (preface != wire::kPreface) {
    first_bytes_ = preface;
    return absl::UnavailableError("the daemon does not speak the local path");
  }
  greeted_ = true;
  return absl::OkStatus();
}

void LocalChannel::NoteRefusal(Clock::time_point deadline) {
  // Whatever the daemon sent instead of its preface: HTTP/2 frames from an
  // older daemon's gRPC, or the GOAWAY of a refusal, which says why.
  std::string got = first_bytes_;
  char buffer[2048];
  while (got.size() < sizeof(buffer) && WaitFor(fd_, POLLIN, deadline)) {
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  refusal_ = GoAwayText(got);
}

absl::StatusOr<v1::LocalAnswer> LocalChannel::Exchange(const v1::GetKernelRequest& request,
                                                       Clock::time_point deadline) {
  std::string frame;
  wire::AppendFrame(request.SerializeAsString(), &frame);
  JITD_RETURN_IF_ERROR(SendAll(fd_, frame, deadline));
  if (!greeted_) {
    JITD_RETURN_IF_ERROR(ReadPreface(deadline));
  }
  std::string header;
  JITD_RETURN_IF_ERROR(ReceiveExactly(fd_, wire::kHeaderBytes, &header, deadline));
  const uint32_t length = wire::FrameLength(header.data());
  if (length > wire::kMaxAnswerBytes) return absl::UnavailableError(Cat("a local-path answer of ", length, " bytes"));
  std::string payload;
  JITD_RETURN_IF_ERROR(ReceiveExactly(fd_, length, &payload, deadline));
  v1::LocalAnswer answer;
  if (!answer.ParseFromString(payload)) return absl::UnavailableError("a local-path answer that does not parse");
  return answer;
}

}  // namespace jitd::client_detail
