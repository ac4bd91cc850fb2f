// Endpoint resolution: argument, then JITD_ENDPOINT, then the default the
// daemon also uses; and what counts as a well-formed endpoint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "jitd/base/endpoint.h"

namespace jitd {
namespace {

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value == nullptr ? unsetenv(name) : setenv(name, value, 1);
  }
  ~ScopedEnv() { old_.has_value() ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

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

}  // namespace
}  // namespace jitd
