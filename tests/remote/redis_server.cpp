#include "redis_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "poll_until.h"
#include "remote/remote.h"

namespace jitd::testing {
namespace {

// A port the kernel just handed out and released: free unless another
// process takes it in the next milliseconds (Start retries if so).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

bool HaveRedisServer() { return ::access("/usr/bin/redis-server", X_OK) == 0; }

RedisServer::RedisServer(std::filesystem::path dir, Options options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  std::filesystem::create_directories(dir_);
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = FreePort();
    try {
      Start();
      return;
    } catch (const std::exception&) {
      if (attempt == 2) throw;
    }
  }
}

RedisServer::~RedisServer() {
  if (process_ != nullptr) {
    process_->Signal(SIGCONT);
    process_->Signal(SIGKILL);
    process_->WaitForExit(std::chrono::seconds(10));
  }
}

std::string RedisServer::url() const {
  std::string out = options_.tls_cert.empty() ? "redis://" : "rediss://";
  out += "127.0.0.1:" + std::to_string(port_) + "/0";
  return out;
}

std::string RedisServer::unix_url() const { return "unix://" + (dir_ / "redis.sock").string(); }

void RedisServer::Start() {
  std::string port = std::to_string(port_);
  std::vector<std::string> argv = {"/usr/bin/redis-server",
                                   "--bind",
                                   "127.0.0.1",
                                   "--unixsocket",
                                   (dir_ / "redis.sock").string(),
                                   "--unixsocketperm",
                                   "700",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir_.string(),
                                   "--protected-mode",
                                   "no",
                                   "--daemonize",
                                   "no"};
  if (options_.tls_cert.empty()) {
    argv.insert(argv.end(), {"--port", port});
  } else {
    argv.insert(argv.end(), {"--port", "0", "--tls-port", port, "--tls-cert-file", options_.tls_cert.string(),
                             "--tls-key-file", options_.tls_key.string(), "--tls-ca-cert-file",
                             options_.tls_ca.string(), "--tls-auth-clients", "no"});
  }
  if (!options_.password.empty()) argv.insert(argv.end(), {"--requirepass", options_.password});
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::string log = "redis-" + std::to_string(++starts_) + ".log";
  process_ = std::make_unique<Process>(argv, dir_ / log);
  // Ready: the Unix socket answers PING (with the password if there is one).
  bool ready = PollUntil(
      [&] {
        if (process_->Exited()) return true;
        auto reply = Command({"PING"});
        return reply.ok() && reply->type == cache::detail::RedisReply::Type::kStatus;
      },
      std::chrono::seconds(20));
  if (!ready || process_->Exited()) {
    std::string out = process_->Output();
    process_.reset();
    throw std::runtime_error("redis-server did not start: " + out);
  }
}

void RedisServer::Kill() {
  process_->Signal(SIGCONT);
  process_->Signal(SIGKILL);
  process_->WaitForExit(std::chrono::seconds(10));
  process_.reset();
}

void RedisServer::Restart() {
  if (process_ != nullptr) Kill();
  std::filesystem::remove(dir_ / "redis.sock");
  Start();
}

void RedisServer::Pause() { process_->Signal(SIGSTOP); }
void RedisServer::Resume() { process_->Signal(SIGCONT); }

absl::StatusOr<cache::detail::RedisReply> RedisServer::Command(const std::vector<std::string>& argv) const {
  auto url = cache::ParseRemoteUrl(unix_url());
  if (!url.ok()) return url.status();
  cache::RemoteOptions options;
  if (!options_.password.empty()) options.password = options_.password;
  auto conn = cache::detail::RedisConnection::Open(*url, options);
  if (!conn.ok()) return conn.status();
  std::vector<std::string_view> views(argv.begin(), argv.end());
  return (*conn)->Command(views, cache::detail::RedisConnection::Clock::now() + std::chrono::seconds(5));
}

}  // namespace jitd::testing
