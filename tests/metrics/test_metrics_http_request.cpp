// The metrics endpoint's request-head parser, without sockets (the server
// around it: test_metrics_http_server).
#include <gtest/gtest.h>

#include <string>

#include "metrics/http_request.h"

namespace jitd::metrics {
namespace {

TEST(RequestHeadLength, EndsAtTheBlankLineWithEitherLineEnd) {
  EXPECT_EQ(RequestHeadLength(""), 0u);
  EXPECT_EQ(RequestHeadLength("GET / HTTP/1.0\r\n"), 0u);  // not yet complete
  const std::string crlf = "GET / HTTP/1.0\r\nA: b\r\n\r\n";
  EXPECT_EQ(RequestHeadLength(crlf + "body"), crlf.size());
  const std::string lf = "GET / HTTP/1.0\nA: b\n\n";
  EXPECT_EQ(RequestHeadLength(lf + "rest"), lf.size());
  // Blank lines before the request line do not end it.
  EXPECT_EQ(RequestHeadLength("\r\n\r\n"), 0u);
  const std::string leading = "\r\n\r\nGET / HTTP/1.0\r\n\r\n";
  EXPECT_EQ(RequestHeadLength(leading), leading.size());
}

TEST(ParseRequestHead, AWellFormedHeadGivesMethodTargetPathAndVersion) {
  auto request = ParseRequestHead("GET /metrics?name=x HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->method, "GET");
  EXPECT_EQ(request->target, "/metrics?name=x");
  EXPECT_EQ(request->path, "/metrics");
  EXPECT_TRUE(request->http11);
  request = ParseRequestHead("HEAD / HTTP/1.0\n\n");  // 1.0 needs no Host
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->method, "HEAD");
  EXPECT_FALSE(request->http11);
  request = ParseRequestHead("GET / HTTP/1.1\r\nhOsT: a\r\n\r\n");  // header names are case-insensitive
  EXPECT_TRUE(request.ok()) << request.status();
}

TEST(ParseRequestHead, EachMalformedPartIsABadRequestThatSaysWhich) {
  struct Case {
    const char* head;
    const char* says;
  };
  for (const Case& c : {
           Case{"\r\n\r\n", "no request line"},
           Case{"GET /metrics\r\n\r\n", "not METHOD TARGET HTTP/VERSION"},
           Case{"GET  /metrics HTTP/1.1\r\n\r\n", "not METHOD TARGET HTTP/VERSION"},
           Case{"GET /a b HTTP/1.1\r\n\r\n", "not METHOD TARGET HTTP/VERSION"},
           Case{"G(T /metrics HTTP/1.0\r\n\r\n", "bad method"},
           Case{"GET metrics HTTP/1.0\r\n\r\n", "the target must be a path"},
           Case{"GET /a\x7f HTTP/1.0\r\n\r\n", "the target must be a path"},
           Case{"GET / HTTP/x\r\n\r\n", "bad HTTP version"},
           Case{"GET / HTTP/1.1\r\nHost a\r\n\r\n", "not NAME: VALUE"},
           Case{"GET / HTTP/1.1\r\n: a\r\n\r\n", "not NAME: VALUE"},
           Case{"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", "control character"},
           Case{"GET / HTTP/1.1\r\n\r\n", "exactly one Host"},
           Case{"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "exactly one Host"},
       }) {
    auto request = ParseRequestHead(c.head);
    ASSERT_FALSE(request.ok()) << c.head;
    EXPECT_TRUE(absl::IsInvalidArgument(request.status())) << c.head << ": " << request.status();
    EXPECT_NE(std::string(request.status().message()).find(c.says), std::string::npos)
        << c.head << ": " << request.status();
  }
  const std::string nul("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 29);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseRequestHead(nul).status()));
}

TEST(ParseRequestHead, AnotherWellFormedVersionIsUnimplemented) {
  for (const char* head : {"GET / HTTP/2.0\r\n\r\n", "GET / HTTP/0.9\r\n\r\n", "GET / HTTP/1.2\r\n\r\n"}) {
    EXPECT_TRUE(absl::IsUnimplemented(ParseRequestHead(head).status())) << head;
  }
}

}  // namespace
}  // namespace jitd::metrics
