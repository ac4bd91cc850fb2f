// LocalServer over socketpairs: the local path's framing and the bounds on
// what one connection may cost (an unfinished frame, an oversized one, a
// client that does not read its answers), with an answer function that
// echoes the request's kernel name. The daemon's own use of it (the real
// request path behind it) is test_daemon_local_path's.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "jitd/base/local_wire.h"
#include "poll_until.h"
#include "process_cpu.h"
#include "rpc/local_server.h"

namespace jitd::daemon {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
namespace wire = local_wire;

// Concatenation by appending (GCC 12's -Wrestrict misreads `a + b` here).
std::string Join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out.append(part);
  return out;
}

std::string Frame(const std::string& payload) {
  std::string out;
  wire::AppendFrame(payload, &out);
  return out;
}

std::string RequestFrame(const std::string& kernel) {
  v1::GetKernelRequest request;
  request.set_kernel(kernel);
  request.set_mode(v1::GetKernelRequest::CACHED_ONLY);
  return Frame(request.SerializeAsString());
}

void SendAll(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    at += static_cast<size_t>(n);
  }
}

// Exactly n bytes, or fewer when the connection closes or 5 s pass.
std::string Receive(int fd, size_t n) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[64 << 10];
    const ssize_t r = recv(fd, buffer, std::min(sizeof(buffer), n - got.size()), 0);
    if (r <= 0) break;
    got.append(buffer, static_cast<size_t>(r));
  }
  return got;
}

v1::LocalAnswer ReceiveAnswer(int fd) {
  const std::string header = Receive(fd, wire::kHeaderBytes);
  v1::LocalAnswer answer;
  if (header.size() != wire::kHeaderBytes) {
    answer.set_code(-1);
    answer.set_message("no answer");
    return answer;
  }
  const std::string payload = Receive(fd, wire::FrameLength(header.data()));
  EXPECT_TRUE(answer.ParseFromString(payload));
  return answer;
}

// True once the daemon side has closed the connection.
bool ClosedWithin(int fd, std::chrono::milliseconds timeout) {
  return testing::PollUntil(
      [&] {
        char c;
        const ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
        return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      },
      timeout);
}

class LocalServerTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds frame_timeout = 5s, size_t answer_bytes = 0) {
    LocalServer::Options options;
    options.frame_timeout = frame_timeout;
    options.answer = [this, answer_bytes](const v1::GetKernelRequest& request, const std::string& peer) {
      ++calls_;
      peer_ = peer;
      v1::LocalAnswer answer;
      answer.mutable_response()->set_key(request.kernel());
      if (answer_bytes > 0) answer.mutable_response()->set_cubin(std::string(answer_bytes, 'c'));
      return answer;
    };
    server_ = std::make_unique<LocalServer>(options);
    ASSERT_TRUE(server_->Start().ok());
  }

  // The client's end of a connection the server adopted; `greeted`: as the
  // acceptor hands one over whose preface it read and answered itself.
  int Connect(bool greeted = false) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
    server_->Adopt(sv[1], greeted);
    client_fds_.push_back(sv[0]);
    return sv[0];
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    for (int fd : client_fds_) close(fd);
  }

  std::unique_ptr<LocalServer> server_;
  std::vector<int> client_fds_;
  std::atomic<int> calls_{0};
  std::string peer_;  // written on the server's thread, read after an answer
};

TEST_F(LocalServerTest, EchoesThePrefaceThenAnswersPipelinedFramesInOrder) {
  Start();
  const int fd = Connect();
  SendAll(fd, Join({wire::kPreface, RequestFrame("k0"), RequestFrame("k1"), RequestFrame("k2")}));
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  for (const std::string kernel : {"k0", "k1", "k2"}) {
    const v1::LocalAnswer answer = ReceiveAnswer(fd);
    EXPECT_EQ(answer.code(), 0) << answer.message();
    EXPECT_EQ(answer.response().key(), kernel);
  }
  EXPECT_EQ(peer_, Join({"uid:", std::to_string(getuid())}));
  EXPECT_EQ(server_->answered(), 3u);
}

TEST_F(LocalServerTest, AGreetedConnectionIsAnsweredWithoutAPrefaceAndHasNoPrefaceDue) {
  Start(/*frame_timeout=*/200ms);
  const int fd = Connect(/*greeted=*/true);
  // Nothing is due from a greeted connection until it starts a frame: idle
  // beyond the frame timeout, it stays open.
  std::this_thread::sleep_for(400ms);
  const auto sent = std::chrono::steady_clock::now();
  SendAll(fd, Join({RequestFrame("k0"), RequestFrame("k1")}));
  for (const std::string kernel : {"k0", "k1"}) {
    const v1::LocalAnswer answer = ReceiveAnswer(fd);
    EXPECT_EQ(answer.code(), 0) << answer.message();
    EXPECT_EQ(answer.response().key(), kernel);
  }
  // Long after the linger that its adoption began, the frame wakes the
  // thread itself: the answer does not wait for an idle turn (a second;
  // the bound leaves a loaded machine most of that).
  EXPECT_LT(std::chrono::steady_clock::now() - sent, 900ms);
  EXPECT_EQ(peer_, Join({"uid:", std::to_string(getuid())}));
  EXPECT_EQ(server_->connections(), 1u);
  // Its preface was the acceptor's to read: one sent now is no frame.
  SendAll(fd, std::string(wire::kPreface));
  EXPECT_EQ(ReceiveAnswer(fd).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(ClosedWithin(fd, 5s));
  EXPECT_EQ(calls_, 2);
}

TEST_F(LocalServerTest, AFrameThatArrivesByteByByteIsAnsweredWhenComplete) {
  Start();
  const int fd = Connect();
  const std::string bytes = Join({wire::kPreface, RequestFrame("slow")});
  for (char c : bytes) SendAll(fd, std::string(1, c));
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  EXPECT_EQ(ReceiveAnswer(fd).response().key(), "slow");
}

// "jitd" is four bytes, a frame header's length: read as one, it named a
// frame of 1.68e9 bytes, and the thread polled the connection without
// reading it until the preface's deadline.
TEST_F(LocalServerTest, APrefaceInPiecesCostsNothingWhileItWaitsAndIsAnsweredWhenWhole) {
  Start();
  const int fd = Connect();
  SendAll(fd, std::string(wire::kPreface.substr(0, 4)));
  std::this_thread::sleep_for(20ms);  // past the thread's brief linger after the bytes
  const double before = testing::ProcessCpuMs();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(testing::ProcessCpuMs() - before, 30.0) << "the local path's thread polls a half preface";
  SendAll(fd, Join({wire::kPreface.substr(4), RequestFrame("k")}));
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  EXPECT_EQ(ReceiveAnswer(fd).response().key(), "k");
}

TEST_F(LocalServerTest, AConnectionThatHangsUpInThePrefaceOrAFrameIsClosedAtOnce) {
  Start(/*frame_timeout=*/60s);
  for (const std::string& bytes : {std::string(wire::kPreface.substr(0, 5)), std::string(wire::kPreface.substr(0, 4)),
                                   Join({wire::kPreface, RequestFrame("cut").substr(0, 6)})}) {
    const int fd = Connect();
    SendAll(fd, bytes);
    shutdown(fd, SHUT_WR);
    // Long before the frame timeout: the hang-up itself closes it.
    EXPECT_TRUE(testing::PollUntil([&] { return server_->connections() == 0; }, 5s)) << bytes.size() << " bytes";
    EXPECT_TRUE(ClosedWithin(fd, 5s));
  }
  EXPECT_EQ(calls_, 0);
}

TEST_F(LocalServerTest, AnythingButThePrefaceIsClosedUnanswered) {
  Start();
  const int fd = Connect();
  SendAll(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  EXPECT_TRUE(ClosedWithin(fd, 5s));
  EXPECT_EQ(calls_, 0);
}

TEST_F(LocalServerTest, AnOversizedFrameIsRefusedWithItsSizeAndTheConnectionClosed) {
  Start();
  const int fd = Connect();
  const uint32_t huge = wire::kMaxRequestBytes + 1;
  const std::string header{static_cast<char>(huge & 0xff), static_cast<char>((huge >> 8) & 0xff),
                           static_cast<char>((huge >> 16) & 0xff), static_cast<char>(huge >> 24)};
  SendAll(fd, Join({wire::kPreface, header}));
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  const v1::LocalAnswer answer = ReceiveAnswer(fd);
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(answer.message(), HasSubstr(std::to_string(huge) + " bytes; the most is "));
  EXPECT_TRUE(ClosedWithin(fd, 5s));
  EXPECT_EQ(calls_, 0);
}

TEST_F(LocalServerTest, AFrameThatIsNotARequestIsRefusedAndTheConnectionClosed) {
  Start();
  const int fd = Connect();
  SendAll(fd, Join({wire::kPreface, Frame("\xff\xff\xff\xff\xff")}));
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  const v1::LocalAnswer answer = ReceiveAnswer(fd);
  EXPECT_EQ(answer.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(answer.message(), HasSubstr("not a GetKernelRequest"));
  EXPECT_TRUE(ClosedWithin(fd, 5s));
}

TEST_F(LocalServerTest, AnUnfinishedFrameIsClosedAfterTheTimeoutWhileAnIdleConnectionStays) {
  Start(/*frame_timeout=*/200ms);
  const int stalled = Connect();
  const int idle = Connect();
  SendAll(idle, Join({wire::kPreface, RequestFrame("first")}));
  EXPECT_EQ(Receive(idle, wire::kPreface.size()), wire::kPreface);
  EXPECT_EQ(ReceiveAnswer(idle).response().key(), "first");
  SendAll(stalled, Join({wire::kPreface, RequestFrame("cut").substr(0, 6)}));
  EXPECT_TRUE(ClosedWithin(stalled, 5s));
  EXPECT_EQ(server_->connections(), 1u);
  // Idle between requests is not unfinished: it is still served.
  std::this_thread::sleep_for(400ms);  // twice the frame timeout, which must not close it
  SendAll(idle, RequestFrame("later"));
  EXPECT_EQ(ReceiveAnswer(idle).response().key(), "later");
}

TEST_F(LocalServerTest, AClientThatDoesNotReadItsAnswersIsNotReadFromEither) {
  // Answers of 1 MiB: far more than a socket buffer, so the first one
  // stays in the server's hands until the client reads.
  Start(/*frame_timeout=*/5s, /*answer_bytes=*/1 << 20);
  const int fd = Connect();
  std::string requests(wire::kPreface);
  for (int i = 0; i < 20; ++i) requests += RequestFrame(Join({"k", std::to_string(i)}));
  SendAll(fd, requests);
  EXPECT_TRUE(testing::PollUntil([&] { return calls_ >= 1; }, 5s));
  std::this_thread::sleep_for(200ms);  // time in which more answers would have been made, were it reading
  EXPECT_EQ(calls_, 1) << "one answer is buffered at most";
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  for (int i = 0; i < 20; ++i) {
    const v1::LocalAnswer answer = ReceiveAnswer(fd);
    ASSERT_EQ(answer.response().key(), Join({"k", std::to_string(i)}));
    ASSERT_EQ(answer.response().cubin().size(), 1u << 20);
  }
  EXPECT_EQ(calls_, 20);
}

TEST_F(LocalServerTest, AFloodOfPipelinedFramesIsAnsweredInOrderWithoutBufferingIt) {
  Start();
  const int fd = Connect();
  constexpr int kFrames = 20000;
  // Empty requests: 4 bytes a frame, 4,000 to a read, 8 answered a turn.
  std::thread flood([&] {
    std::string frames(wire::kPreface);
    for (int i = 0; i < kFrames; ++i) frames += Frame("");
    SendAll(fd, frames);
  });
  EXPECT_EQ(Receive(fd, wire::kPreface.size()), wire::kPreface);
  int in_order = 0;
  for (int i = 0; i < kFrames; ++i) {
    const v1::LocalAnswer answer = ReceiveAnswer(fd);
    if (answer.code() == 0 && answer.response().key().empty()) ++in_order;
  }
  flood.join();
  EXPECT_EQ(in_order, kFrames);
  // One read (16 KiB) at most beyond the frame being answered.
  EXPECT_LE(server_->peak_input_bytes(), size_t{16 << 10} + wire::kPreface.size());
}

TEST_F(LocalServerTest, ManyConnectionsAreAllServedByTurns) {
  Start();
  constexpr int kConnections = 16;
  constexpr int kFrames = 40;
  std::vector<int> fds;
  for (int c = 0; c < kConnections; ++c) {
    fds.push_back(Connect());
    std::string requests(wire::kPreface);
    for (int i = 0; i < kFrames; ++i) requests += RequestFrame(Join({std::to_string(c), "/", std::to_string(i)}));
    SendAll(fds.back(), requests);
  }
  for (int c = 0; c < kConnections; ++c) {
    ASSERT_EQ(Receive(fds[c], wire::kPreface.size()), wire::kPreface);
    for (int i = 0; i < kFrames; ++i) {
      ASSERT_EQ(ReceiveAnswer(fds[c]).response().key(), Join({std::to_string(c), "/", std::to_string(i)}));
    }
  }
  EXPECT_EQ(server_->answered(), static_cast<uint64_t>(kConnections * kFrames));
}

TEST_F(LocalServerTest, AfterAnAnswerTheThreadPollsOnlyBrieflyThenSleeps) {
  Start();
  const int fd = Connect(/*greeted=*/true);
  for (int i = 0; i < 3; ++i) {
    SendAll(fd, RequestFrame("k"));
    ASSERT_EQ(ReceiveAnswer(fd).code(), 0);
  }
  // The thread keeps polling for a fraction of a millisecond after an
  // answer, for the client's next frame; then it sleeps. Spinning on, it
  // would take about all of this window's 300 ms.
  std::this_thread::sleep_for(20ms);
  const double before = testing::ProcessCpuMs();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(testing::ProcessCpuMs() - before, 30.0) << "the local path's thread polls while nothing comes";
  SendAll(fd, RequestFrame("k"));
  EXPECT_EQ(ReceiveAnswer(fd).code(), 0);
}

TEST_F(LocalServerTest, StopClosesEveryConnection) {
  Start();
  const int a = Connect();
  const int b = Connect();
  SendAll(a, std::string(wire::kPreface));
  EXPECT_EQ(Receive(a, wire::kPreface.size()), wire::kPreface);
  server_->Stop();
  EXPECT_TRUE(ClosedWithin(a, 5s));
  EXPECT_TRUE(ClosedWithin(b, 5s));
  EXPECT_EQ(server_->connections(), 0u);
}

}  // namespace
}  // namespace jitd::daemon
