// MetricsHttpServer on real loopback sockets, driven by a raw-socket client:
// the answers, the limits (head size, connections, slow clients) and a
// prompt Stop() whatever clients do.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "metrics/http_server.h"
#include "metrics/metrics.h"

namespace jitd::metrics {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// a + b, written so that GCC 12 sees no -Wrestrict case in it.
std::string Join(std::string_view a, std::string_view b) {
  std::string s(a);
  s += b;
  return s;
}

// A connected client socket, closed on destruction. `receive_buffer`, when
// not 0, is its SO_RCVBUF (set before it connects, so that it bounds the
// window): a client that does not read then holds the server up in writing.
class Client {
 public:
  explicit Client(uint16_t port, int family = AF_INET, int receive_buffer = 0) {
    fd_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    if (receive_buffer != 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    int rc;
    if (family == AF_INET6) {
      sockaddr_in6 addr{};
      addr.sin6_family = AF_INET6;
      addr.sin6_port = htons(port);
      addr.sin6_addr = in6addr_loopback;
      rc = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    } else {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(port);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      rc = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    }
    if (rc != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Waits (poll) until the socket is readable or the deadline passes.
  bool WaitReadable(Clock::time_point deadline) {
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left < 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int rc = poll(&p, 1, static_cast<int>(left));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
    }
  }

  // Everything the server sends until it closes the connection; `closed`
  // says whether it did (EOF or reset) before the deadline.
  std::string ReadAll(milliseconds within, bool* closed = nullptr) {
    const Clock::time_point deadline = Clock::now() + within;
    std::string out;
    char buf[65536];
    while (WaitReadable(deadline)) {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (closed != nullptr) *closed = true;
      return out;
    }
    if (closed != nullptr) *closed = false;
    return out;
  }

 private:
  int fd_ = -1;
};

struct Reply {
  bool closed = false;  // the server closed the connection after it
  int status = 0;
  std::string status_line;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string raw;
};

Reply Parse(std::string raw, bool closed) {
  Reply r;
  r.raw = raw;
  r.closed = closed;
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  r.body = raw.substr(end + 4);
  const std::string head = raw.substr(0, end);
  size_t pos = head.find("\r\n");
  r.status_line = head.substr(0, pos);
  if (r.status_line.size() >= 12 && r.status_line.compare(0, 9, "HTTP/1.1 ") == 0) {
    r.status = std::stoi(r.status_line.substr(9, 3));
  }
  while (pos != std::string::npos) {
    const size_t start = pos + 2;
    pos = head.find("\r\n", start);
    const std::string line = head.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(colon + 2);
  }
  return r;
}

// Connects, sends `request` whole and reads the reply until the server
// closes the connection.
Reply Exchange(uint16_t port, const std::string& request, int family = AF_INET) {
  Client client(port, family);
  EXPECT_TRUE(client.connected());
  EXPECT_TRUE(client.Send(request));
  bool closed = false;
  std::string raw = client.ReadAll(milliseconds(5000), &closed);
  return Parse(std::move(raw), closed);
}

std::string Get(const std::string& path, const std::string& method = "GET") {
  std::string request = method;
  request += " ";
  request += path;
  request += " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n";
  return request;
}

// Polls `done` until it holds or `within` passes: waits for a state of the
// server's thread that no socket event reports (how many it serves).
template <typename F>
bool WaitFor(F done, milliseconds within = milliseconds(5000)) {
  const Clock::time_point deadline = Clock::now() + within;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

constexpr const char* kBody = "# HELP up Up.\n# TYPE up gauge\nup 1\n";

MetricsHttpServer::Options Opts(std::string address = "127.0.0.1:0") {
  MetricsHttpServer::Options o;
  o.address = std::move(address);
  o.render = [] { return std::string(kBody); };
  o.client_timeout = milliseconds(5000);
  return o;
}

std::unique_ptr<MetricsHttpServer> Started(MetricsHttpServer::Options options) {
  auto server = std::make_unique<MetricsHttpServer>(std::move(options));
  const absl::Status s = server->Start();
  EXPECT_TRUE(s.ok()) << s;
  return server;
}

TEST(MetricsHttpServer, GetMetricsServesTheRenderedBodyWithTheExpositionContentType) {
  auto server = Started(Opts());
  const Reply r = Exchange(server->port(), Get("/metrics"));
  EXPECT_EQ(r.status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(std::string(kBody).size()));
  EXPECT_EQ(r.headers.at("connection"), "close");
  EXPECT_EQ(r.body, kBody);
  EXPECT_TRUE(r.closed);
}

TEST(MetricsHttpServer, ServesARegistryAsItIsAtEachScrape) {
  Registry registry;
  auto family = registry.AddCounter("jitd_requests_total", "Requests.", {"outcome", "source"});
  ASSERT_TRUE(family.ok());
  Counter& ok = (*family)->WithLabels({"ok", "memory"});
  MetricsHttpServer::Options o = Opts();
  o.render = [&registry] { return registry.Render(); };
  auto server = Started(std::move(o));
  ok.Increment(2);
  EXPECT_NE(
      Exchange(server->port(), Get("/metrics")).body.find("jitd_requests_total{outcome=\"ok\",source=\"memory\"} 2\n"),
      std::string::npos);
  ok.Increment();
  const Reply r = Exchange(server->port(), Get("/metrics"));
  EXPECT_EQ(r.body, registry.Render());
  EXPECT_NE(r.body.find("source=\"memory\"} 3\n"), std::string::npos);
}

TEST(MetricsHttpServer, Http10WithoutHostAndQueryStringsAndBareLineFeeds) {
  auto server = Started(Opts());
  Reply r = Exchange(server->port(), "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, kBody);
  EXPECT_EQ(r.headers.at("connection"), "close");
  r = Exchange(server->port(), Get("/metrics?name[]=up"));
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, kBody);
  r = Exchange(server->port(), "GET /metrics HTTP/1.1\nHost: x\n\n");
  EXPECT_EQ(r.status, 200) << r.raw;
}

TEST(MetricsHttpServer, HeadHasTheHeadersOfGetAndNoBody) {
  auto server = Started(Opts());
  const Reply r = Exchange(server->port(), Get("/metrics", "HEAD"));
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.headers.at("content-type"), MetricsHttpServer::kContentType);
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(std::string(kBody).size()));
  EXPECT_EQ(r.body, "");
  EXPECT_TRUE(r.closed);
}

TEST(MetricsHttpServer, RootPointsAtMetrics) {
  auto server = Started(Opts());
  const Reply r = Exchange(server->port(), Get("/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("href=\"/metrics\""), std::string::npos) << r.body;
  EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 1);
}

TEST(MetricsHttpServer, OtherPathsAre404) {
  int renders = 0;
  MetricsHttpServer::Options o = Opts();
  o.render = [&renders] {
    ++renders;
    return std::string(kBody);
  };
  auto server = Started(std::move(o));
  for (const char* path : {"/metric", "/metrics/", "/favicon.ico", "/metricsx"}) {
    const Reply r = Exchange(server->port(), Get(path));
    EXPECT_EQ(r.status_line, "HTTP/1.1 404 Not Found") << path;
    EXPECT_EQ(r.headers.at("connection"), "close");
    EXPECT_TRUE(r.closed);
  }
  EXPECT_EQ(Exchange(server->port(), Get("/nothing", "HEAD")).body, "");
  EXPECT_EQ(renders, 0);
}

TEST(MetricsHttpServer, OtherMethodsAre405WithAllow) {
  auto server = Started(Opts());
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "get"}) {
    const Reply r = Exchange(server->port(), Get("/metrics", method));
    EXPECT_EQ(r.status_line, "HTTP/1.1 405 Method Not Allowed") << method;
    EXPECT_EQ(r.headers.at("allow"), "GET, HEAD") << method;
  }
  // A POST with a body: the unread body does not destroy the answer.
  const Reply r = Exchange(server->port(), Join("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n",
                                                std::string(70000, 'b')));
  EXPECT_EQ(r.status, 405) << r.raw.substr(0, 200);
  EXPECT_TRUE(r.closed);
}

constexpr char kNulInValue[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nA: b\0c\r\n\r\n";

TEST(MetricsHttpServer, MalformedRequestsAre400) {
  auto server = Started(Opts());
  const std::vector<std::string> bad = {
      "HELLO\r\n\r\n",
      "GET /metrics\r\n\r\n",
      "GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /metrics HTTP/1.1 extra\r\nHost: x\r\n\r\n",
      "GET metrics HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /metrics FTP/1.1\r\nHost: x\r\n\r\n",
      "G(T /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /metrics HTTP/1.1\r\n\r\n",                        // HTTP/1.1 needs Host
      "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",  // and only one
      "GET /metrics HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\n folded: y\r\n\r\n",
      std::string(kNulInValue, sizeof(kNulInValue) - 1),
  };
  for (const std::string& request : bad) {
    const Reply r = Exchange(server->port(), request);
    EXPECT_EQ(r.status_line, "HTTP/1.1 400 Bad Request") << request;
    EXPECT_TRUE(r.closed);
  }
  EXPECT_EQ(Exchange(server->port(), "GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n").status, 505);
}

std::string HeadOfSize(size_t size) {
  std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  head += std::string(size - head.size() - end.size(), 'p');
  head += end;
  return head;
}

TEST(MetricsHttpServer, HeadOverTheLimitIs431AndAtTheLimitIsServed) {
  MetricsHttpServer::Options o = Opts();
  o.max_request_head_bytes = 8192;
  auto server = Started(std::move(o));
  Reply r = Exchange(server->port(), HeadOfSize(8192));
  EXPECT_EQ(r.status, 200) << r.status_line;
  r = Exchange(server->port(), HeadOfSize(8193));
  EXPECT_EQ(r.status_line, "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_TRUE(r.closed);
  // Far over the limit, with no end of head at all.
  r = Exchange(server->port(), Join("GET /metrics HTTP/1.1\r\nX: ", std::string(100000, 'x')));
  EXPECT_EQ(r.status, 431) << r.raw.substr(0, 200);
  EXPECT_TRUE(r.closed);
}

TEST(MetricsHttpServer, LargeBodyIsSentWhole) {
  std::string big;
  for (int i = 0; big.size() < (4 << 20); ++i) {
    big += "jitd_series{i=\"";
    big += std::to_string(i);
    big += "\"} 1\n";
  }
  MetricsHttpServer::Options o = Opts();
  o.render = [&big] { return big; };
  auto server = Started(std::move(o));
  const Reply r = Exchange(server->port(), Get("/metrics"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(big.size()));
  EXPECT_TRUE(r.body == big) << r.body.size() << " of " << big.size() << " bytes";
}

TEST(MetricsHttpServer, RenderThatThrowsIs500) {
  MetricsHttpServer::Options o = Opts();
  o.render = []() -> std::string { throw std::runtime_error("boom"); };
  auto server = Started(std::move(o));
  EXPECT_EQ(Exchange(server->port(), Get("/metrics")).status, 500);
  EXPECT_EQ(Exchange(server->port(), Get("/")).status, 200);  // still serving
}

// A client that sends its head one byte at a time, never finishing: dropped
// when client_timeout has passed since it connected, not reset by each byte.
TEST(MetricsHttpServer, SlowlorisIsDroppedAfterTheTimeout) {
  MetricsHttpServer::Options o = Opts();
  o.client_timeout = milliseconds(400);
  auto server = Started(std::move(o));
  Client slow(server->port());
  ASSERT_TRUE(slow.connected());
  const Clock::time_point start = Clock::now();
  const std::string request = Get("/metrics");
  size_t next = 0;
  std::string got;
  bool closed = false;
  // The attack itself: one byte every 20 ms, between waits for the server's
  // close (poll), never the whole head.
  while (Clock::now() - start < milliseconds(5000)) {
    if (slow.WaitReadable(Clock::now() + milliseconds(20))) {
      got = slow.ReadAll(milliseconds(2000), &closed);
      break;
    }
    if (next + 4 < request.size()) (void)slow.Send(request.substr(next++, 1));
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_TRUE(closed);
  EXPECT_GT(next, 5u);  // it did dribble
  EXPECT_GE(elapsed, milliseconds(380));
  EXPECT_LT(elapsed, milliseconds(1500));
  if (!got.empty()) {
    EXPECT_EQ(got.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << got;
  }
  EXPECT_TRUE(WaitFor([&] { return server->connections() == 0; }));
}

TEST(MetricsHttpServer, SilentClientIsDroppedAfterTheTimeout) {
  MetricsHttpServer::Options o = Opts();
  o.client_timeout = milliseconds(300);
  auto server = Started(std::move(o));
  Client idle(server->port());
  ASSERT_TRUE(idle.connected());
  const Clock::time_point start = Clock::now();
  bool closed = false;
  idle.ReadAll(milliseconds(3000), &closed);
  const auto elapsed = Clock::now() - start;
  EXPECT_TRUE(closed);
  EXPECT_GE(elapsed, milliseconds(280));
  EXPECT_LT(elapsed, milliseconds(2500));
}

TEST(MetricsHttpServer, SlowClientsDoNotHoldUpOthers) {
  MetricsHttpServer::Options o = Opts();
  o.client_timeout = milliseconds(60000);
  auto server = Started(std::move(o));
  Client idle(server->port());
  Client partial(server->port());
  ASSERT_TRUE(idle.connected() && partial.connected());
  ASSERT_TRUE(partial.Send("GET /metrics HTTP/1.1\r\nHo"));
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 2; }));
  const Clock::time_point start = Clock::now();
  const Reply r = Exchange(server->port(), Get("/metrics"));
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  // The partial one finishes its request and is served too.
  ASSERT_TRUE(partial.Send("st: x\r\n\r\n"));
  bool closed = false;
  const Reply late = Parse(partial.ReadAll(milliseconds(5000), &closed), closed);
  EXPECT_EQ(late.status, 200);
  EXPECT_EQ(late.body, kBody);
}

// A body far larger than what the socket buffers of a client that does not
// read can take: the server is still writing it until the client goes.
std::string LargeBody() { return std::string(16 << 20, 'x'); }
constexpr int kSmallReceiveBuffer = 4096;

// Every place is taken by real work (responses being written to clients that
// do not read them): a newcomer is answered 503, and served once one goes.
TEST(MetricsHttpServer, ConnectionsOverTheBoundAre503) {
  MetricsHttpServer::Options o = Opts();
  o.max_connections = 2;
  o.client_timeout = milliseconds(60000);
  const std::string big = LargeBody();
  o.render = [&big] { return big; };
  auto server = Started(std::move(o));
  auto a = std::make_unique<Client>(server->port(), AF_INET, kSmallReceiveBuffer);
  Client b(server->port(), AF_INET, kSmallReceiveBuffer);
  ASSERT_TRUE(a->connected() && b.connected());
  ASSERT_TRUE(a->Send(Get("/metrics")) && b.Send(Get("/metrics")));
  // Their responses have begun: the server writes to both.
  ASSERT_TRUE(a->WaitReadable(Clock::now() + milliseconds(5000)));
  ASSERT_TRUE(b.WaitReadable(Clock::now() + milliseconds(5000)));
  EXPECT_EQ(server->connections(), 2u);
  {
    // Refused as soon as it is accepted, before it sends anything.
    Client c(server->port());
    ASSERT_TRUE(c.connected());
    bool closed = false;
    const Reply r = Parse(c.ReadAll(milliseconds(5000), &closed), closed);
    EXPECT_EQ(r.status_line, "HTTP/1.1 503 Service Unavailable");
    EXPECT_TRUE(closed);
  }
  EXPECT_EQ(server->connections(), 2u);
  a.reset();  // frees a place (its unread response is reset)
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 1; }));
  EXPECT_EQ(Exchange(server->port(), Get("/")).status, 200);
}

// When every place is taken, a newcomer takes the place of the connection
// that has been sending its request head the longest, which is answered 408;
// one whose response is being written keeps its place.
TEST(MetricsHttpServer, ANewcomerTakesThePlaceOfTheOldestUnfinishedRequest) {
  MetricsHttpServer::Options o = Opts();
  o.max_connections = 3;
  o.client_timeout = milliseconds(60000);
  const std::string big = LargeBody();
  o.render = [&big] { return big; };
  auto server = Started(std::move(o));
  Client busy(server->port(), AF_INET, kSmallReceiveBuffer);  // the oldest, but writing
  ASSERT_TRUE(busy.connected() && busy.Send(Get("/metrics")));
  ASSERT_TRUE(busy.WaitReadable(Clock::now() + milliseconds(5000)));
  Client older(server->port());
  ASSERT_TRUE(older.connected() && older.Send("GET / HTTP/1.1\r\nHo"));
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 2; }));
  Client newer(server->port());
  ASSERT_TRUE(newer.connected() && newer.Send("GET / HTTP/1.1\r\nHo"));
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 3; }));

  const Reply r = Exchange(server->port(), Get("/"));
  EXPECT_EQ(r.status, 200) << r.status_line;
  bool closed = false;
  const Reply dropped = Parse(older.ReadAll(milliseconds(5000), &closed), closed);
  EXPECT_EQ(dropped.status_line, "HTTP/1.1 408 Request Timeout");
  EXPECT_TRUE(closed);
  // The newer one keeps its place and is served when it finishes.
  ASSERT_TRUE(newer.Send("st: x\r\n\r\n"));
  const Reply late = Parse(newer.ReadAll(milliseconds(5000), &closed), closed);
  EXPECT_EQ(late.status, 200) << late.status_line;
  EXPECT_TRUE(closed);
  EXPECT_EQ(server->slow_clients_dropped(), 1u);
}

// Issue 15, item 8: more slow clients than places, each holding a partial
// request head and coming back as soon as it is dropped. Every scrape is
// still answered at once.
TEST(MetricsHttpServer, SlowlorisClientsHoldingEveryPlaceNeverBlockAScrape) {
  constexpr int kSlowClients = 20;
  constexpr int kScrapes = 20;
  MetricsHttpServer::Options o = Opts();
  o.max_connections = 16;
  o.client_timeout = milliseconds(60000);
  auto server = Started(std::move(o));
  const uint16_t port = server->port();

  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};  // connections the slow clients opened
  std::atomic<int> closed{0};  // of them, ones they saw closed by the server (408 or 503)
  // One thread plays every slow client: each sends "GET /met", waits (poll)
  // for the server to close its connection and opens another at once. It
  // stops when told to, or after 30 s whatever happens.
  std::thread attack([&] {
    std::vector<std::unique_ptr<Client>> slow(kSlowClients);
    std::vector<pollfd> fds(kSlowClients);
    char buf[4096];
    const Clock::time_point give_up = Clock::now() + milliseconds(30000);
    while (!stop.load() && Clock::now() < give_up) {
      for (int i = 0; i < kSlowClients; ++i) {
        if (slow[i] == nullptr || !slow[i]->connected()) {
          slow[i] = std::make_unique<Client>(port);
          if (slow[i]->connected()) {
            ++opened;
            (void)slow[i]->Send("GET /met");  // when this fails the close shows below
          }
        }
        fds[i] = {slow[i]->fd(), POLLIN, 0};
      }
      if (poll(fds.data(), fds.size(), 100) <= 0) continue;
      for (int i = 0; i < kSlowClients; ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t n = recv(slow[i]->fd(), buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) continue;  // the answer before the close
        ++closed;
        slow[i]->Close();  // reopened on the next round
      }
    }
  });
  struct JoinOnExit {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~JoinOnExit() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } join_attack{stop, attack};

  ASSERT_TRUE(WaitFor([&] { return opened.load() >= kSlowClients; }));
  const int closed_before = closed.load();
  const uint64_t dropped_before = server->slow_clients_dropped();
  int answered = 0;
  int made_room = 0;  // scrapes during which a slow client was dropped to make room
  Clock::duration slowest{};
  for (int i = 0; i < kScrapes; ++i) {
    // Every place is taken: by the slow clients (and, for a moment, by the
    // last scrape's connection, until the server sees it closed).
    EXPECT_TRUE(WaitFor([&] { return server->connections() == 16; })) << "before scrape " << i;
    const uint64_t dropped = server->slow_clients_dropped();
    const Clock::time_point start = Clock::now();
    const Reply r = Exchange(port, Get("/metrics"));
    const Clock::duration took = Clock::now() - start;
    if (server->slow_clients_dropped() > dropped) ++made_room;
    slowest = std::max(slowest, took);
    EXPECT_EQ(r.status, 200) << "scrape " << i << ": " << r.status_line;
    EXPECT_EQ(r.body, kBody) << "scrape " << i;
    EXPECT_LT(took, milliseconds(1000)) << "scrape " << i;
    if (r.status == 200 && r.body == kBody && took < milliseconds(1000)) ++answered;
  }
  const uint64_t dropped_during = server->slow_clients_dropped() - dropped_before;
  const int closed_during = closed.load() - closed_before;
  stop = true;
  attack.join();
  std::printf(
      "[slowloris] %d of %d scrapes answered 200, slowest %.1f ms; the server dropped %llu slow connections "
      "(%llu while scraping, during %d of the %d scrapes); the slow clients opened %d, saw %d closed (%d while "
      "scraping)\n",
      answered, kScrapes, std::chrono::duration<double, std::milli>(slowest).count(),
      static_cast<unsigned long long>(server->slow_clients_dropped()), static_cast<unsigned long long>(dropped_during),
      made_room, kScrapes, opened.load(), closed.load(), closed_during);
  EXPECT_EQ(answered, kScrapes);
  EXPECT_GT(made_room, 0);  // the scrapes did find every place taken by slow clients
  EXPECT_TRUE(WaitFor([&] { return server->connections() == 0; }));
}

TEST(MetricsHttpServer, StopReturnsPromptlyWithAnIdleClientConnected) {
  MetricsHttpServer::Options o = Opts();
  o.client_timeout = milliseconds(60000);
  auto server = Started(std::move(o));
  Client idle(server->port());
  Client partial(server->port());
  ASSERT_TRUE(idle.connected() && partial.connected());
  ASSERT_TRUE(partial.Send("GET /met"));
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 2; }));
  const Clock::time_point start = Clock::now();
  server->Stop();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));  // not the clients' 60 s timeout
  // Both see the connection closed, and nothing listens any more.
  bool closed = false;
  idle.ReadAll(milliseconds(2000), &closed);
  EXPECT_TRUE(closed);
  partial.ReadAll(milliseconds(2000), &closed);
  EXPECT_TRUE(closed);
  Client after(server->port());
  EXPECT_FALSE(after.connected());
  server->Stop();  // again: nothing to do
}

TEST(MetricsHttpServer, DestructorReturnsPromptlyWithAClientConnected) {
  MetricsHttpServer::Options o = Opts();
  o.client_timeout = milliseconds(60000);
  auto server = Started(std::move(o));
  Client idle(server->port());
  ASSERT_TRUE(idle.connected());
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 1; }));
  const Clock::time_point start = Clock::now();
  server.reset();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));  // not the client's 60 s timeout
}

TEST(MetricsHttpServer, StopWithoutStartAndStartTwice) {
  {
    MetricsHttpServer never(Opts());
    never.Stop();
  }
  auto server = Started(Opts());
  const absl::Status again = server->Start();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  MetricsHttpServer::Options o = Opts();
  o.render = nullptr;
  MetricsHttpServer no_render(std::move(o));
  EXPECT_EQ(no_render.Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MetricsHttpServer, PortZeroReportsTheBoundPort) {
  auto server = Started(Opts("127.0.0.1:0"));
  ASSERT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), Join("127.0.0.1:", std::to_string(server->port())));
  EXPECT_EQ(Exchange(server->port(), Get("/metrics")).status, 200);
}

TEST(MetricsHttpServer, LocalhostMeansIpv4Loopback) {
  auto server = Started(Opts("localhost:0"));
  ASSERT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), Join("127.0.0.1:", std::to_string(server->port())));
  EXPECT_EQ(Exchange(server->port(), Get("/metrics")).body, kBody);
}

bool HaveIpv6Loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST(MetricsHttpServer, ServesOnIpv6Loopback) {
  if (!HaveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  auto server = Started(Opts("[::1]:0"));
  ASSERT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), Join("[::1]:", std::to_string(server->port())));
  const Reply r = Exchange(server->port(), Get("/metrics"), AF_INET6);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);
}

TEST(MetricsHttpServer, AddressInUseNamesTheAddress) {
  auto first = Started(Opts("127.0.0.1:0"));
  const std::string address = Join("127.0.0.1:", std::to_string(first->port()));
  MetricsHttpServer second(Opts(address));
  const absl::Status s = second.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(address), std::string::npos) << s;
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s;
  EXPECT_EQ(Exchange(first->port(), Get("/metrics")).status, 200);  // the first is untouched
}

TEST(MetricsHttpServer, BadAddressesAreInvalidArgumentNamingThem) {
  for (const char* address :
       {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x", "::1:9464", "[::1]9464",
        "[::1", "[127.0.0.1]:1", "example.com:9464", ":9464", "300.1.1.1:9464"}) {
    MetricsHttpServer server(Opts(address));
    const absl::Status s = server.Start();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address << ": " << s;
    EXPECT_NE(s.message().find(Join(Join("\"", address), "\"")), std::string::npos) << s;
  }
  // A well-formed address that is not this host's.
  MetricsHttpServer elsewhere(Opts("192.0.2.1:0"));
  const absl::Status s = elsewhere.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("192.0.2.1:0"), std::string::npos) << s;
}

}  // namespace
}  // namespace jitd::metrics
