// RedisBackend: RemoteBackend over RESP, with a pool of connections.
#include <deque>
#include <mutex>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "remote/redis_connection.h"
#include "remote/remote.h"

namespace jitd::cache {
namespace {

using detail::RedisConnection;
using detail::RedisReply;
using text::Cat;
using Clock = RedisConnection::Clock;

// Compare-and-expire and compare-and-delete: a lease is touched only by
// its holder, atomically (a plain GET then PEXPIRE could renew a lease
// another daemon took over in between).
constexpr std::string_view kExpireIfEquals =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr std::string_view kDeleteIfEquals =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

class RedisBackend final : public RemoteBackend {
 public:
  RedisBackend(RemoteUrl url, RemoteOptions options) : url_(std::move(url)), options_(std::move(options)) {}

  absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys,
                                                                  Clock::time_point deadline) override {
    std::vector<std::string_view> argv = {"MGET"};
    for (const auto& k : keys) argv.push_back(k);
    JITD_ASSIGN_OR_RETURN(auto reply, Run(argv, deadline));
    if (reply.type != RedisReply::Type::kArray || reply.elements.size() != keys.size()) {
      return Unexpected("MGET", reply);
    }
    std::vector<std::optional<std::string>> out;
    for (auto& e : reply.elements) {
      if (e.type == RedisReply::Type::kString) {
        out.emplace_back(std::move(e.str));
      } else {
        out.emplace_back(std::nullopt);
      }
    }
    return out;
  }

  absl::Status Set(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) override {
    std::string ms = std::to_string(ttl.count());
    std::vector<std::string_view> argv = {"SET", key, value};
    if (ttl.count() > 0) argv.insert(argv.end(), {"PX", ms});
    JITD_ASSIGN_OR_RETURN(auto reply, Run(argv));
    if (reply.type != RedisReply::Type::kStatus) return Unexpected("SET", reply);
    return absl::OkStatus();
  }

  absl::StatusOr<bool> SetIfAbsent(const std::string& key, std::string_view value,
                                   std::chrono::milliseconds ttl) override {
    std::string ms = std::to_string(ttl.count());
    std::vector<std::string_view> argv = {"SET", key, value, "NX"};
    if (ttl.count() > 0) argv.insert(argv.end(), {"PX", ms});
    JITD_ASSIGN_OR_RETURN(auto reply, Run(argv));
    if (reply.type == RedisReply::Type::kStatus) return true;
    if (reply.type == RedisReply::Type::kNil) return false;
    return Unexpected("SET NX", reply);
  }

  absl::StatusOr<bool> ExpireIfEquals(const std::string& key, std::string_view value,
                                      std::chrono::milliseconds ttl) override {
    std::string ms = std::to_string(ttl.count());
    return Script(kExpireIfEquals, key, {value, ms});
  }

  absl::StatusOr<bool> DeleteIfEquals(const std::string& key, std::string_view value) override {
    return Script(kDeleteIfEquals, key, {value});
  }

  absl::Status Delete(const std::string& key) override {
    JITD_ASSIGN_OR_RETURN(auto reply, Run({"DEL", key}));
    if (reply.type != RedisReply::Type::kInteger) return Unexpected("DEL", reply);
    return absl::OkStatus();
  }

  std::string Describe() const override { return url_.Redacted(); }

 private:
  absl::StatusOr<bool> Script(std::string_view script, const std::string& key, std::vector<std::string_view> args) {
    std::vector<std::string_view> argv = {"EVAL", script, "1", key};
    argv.insert(argv.end(), args.begin(), args.end());
    JITD_ASSIGN_OR_RETURN(auto reply, Run(argv));
    if (reply.type != RedisReply::Type::kInteger) return Unexpected("EVAL", reply);
    return reply.integer != 0;
  }

  // A Redis error reply as a status: OOM (maxmemory with noeviction) is a
  // full store, NOAUTH a missing password, the rest the server's words.
  absl::Status Unexpected(std::string_view command, const RedisReply& reply) const {
    if (reply.type == RedisReply::Type::kError) {
      if (reply.str.starts_with("OOM")) {
        return absl::ResourceExhaustedError(Cat(url_.Redacted(), " is full (", command, "): ", reply.str));
      }
      if (reply.str.starts_with("NOAUTH") || reply.str.starts_with("WRONGPASS")) {
        return absl::UnauthenticatedError(Cat(url_.Redacted(), " refused ", command, ": ", reply.str));
      }
      return absl::InternalError(Cat(url_.Redacted(), " refused ", command, ": ", reply.str));
    }
    return absl::InternalError(Cat(url_.Redacted(), " answered ", command, " with an unexpected reply"));
  }

  // One command on a pooled connection; a connection that failed is
  // dropped, so the next call starts from a fresh one. An idle connection
  // may have died with a server restart since its last use: when a reused
  // one fails to reach the server, the command is sent once more on a new
  // connection (every command jitd sends may be repeated safely; a lease
  // whose SET NX is repeated is recognised by its owner, see RemoteTier).
  // The whole call, connecting and the repeat included, ends by
  // connect_timeout + io_timeout (or `deadline`, if sooner).
  absl::StatusOr<RedisReply> Run(const std::vector<std::string_view>& argv,
                                 Clock::time_point deadline = Clock::time_point::max()) {
    deadline = std::min(deadline, Clock::now() + options_.connect_timeout + options_.io_timeout);
    std::unique_ptr<RedisConnection> conn;
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    const bool reused = conn != nullptr;
    auto reply = RunOn(conn, argv, deadline);
    if (reused && !reply.ok() && absl::IsUnavailable(reply.status()) && Clock::now() < deadline) {
      conn.reset();
      reply = RunOn(conn, argv, deadline);
    }
    if (conn != nullptr && !conn->broken()) {
      std::lock_guard lock(mu_);
      if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(conn));
    }
    return reply;
  }

  absl::StatusOr<RedisReply> RunOn(std::unique_ptr<RedisConnection>& conn, const std::vector<std::string_view>& argv,
                                   Clock::time_point deadline) {
    if (conn == nullptr) {
      JITD_ASSIGN_OR_RETURN(auto opened, RedisConnection::Open(url_, options_, deadline));
      conn = std::move(opened);
    }
    return conn->Command(argv, std::min(deadline, Clock::now() + options_.io_timeout));
  }

  const RemoteUrl url_;
  const RemoteOptions options_;
  std::mutex mu_;
  std::deque<std::unique_ptr<RedisConnection>> idle_;  // under mu_
};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteBackend>> OpenRedisBackend(const RemoteUrl& url, const RemoteOptions& options) {
  if (!options.tls_cert.empty() && options.tls_key.empty()) {
    return absl::InvalidArgumentError("the remote tier's TLS client certificate needs its key too");
  }
  if ((!options.tls_ca.empty() || !options.tls_cert.empty()) && !url.tls) {
    return absl::InvalidArgumentError(
        Cat("TLS files are given for ", url.Redacted(), ", which is not a TLS URL: use rediss://"));
  }
  return std::unique_ptr<RemoteBackend>(new RedisBackend(url, options));
}

}  // namespace jitd::cache
