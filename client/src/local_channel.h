// LocalChannel: the client's end of the local path (docs/CONTRACT.md, "The
// local path"; the framing in jitd/base/local_wire.h).
//
// A same-host client asks the daemon for a cached kernel over its Unix
// socket without gRPC: one connect, the 8-byte preface each way, then one
// frame out and one back per request. A first request costs a fraction of a
// millisecond this way instead of the 2 ms a gRPC channel takes to set up;
// everything else (misses, compiles, admin calls) stays on gRPC.
//
// Thread safety: none; Client::Impl holds it under a mutex.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "jitd/v1/compiler.pb.h"

namespace jitd::client_detail {

class LocalChannel {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to the socket at `path` and sends the preface, within
  // `timeout`; UNAVAILABLE when nothing accepts there. The daemon's preface
  // is read by AwaitPreface(), or else with the first answer, so that
  // opening costs no round trip.
  static absl::StatusOr<std::unique_ptr<LocalChannel>> Open(const std::string& path, std::chrono::milliseconds timeout);

  // Reads the daemon's preface by `deadline` (what proves that the daemon
  // took the connection): UNAVAILABLE when the connection broke, nothing
  // came in time, or what answers does not speak the local path, with
  // refusal() the daemon's reason when it refused the connection (a bound).
  // Between Open() and this the caller may do other work: the daemon
  // answers meanwhile.
  absl::Status AwaitPreface(Clock::time_point deadline);

  ~LocalChannel();
  LocalChannel(const LocalChannel&) = delete;
  LocalChannel& operator=(const LocalChannel&) = delete;

  // One request and its answer within `timeout`. UNAVAILABLE when the
  // connection broke, the answer did not come in time, or what answers does
  // not speak the local path (a jitd before it; a refusal at the connection
  // bound, which gRPC then reports): the channel is then unusable (the
  // caller drops it).
  absl::StatusOr<v1::LocalAnswer> Ask(const v1::GetKernelRequest& request, std::chrono::milliseconds timeout);

  // After a failed Ask() or AwaitPreface(): the text of the GOAWAY the
  // daemon sent instead of its preface (a refusal at a connection bound);
  // "" for other failures.
  const std::string& refusal() const { return refusal_; }

 private:
  explicit LocalChannel(int fd) : fd_(fd) {}
  absl::StatusOr<v1::LocalAnswer> Exchange(const v1::GetKernelRequest& request, Clock::time_point deadline);
  absl::Status ReadPreface(Clock::time_point deadline);
  // After a failure before the preface: refusal_ from what the daemon sent.
  void NoteRefusal(Clock::time_point deadline);

  int fd_;
  bool greeted_ = false;     // the daemon's preface has been read
  std::string first_bytes_;  // what came instead of it
  std::string refusal_;
};

// The debug text of the first HTTP/2 GOAWAY frame in `frames` when it is
// a refusal (ENHANCE_YOUR_CALM), which is how the daemon says why it closes
// a connection at once (unix_acceptor.h); "" otherwise.
std::string GoAwayText(std::string_view frames);

}  // namespace jitd::client_detail
