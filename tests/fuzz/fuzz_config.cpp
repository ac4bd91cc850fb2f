// The daemon's TOML config file: ReadConfigFile must answer every input
// with settings or an error naming the problem, never crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "config/config_file.h"

namespace {

// The file each input is written to, removed when the process exits.
struct ConfigFile {
  std::string path = "/tmp/jitd-fuzz-config-" + std::to_string(getpid()) + ".toml";
  ~ConfigFile() { std::remove(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ConfigFile file;
  const std::string& path = file.path;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto layer = jitd::daemon::ReadConfigFile(path);
  if (!layer.ok() && layer.status().message().empty()) std::abort();  // an error must say what is wrong
  return 0;
}
