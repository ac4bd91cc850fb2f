// A real redis-server for one test: started on loopback (a free TCP port
// and a Unix socket in the test's directory), with no persistence, ready
// once it answers PING; killed, stopped or restarted on the same port at
// the test's command.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "process.h"
#include "remote/redis_connection.h"

namespace jitd::testing {

class RedisServer {
 public:
  struct Options {
    std::string password;  // requirepass
    // TLS on the TCP port (the plain port is then off): PEM files.
    std::filesystem::path tls_cert, tls_key, tls_ca;
    std::vector<std::string> extra_args;
  };

  // Starts redis-server in `dir` (its Unix socket is dir/redis.sock) and
  // waits until it answers. Throws (failing the test) when it cannot.
  explicit RedisServer(std::filesystem::path dir, Options options);
  explicit RedisServer(std::filesystem::path dir) : RedisServer(std::move(dir), Options()) {}
  ~RedisServer();

  int port() const { return port_; }
  // redis://127.0.0.1:PORT/0 (rediss:// with TLS).
  std::string url() const;
  std::string unix_url() const;

  // SIGKILL, and wait for the exit: the store is gone, connections drop.
  void Kill();
  // Starts it again on the same port and socket (empty: no persistence).
  void Restart();
  // SIGSTOP / SIGCONT: a server that accepts but never answers.
  void Pause();
  void Resume();

  // One command on a fresh connection (the test's own view of the store).
  absl::StatusOr<cache::detail::RedisReply> Command(const std::vector<std::string>& argv) const;

 private:
  void Start();
  std::filesystem::path dir_;
  Options options_;
  int port_ = 0;
  int starts_ = 0;
  std::unique_ptr<Process> process_;
};

// Whether redis-server is on PATH (it is installed by deploy/install-deps.sh).
bool HaveRedisServer();

}  // namespace jitd::testing
