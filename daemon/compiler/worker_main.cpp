// jitd-compile-worker --fd N --pch-dir DIR: a compile worker as its own
// executable, for tests and benchmarks. The daemon runs its own binary in a
// hidden worker mode that calls the same RunCompileWorker.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "compile_worker.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s --fd N --pch-dir DIR\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int fd = -1;
  std::filesystem::path pch_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) return Usage(argv[0]);
    const char* value = argv[++i];
    if (arg == "--fd") {
      char* end = nullptr;
      errno = 0;
      const long parsed = std::strtol(value, &end, 10);
      if (errno != 0 || end == value || *end != '\0' || parsed < 0 || parsed > 1 << 20) return Usage(argv[0]);
      fd = static_cast<int>(parsed);
    } else if (arg == "--pch-dir") {
      pch_dir = value;
    } else {
      return Usage(argv[0]);
    }
  }
  if (fd < 0 || pch_dir.empty()) return Usage(argv[0]);
  // stdout may be the daemon's; diagnostics go to stderr.
  auto logger = spdlog::stderr_color_mt("compile-worker");
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [compile-worker %P] [%l] %v");
  spdlog::set_default_logger(logger);
  return jitd::compiler::RunCompileWorker(fd, pch_dir);
}
