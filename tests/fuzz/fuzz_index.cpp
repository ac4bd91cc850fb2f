// The SQLite index file as a disk may hand it back: Cache::Open on a
// directory whose index.sqlite is the input must open it (rebuilding it
// from the blobs when it is unreadable) or answer an error, never crash;
// what it opens must then answer lookups, listings and Verify.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "jitd/cache.h"

namespace {

namespace fs = std::filesystem;

// A directory of its own for the process, removed at exit.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("jitd-fuzz-index-" + std::to_string(getpid()));
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);  // every damaged index is logged: millions of lines
    return true;
  }();
  (void)quiet;
  static const Scratch scratch;
  std::error_code ec;
  fs::remove_all(scratch.dir, ec);
  fs::create_directories(scratch.dir);
  {
    std::ofstream out(scratch.dir / "index.sqlite", std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  jitd::cache::CacheOptions options;
  options.dir = scratch.dir;
  options.background = false;
  auto cache = jitd::cache::Cache::Open(options);
  if (!cache.ok()) {
    if (cache.status().message().empty()) std::abort();  // an error must say what is wrong
    return 0;
  }
  (void)(*cache)->Lookup(std::string(32, 'a'));
  (void)(*cache)->List({});
  (void)(*cache)->Verify(/*repair=*/false);
  return 0;
}
