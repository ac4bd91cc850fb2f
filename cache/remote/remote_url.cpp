// ParseRemoteUrl: the remote tier's URL forms (remote.h).
#include <charconv>

#include "jitd/base/endpoint.h"
#include "jitd/base/text.h"
#include "remote/remote.h"

namespace jitd::cache {
namespace {

using text::Cat;

bool ParseInt(std::string_view s, int lo, int hi, int* out) {
  if (s.empty()) return false;
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

absl::Status Bad(std::string_view url, std::string_view why) {
  return absl::InvalidArgumentError(
      Cat("'", url, "' is not a remote tier URL: ", why,
          " (redis://[:PASSWORD@]HOST:PORT[/DB], rediss://... for TLS, or unix://PATH[?db=N])"));
}

}  // namespace

std::string RemoteUrl::Redacted() const {
  std::string out;
  if (kind == Kind::kUnix) {
    out = "unix://";
    out += path;
    if (db != 0) text::Append(out, "?db=", db);
    return out;
  }
  out = tls ? "rediss://" : "redis://";
  if (!user.empty() || !password.empty()) {
    out += user;
    if (!password.empty()) out += ":***";
    out += "@";
  }
  out += host.find(':') != std::string::npos ? Cat("[", host, "]") : host;
  text::Append(out, ":", port, "/", db);
  return out;
}

absl::StatusOr<RemoteUrl> ParseRemoteUrl(std::string_view url) {
  RemoteUrl out;
  std::string_view rest;
  if (url.starts_with("unix://")) {
    out.kind = RemoteUrl::Kind::kUnix;
    rest = url.substr(7);
    if (auto q = rest.find('?'); q != std::string_view::npos) {
      std::string_view query = rest.substr(q + 1);
      rest = rest.substr(0, q);
      if (!query.starts_with("db=") || !ParseInt(query.substr(3), 0, 1 << 20, &out.db)) {
        return Bad(url, "the only query is ?db=N");
      }
    }
    if (rest.empty() || rest[0] != '/') return Bad(url, "the socket path must be absolute");
    out.path = std::string(rest);
    return out;
  }
  if (url.starts_with("rediss://")) {
    out.tls = true;
    rest = url.substr(9);
  } else if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else {
    return Bad(url, "unknown scheme");
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      out.password = std::string(userinfo);  // redis://PASSWORD@host, as redis-cli accepts
    } else {
      out.user = std::string(userinfo.substr(0, colon));
      out.password = std::string(userinfo.substr(colon + 1));
    }
  }
  std::string_view hostport = rest;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseInt(db, 0, 1 << 20, &out.db)) return Bad(url, "the database must be a number");
  }
  absl::StatusOr<HostPort> split = SplitHostPort(hostport);
  if (!split.ok()) {
    // The URL's own words for the two mistakes people make most.
    if (hostport.starts_with("[") && hostport.find(']') == std::string_view::npos) {
      return Bad(url, "unclosed '[' in the host");
    }
    if (hostport.find(':') == std::string_view::npos) return Bad(url, "HOST:PORT is required");
    return Bad(url, std::string(split.status().message()));
  }
  out.host = split->host;
  const std::optional<uint32_t> port = ParsePort(split->port, PortUse::kConnect);
  if (!port) return Bad(url, Cat("the port must be ", PortRange(PortUse::kConnect)));
  out.port = static_cast<int>(*port);
  return out;
}

}  // namespace jitd::cache
