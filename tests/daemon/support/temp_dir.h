// A directory of its own for one test, removed with everything in it.
#pragma once

#include <filesystem>

namespace jitd::testing {

class TempDir {
 public:
  // Under /tmp with a short name: Unix socket paths inside it must stay
  // within the 107 bytes a socket address holds.
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace jitd::testing
