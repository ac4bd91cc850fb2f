// Seed bundles as they arrive in an image: Bundle::Open must refuse every
// malformed file cleanly, allocating no more than the file's own bounds
// allow, and every entry of a bundle it accepts must be found again,
// verified, under its key.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "jitd/base/files.h"
#include "jitd/bundle.h"

namespace {

// Bundles are opened by path: each input is written to this process's one
// file, removed at exit.
struct InputFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("jitd-fuzz-bundle-" + std::to_string(::getpid()));
  ~InputFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const InputFile input;
  const std::filesystem::path& path = input.path;
  jitd::files::AtomicWrite how;
  how.sync = false;
  if (!jitd::files::WriteFileAtomically(path, std::string_view(reinterpret_cast<const char*>(data), size), how).ok()) {
    return 0;
  }
  auto bundle = jitd::cache::Bundle::Open(path);
  if (bundle.ok()) {
    for (const std::string& key : (*bundle)->keys()) {
      auto entry = (*bundle)->Find(key);
      if (!entry.ok() || entry->meta.key != key) std::abort();
    }
  }
  return 0;
}
