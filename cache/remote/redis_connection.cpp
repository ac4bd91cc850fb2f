#include "remote/redis_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::cache::detail {
namespace {

using text::Cat;
using Clock = RedisConnection::Clock;

int MillisLeft(Clock::time_point deadline) {
  // Rounded up: poll() must not wake before the deadline and report it passed.
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>((left + 999) / 1000, 1 << 30));
}

std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  if (code == 0) return "no OpenSSL error queued";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status WaitFor(int fd, short events, Clock::time_point deadline, const std::string& what) {
  while (true) {
    int left = MillisLeft(deadline);
    if (left == 0) return absl::DeadlineExceededError(Cat(what, ": no answer in time"));
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, left);
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return absl::UnavailableError(Cat(what, ": poll: ", std::strerror(errno)));
  }
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

struct RedisConnection::Impl {
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  redisReader* reader = nullptr;
  std::string name;  // the server, for messages
  size_t max_reply_bytes = 0;
  size_t fed = 0;  // bytes of the current reply so far

  ~Impl() {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
    if (reader != nullptr) redisReaderFree(reader);
  }

  absl::Status Connect(const RemoteUrl& url, Clock::time_point deadline) {
    if (url.kind == RemoteUrl::Kind::kUnix) {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      if (url.path.size() >= sizeof(addr.sun_path)) {
        return absl::InvalidArgumentError(Cat(name, ": socket path is too long"));
      }
      std::memcpy(addr.sun_path, url.path.data(), url.path.size());
      fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) return absl::UnavailableError(Cat(name, ": socket: ", std::strerror(errno)));
      return FinishConnect(reinterpret_cast<sockaddr*>(&addr), sizeof(addr), deadline);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    std::string port = std::to_string(url.port);
    if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return absl::UnavailableError(Cat(name, ": cannot resolve ", url.host, ": ", gai_strerror(rc)));
    }
    absl::Status last = absl::UnavailableError(Cat(name, ": no address"));
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last = absl::UnavailableError(Cat(name, ": socket: ", std::strerror(errno)));
        continue;
      }
      last = FinishConnect(a->ai_addr, a->ai_addrlen, deadline);
      if (last.ok()) break;
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(found);
    JITD_RETURN_IF_ERROR(last);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return absl::OkStatus();
  }

  absl::Status FinishConnect(const sockaddr* addr, socklen_t len, Clock::time_point deadline) {
    if (::connect(fd, addr, len) == 0) return absl::OkStatus();
    // On a Unix socket EAGAIN means the server's backlog is full, not a
    // connect in progress: a failure like a refusal.
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(Cat(name, ": connect: ", std::strerror(errno)));
    }
    JITD_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, Cat(name, ": connect")));
    int err = 0;
    socklen_t err_len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) return absl::UnavailableError(Cat(name, ": connect: ", std::strerror(err)));
    return absl::OkStatus();
  }

  absl::Status StartTls(const RemoteUrl& url, const RemoteOptions& options, Clock::time_point deadline) {
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == nullptr) return absl::InternalError(Cat(name, ": TLS: ", OpenSslError()));
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    int loaded = options.tls_ca.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                        : SSL_CTX_load_verify_locations(ctx, options.tls_ca.c_str(), nullptr);
    if (loaded != 1) {
      return absl::FailedPreconditionError(Cat(name, ": cannot load the CA bundle ",
                                               options.tls_ca.empty() ? "(system default)" : options.tls_ca.string(),
                                               ": ", OpenSslError()));
    }
    if (!options.tls_cert.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx, options.tls_cert.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(ctx, options.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
        return absl::FailedPreconditionError(Cat(name, ": cannot load the client certificate ",
                                                 options.tls_cert.string(), " / ", options.tls_key.string(), ": ",
                                                 OpenSslError()));
      }
    }
    ssl = SSL_new(ctx);
    if (ssl == nullptr) return absl::InternalError(Cat(name, ": TLS: ", OpenSslError()));
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_set_fd(ssl, fd);
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(url.host.c_str()));
    // The certificate must name the host we dialled (name or IP address).
    in6_addr ip6;
    in_addr ip4;
    bool is_ip =
        ::inet_pton(AF_INET, url.host.c_str(), &ip4) == 1 || ::inet_pton(AF_INET6, url.host.c_str(), &ip6) == 1;
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str());
    } else {
      SSL_set1_host(ssl, url.host.c_str());
    }
    while (true) {
      ERR_clear_error();  // SSL_get_error reads the queue: no stale entries
      int rc = SSL_connect(ssl);
      if (rc == 1) return absl::OkStatus();
      int err = SSL_get_error(ssl, rc);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        JITD_RETURN_IF_ERROR(
            WaitFor(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, Cat(name, ": TLS handshake")));
        continue;
      }
      long verify = SSL_get_verify_result(ssl);
      if (verify != X509_V_OK) {
        return absl::UnavailableError(
            Cat(name, ": TLS: the server's certificate is not trusted: ", X509_verify_cert_error_string(verify)));
      }
      return absl::UnavailableError(Cat(name, ": TLS handshake failed: ", OpenSslError()));
    }
  }

  absl::Status WriteAll(std::string_view bytes, Clock::time_point deadline) {
    size_t done = 0;
    while (done < bytes.size()) {
      if (ssl != nullptr) {
        ERR_clear_error();
        int n = SSL_write(ssl, bytes.data() + done, static_cast<int>(std::min<size_t>(bytes.size() - done, 1 << 30)));
        if (n > 0) {
          done += static_cast<size_t>(n);
          continue;
        }
        int err = SSL_get_error(ssl, n);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
          return absl::UnavailableError(Cat(name, ": TLS write: ", OpenSslError()));
        }
        JITD_RETURN_IF_ERROR(WaitFor(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, name));
        continue;
      }
      ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        JITD_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, name));
      } else if (n < 0 && errno != EINTR) {
        return absl::UnavailableError(Cat(name, ": send: ", std::strerror(errno)));
      }
    }
    return absl::OkStatus();
  }

  // Reads what is available into the reader; waits when nothing is.
  absl::Status ReadSome(Clock::time_point deadline) {
    char buf[64 * 1024];
    while (true) {
      if (ssl != nullptr) {
        ERR_clear_error();
        int n = SSL_read(ssl, buf, sizeof(buf));
        if (n > 0) return Feed(buf, static_cast<size_t>(n));
        int err = SSL_get_error(ssl, n);
        if (err == SSL_ERROR_ZERO_RETURN)
          return absl::UnavailableError(Cat(name, ": the server closed the connection"));
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
          return absl::UnavailableError(Cat(name, ": TLS read: ", OpenSslError()));
        }
        JITD_RETURN_IF_ERROR(WaitFor(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, name));
        continue;
      }
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) return Feed(buf, static_cast<size_t>(n));
      if (n == 0) return absl::UnavailableError(Cat(name, ": the server closed the connection"));
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        JITD_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, name));
      } else if (errno != EINTR) {
        return absl::UnavailableError(Cat(name, ": recv: ", std::strerror(errno)));
      }
    }
  }

  absl::Status Feed(const char* data, size_t len) {
    fed += len;
    if (fed > max_reply_bytes) {
      return absl::ResourceExhaustedError(
          Cat(name, ": the reply is larger than ", max_reply_bytes, " bytes (RemoteOptions::max_reply_bytes)"));
    }
    if (redisReaderFeed(reader, data, len) != REDIS_OK) {
      return absl::InternalError(Cat(name, ": cannot parse the reply: ", reader->errstr));
    }
    return absl::OkStatus();
  }
};

RedisConnection::RedisConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisConnection::~RedisConnection() = default;

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(const RemoteUrl& url,
                                                                       const RemoteOptions& options,
                                                                       Clock::time_point deadline) {
  deadline = std::min(deadline, Clock::now() + options.connect_timeout);
  auto impl = std::make_unique<Impl>();
  impl->name = url.Redacted();
  impl->max_reply_bytes = options.max_reply_bytes;
  impl->reader = redisReaderCreate();
  if (impl->reader == nullptr) return absl::ResourceExhaustedError("out of memory for a Redis reader");
  // The reader keeps its default maxbuf: it frees a large buffer once a
  // reply is consumed, so an idle pooled connection does not pin the
  // memory of the largest cubin it ever carried.
  JITD_RETURN_IF_ERROR(impl->Connect(url, deadline));
  if (url.tls) {
    JITD_RETURN_IF_ERROR(impl->StartTls(url, options, deadline));
  }
  std::unique_ptr<RedisConnection> conn(new RedisConnection(std::move(impl)));
  const std::string& password = options.password ? *options.password : url.password;
  if (!password.empty()) {
    std::vector<std::string_view> argv = {"AUTH"};
    if (!url.user.empty()) argv.push_back(url.user);
    argv.push_back(password);
    JITD_ASSIGN_OR_RETURN(auto reply, conn->Command(argv, deadline));
    if (reply.type == RedisReply::Type::kError) {
      return absl::UnauthenticatedError(Cat(url.Redacted(), ": AUTH refused: ", reply.str));
    }
  }
  if (url.db != 0) {
    std::string db = std::to_string(url.db);
    JITD_ASSIGN_OR_RETURN(auto reply, conn->Command({"SELECT", db}, deadline));
    if (reply.type == RedisReply::Type::kError) {
      std::string what = reply.str;
      if (what.starts_with("NOAUTH")) {
        return absl::UnauthenticatedError(
            Cat(url.Redacted(), ": the server requires a password (--remote-password-file)"));
      }
      return absl::InvalidArgumentError(Cat(url.Redacted(), ": SELECT ", db, " refused: ", what));
    }
  }
  return conn;
}

absl::StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string_view>& argv,
                                                    Clock::time_point deadline) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (auto a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* formatted = nullptr;
  int len = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (len < 0) return absl::ResourceExhaustedError("out of memory formatting a Redis command");
  impl_->fed = 0;
  absl::Status sent = impl_->WriteAll(std::string_view(formatted, static_cast<size_t>(len)), deadline);
  redisFreeCommand(formatted);
  if (!sent.ok()) {
    broken_ = true;
    return sent;
  }
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(impl_->reader, &raw) != REDIS_OK) {
      broken_ = true;
      return absl::InternalError(Cat(impl_->name, ": cannot parse the reply: ", impl_->reader->errstr));
    }
    if (raw != nullptr) {
      auto* reply = static_cast<redisReply*>(raw);
      RedisReply out = Convert(reply);
      freeReplyObject(reply);
      return out;
    }
    if (absl::Status read = impl_->ReadSome(deadline); !read.ok()) {
      broken_ = true;
      return read;
    }
  }
}

}  // namespace jitd::cache::detail
