// One connection to a Redis server: RESP commands with a deadline each.
//
// The socket is ours (non-blocking, poll with the time left), so that a
// server that stops answering costs exactly the deadline, over TCP, TLS
// (OpenSSL) or a Unix socket alike; hiredis is used only for the protocol:
// formatting commands and parsing replies.
//
// Not thread-safe: one caller at a time (RedisBackend's pool hands each
// connection to one caller). After any error the connection is broken and
// must be dropped: a reply may be half read.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "remote/remote.h"

namespace jitd::cache::detail {

// A reply, copied out of hiredis's reply object.
struct RedisReply {
  enum class Type { kString, kArray, kInteger, kNil, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

class RedisConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects, and AUTH / SELECT as the URL and options say, within
  // options.connect_timeout and before `deadline`. (Resolving a host name
  // is the one step without a deadline: getaddrinfo has none.)
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(const RemoteUrl& url, const RemoteOptions& options,
                                                               Clock::time_point deadline = Clock::time_point::max());
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command and reads its reply, both before `deadline`. A Redis
  // error reply is returned as a reply (type kError), not as a status.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string_view>& argv, Clock::time_point deadline);

  bool broken() const { return broken_; }

  struct Impl;

 private:
  explicit RedisConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  bool broken_ = false;
};

}  // namespace jitd::cache::detail
