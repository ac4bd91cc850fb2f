// MetricsHttpServer: the HTTP endpoint Prometheus scrapes, GET /metrics.
//
// Deliberately small: HTTP/1.0 and 1.1, one request per connection
// (`Connection: close` on every response), no TLS, no keep-alive, no
// compression, no request bodies. One thread runs everything: it accepts,
// reads and writes with non-blocking sockets and poll(), so a slow or
// hostile client never holds it up; each client has `client_timeout` to
// send its request head and again to take the response, and is dropped
// after that (a slowloris client that dribbles bytes is dropped at the same
// time as one that sends nothing). Nor can slow clients keep a scrape out by
// taking every place (max_connections): a newcomer takes the place of the
// client that has been sending its request head the longest.
//
// Answers:
//   GET|HEAD /metrics  200, Content-Type "text/plain; version=0.0.4;
//                      charset=utf-8", the body from the render callback
//                      (HEAD: the same headers, no body)
//   GET|HEAD /         200, a one-line HTML page pointing at /metrics
//   other paths        404
//   other methods      405 (with `Allow: GET, HEAD`) on the two paths above
//   malformed request  400 (bad request line or header line, HTTP/1.1
//                      without exactly one Host header); 505 for an HTTP
//                      version other than 1.0 and 1.1
//   head too large     431 when the request line and headers pass
//                      max_request_head_bytes
//   too slow           408 (best effort) and closed, see client_timeout;
//                      also to the oldest unfinished request when its place
//                      goes to a newcomer, see max_connections
//   too many clients   503 and closed when every place is taken by a
//                      response being written or lingering, see
//                      max_connections
//   render throws      500
// A query string is ignored (/metrics?x=1 is /metrics).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"

namespace jitd::metrics {

class MetricsHttpServer {
 public:
  struct Options {
    // HOST:PORT. HOST: an IPv4 literal ("127.0.0.1", "0.0.0.0" for every
    // interface), an IPv6 literal in brackets ("[::1]", "[::]"), or
    // "localhost", which means 127.0.0.1 (no name lookup is ever made).
    // PORT: 0..65535, 0 for any free port (port() says which).
    std::string address;
    // The body of GET /metrics (and what HEAD measures), e.g. a
    // Registry::Render. Called on the server's thread, once per scrape:
    // nothing else is served while it runs. Must not call Stop().
    std::function<std::string()> render;
    // A client has this long from its connection to send its whole request
    // head, and this long again to take the whole response; it is dropped
    // when either runs out.
    std::chrono::milliseconds client_timeout{5000};
    // Connections served at once (reading, writing or closing); at least 1.
    // When every place is taken, a newcomer takes the place of the one that
    // has been sending its request head the longest, which is answered 408
    // and closed as on its timeout (never one accepted together with the
    // newcomer, before the server could read it); only when none is still
    // sending its head is the newcomer answered 503 and closed at once.
    size_t max_connections = 16;
    // The request line and headers, terminating blank line included; more is
    // answered 431.
    size_t max_request_head_bytes = 8192;
  };

  explicit MetricsHttpServer(Options options);
  // Stop().
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds, listens and starts the server's thread; once per object.
  // INVALID_ARGUMENT naming the address when it cannot be parsed or is not
  // on this host; UNAVAILABLE "... address already in use" naming it when
  // something else listens there; PERMISSION_DENIED for a privileged port;
  // FAILED_PRECONDITION when started before or without a render callback.
  absl::Status Start();

  // Closes the listener and every connection (in whatever state) and joins
  // the thread; returns within milliseconds whatever clients do. Idempotent.
  // Start() and Stop() must not run at once from two threads.
  void Stop();

  // After a successful Start(): the bound port (the kernel's pick for port
  // 0) and "HOST:PORT" with it ("127.0.0.1:41237", "[::1]:9464").
  uint16_t port() const { return port_; }
  const std::string& address() const { return bound_address_; }

  // Connections being served now (not counting ones refused with 503).
  size_t connections() const { return connections_.load(std::memory_order_relaxed); }

  // Connections dropped (408) to make room for a newcomer while they were
  // still sending their request head, see max_connections; not counting
  // those dropped when their client_timeout ran out.
  uint64_t slow_clients_dropped() const { return slow_clients_dropped_.load(std::memory_order_relaxed); }

  // The Content-Type of GET /metrics.
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Connection;
  // The poll loop's state and steps (http_server.cpp): Run() runs one.
  class Loop;
  void Run();
  // The response to a complete request head (RequestHeadLength bytes).
  std::string Respond(std::string_view head) const;

  const Options options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd; Stop() writes it
  uint16_t port_ = 0;
  std::string bound_address_;
  bool started_ = false;
  std::thread thread_;
  std::atomic<size_t> connections_{0};
  std::atomic<uint64_t> slow_clients_dropped_{0};
};

}  // namespace jitd::metrics
