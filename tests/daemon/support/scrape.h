// Reading a daemon's Prometheus endpoint (--metrics-listen) as a scraper
// does: a plain HTTP/1.0 GET on a loopback socket.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <regex>
#include <string>

#include "poll_until.h"
#include "test_daemon.h"

namespace jitd::testing {

// The port a daemon started with --metrics-listen 127.0.0.1:0 got, from
// its log line "metrics: serving http://127.0.0.1:PORT/metrics".
inline std::optional<int> MetricsPort(TestDaemon& daemon) {
  static const std::regex kServing(R"(metrics: serving http://127\.0\.0\.1:([0-9]+)/metrics)");
  std::optional<int> port;
  PollUntil(
      [&] {
        std::smatch m;
        const std::string out = daemon.process().Output();
        if (std::regex_search(out, m, kServing)) port = std::atoi(m[1].str().c_str());
        return port.has_value();
      },
      std::chrono::seconds(20));
  return port;
}

// GET `path` from 127.0.0.1:`port`: the whole response (head and body),
// empty when it cannot connect.
inline std::string HttpGet(int port, const std::string& path = "/metrics") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buf[65536];
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 10000) > 0) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return response;
}

// The value of the sample `series` (name with its labels, exactly as
// rendered: jitd_requests_total{outcome="ok",source="memory"}), or nullopt.
inline std::optional<double> Sample(const std::string& exposition, const std::string& series) {
  size_t at = 0;
  while ((at = exposition.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || exposition[at - 1] == '\n') return std::strtod(exposition.c_str() + at + series.size() + 1, nullptr);
    at += series.size();
  }
  return std::nullopt;
}

}  // namespace jitd::testing
