// Endpoint resolution: argument, then JITD_ENDPOINT, then the default the
// daemon also uses; and what counts as a well-formed endpoint.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "jitd/base/endpoint.h"
#include "scoped_env.h"

namespace jitd {
namespace {

using testing::ScopedEnv;

TEST(DefaultEndpoint, PrefersXdgRuntimeDir) {
  const ScopedEnv runtime("XDG_RUNTIME_DIR", "/run/user/1000");
  EXPECT_EQ(DefaultEndpoint(), "unix:/run/user/1000/jitd.sock");
}

TEST(DefaultEndpoint, FallsBackToTheCacheDirectory) {
  const ScopedEnv runtime("XDG_RUNTIME_DIR", nullptr);
  const ScopedEnv cache_home("XDG_CACHE_HOME", nullptr);
  const ScopedEnv home("HOME", "/home/ada");
  EXPECT_EQ(DefaultEndpoint(), "unix:/home/ada/.cache/jitd/jitd.sock");
}

TEST(DefaultEndpoint, FollowsXdgCacheHomeWhenThereIsNoRuntimeDir) {
  const ScopedEnv runtime("XDG_RUNTIME_DIR", nullptr);
  const ScopedEnv cache_home("XDG_CACHE_HOME", "/srv/cache");
  EXPECT_EQ(DefaultEndpoint(), "unix:/srv/cache/jitd/jitd.sock");
}

TEST(ResolveEndpoint, ArgumentThenEnvironmentThenDefault) {
  const ScopedEnv runtime("XDG_RUNTIME_DIR", "/run/user/7");
  {
    const ScopedEnv env("JITD_ENDPOINT", "127.0.0.1:7070");
    EXPECT_EQ(ResolveEndpoint("unix:/explicit.sock"), "unix:/explicit.sock");
    EXPECT_EQ(ResolveEndpoint(""), "127.0.0.1:7070");
  }
  const ScopedEnv empty("JITD_ENDPOINT", "");
  EXPECT_EQ(ResolveEndpoint(""), "unix:/run/user/7/jitd.sock");
}

TEST(ValidateEndpoint, AcceptsUnixPathsAndHostPort) {
  for (const char* good : {"unix:/run/jitd.sock", "unix:rel.sock", "localhost:7070", "10.0.0.2:1", "[::1]:65535"}) {
    EXPECT_TRUE(ValidateEndpoint(good).ok()) << good;
  }
  for (const char* bad : {"", "unix:", "localhost", ":7070", "host:0", "host:70000", "host:x"}) {
    EXPECT_EQ(ValidateEndpoint(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// One case of tests/vectors/endpoints.tsv.
struct Vector {
  std::string use, verdict, text;
  int line = 0;
};

std::vector<Vector> ReadVectors() {
  std::ifstream in(JITD_VECTORS_DIR "/endpoints.tsv");
  std::vector<Vector> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find('\t'), b = line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos) {
      ADD_FAILURE() << "endpoints.tsv:" << n << ": not USE<TAB>VERDICT<TAB>TEXT";
      continue;
    }
    out.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1), n});
  }
  return out;
}

// The message of checking `v`, or "" when it is accepted.
std::string Check(const Vector& v) {
  if (v.use == "connect") return std::string(ValidateEndpoint(v.text).message());
  absl::StatusOr<HostPort> split = SplitHostPort(v.text);
  if (!split.ok()) return std::string(split.status().message());
  return ParsePort(split->port, PortUse::kListen) ? "" : "the port is not in 0..65535";
}

TEST(EndpointVectors, EveryCaseOfTheSharedFileIsJudgedAsItSays) {
  const std::vector<Vector> vectors = ReadVectors();
  ASSERT_GE(vectors.size(), 30u) << "tests/vectors/endpoints.tsv was not read";
  for (const Vector& v : vectors) {
    const std::string message = Check(v);
    const std::string where = "endpoints.tsv:" + std::to_string(v.line) + " '" + v.text + "'";
    if (v.verdict == "ok") {
      EXPECT_EQ(message, "") << where;
    } else {
      ASSERT_TRUE(v.verdict.starts_with("bad:")) << where << ": verdict " << v.verdict;
      EXPECT_NE(message, "") << where << " was accepted";
      EXPECT_NE(message.find(v.verdict.substr(4)), std::string::npos) << where << ": " << message;
    }
  }
}

TEST(ParsePort, TakesDigitsOnlyAndZeroOnlyForListening) {
  EXPECT_EQ(ParsePort("7070", PortUse::kConnect), 7070u);
  EXPECT_EQ(ParsePort("65535", PortUse::kConnect), 65535u);
  EXPECT_EQ(ParsePort("0", PortUse::kListen), 0u);
  EXPECT_EQ(ParsePort("0", PortUse::kConnect), std::nullopt);
  for (const char* bad : {"", "65536", "99999", "123456", "-1", "+1", " 1", "1 ", "0x10", "1e3"}) {
    EXPECT_EQ(ParsePort(bad, PortUse::kListen), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace jitd
