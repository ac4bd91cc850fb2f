// LocalServer: the local path, jitd's own framing on its Unix sockets
// (jitd/base/local_wire.h; docs/CONTRACT.md, "The local path").
//
// A same-host client's first request costs a gRPC channel: about 2 ms of
// HTTP/2 setup before the first byte of an answer, where reading and
// verifying the cubin takes 0.07 ms (tests/bench/bench_first_use). The
// local path answers cache hits without it: the UnixAcceptor hands over
// each connection whose first bytes are local_wire::kPreface (answering
// the preface itself when it came whole), and this server answers its
// frames on one thread, waiting on an epoll set that the acceptor adds
// each connection to, each through the same request
// path as GetKernel (so a hit is recorded in every tier and in the metrics
// exactly as over gRPC). Only CACHED_ONLY requests are taken, each with a
// short deadline: a lookup never waits on a compile, so one thread serves
// every connection; the client asks a miss again over gRPC.
//
// What one connection may cost is bounded: a request frame is at most
// kMaxRequestBytes; while an answer is unsent, or a whole request waits
// for its turn, nothing more is read from that connection (one answer and
// one frame plus one read buffered at most); a connection that starts
// a frame (or the preface) and does not finish it, or does not take its
// answer, within frame_timeout is closed, and one that hangs up in the
// middle of either is closed at once. Each connection's bytes go through a
// local_wire::FrameReader, which takes them in whatever pieces they come:
// a connection owing the rest of a preface or a frame costs nothing until
// bytes come (the thread sleeps in epoll_wait), and one with a whole unit
// to take gives one up every turn. How many connections there are is
// the acceptor's to bound (they count against --max-connections).
//
// Thread safety: Start() once; Adopt() from any thread; Stop() once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "jitd/base/local_wire.h"
#include "jitd/v1/compiler.pb.h"

namespace jitd::daemon {

class LocalServer {
 public:
  struct Options {
    // Answers one request for `peer` ("uid:U"); called on the server's
    // thread, so it must be bounded (see CompilerRpc::AnswerLocal).
    std::function<v1::LocalAnswer(const v1::GetKernelRequest&, const std::string& peer)> answer;
    std::chrono::milliseconds frame_timeout{std::chrono::seconds(5)};
  };

  explicit LocalServer(Options options);
  // Stop().
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  absl::Status Start();
  // Takes a connection (non-blocking) and owns it from then on: one whose
  // unread first bytes are the preface, or, `greeted`, one whose preface
  // has been read and answered already (the acceptor does so).
  void Adopt(int fd, bool greeted = false);
  // Closes every connection and joins the thread; a request being answered
  // is answered first. Idempotent.
  void Stop();

  // Connections open now, requests answered so far, and the most bytes of
  // requests one connection has had buffered at once (for tests).
  size_t connections() const { return open_.load(std::memory_order_relaxed); }
  uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }
  size_t peak_input_bytes() const { return peak_input_bytes_.load(std::memory_order_relaxed); }

 private:
  struct Connection;

  void Run();
  // Reads, answers and sends what `revents` allow; false when the
  // connection is to be closed.
  bool Serve(Connection& c, short revents);
  // Whether a whole unit (the preface, a frame) waits to be taken, or
  // bytes that end the connection do: then nothing more is read from it,
  // and its next turn takes one.
  static bool HasUnit(const Connection& c);
  // Rouses the thread from its epoll_wait (Adopt, Stop).
  void Wake();
  // Closes a connection's descriptor, out of the epoll set first.
  void Close(const Connection& c) const;
  // Answers the frame (or the oversized one) c.reader's Next() just took.
  void AnswerOne(Connection& c, local_wire::Unit unit);
  // Sends what the socket takes of c.out; false on a broken connection.
  static bool Send(Connection& c);

  const Options options_;
  int epoll_fd_ = -1;  // the connections, and wake_fd_
  int wake_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> adopted_;  // guarded by mu_; taken by the thread
  bool stopping_ = false;                             // guarded by mu_
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> answered_{0};
  std::atomic<size_t> peak_input_bytes_{0};
};

}  // namespace jitd::daemon
