// A directory of its own for one test, removed with everything in it.
// Header-only, so that every test target can have it: the cache's tests
// (tests/cache/testing.h) and the daemon's (tests/daemon/support) alike.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace jitd::testing {

class TempDir {
 public:
  // Under /tmp with a short name: Unix socket paths inside it must stay
  // within the 107 bytes a socket address holds.
  TempDir() {
    std::string pattern = "/tmp/jitd-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace jitd::testing
