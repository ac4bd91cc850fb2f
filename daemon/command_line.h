// jitd's command line: `jitd [serve] [flags]`, `jitd lint ...`,
// `jitd warm ...`, as CONTRACT.md names them.
#pragma once

#include <filesystem>
#include <optional>
#include <variant>

#include "config.h"

namespace jitd::daemon {

struct CommandLine {
  enum class Command { kServe, kLint, kWarm };
  Command command = Command::kServe;
  // --config FILE, read under the flags.
  std::optional<std::filesystem::path> config_file;
  // What the flags set, each value already checked.
  ConfigLayer flags;
};

// Exit code for a command line that cannot run (CLI11 and this file).
inline constexpr int kExitUsage = 2;

// The parsed command line, or the code main should exit with right away:
// 0 after --help or --version, kExitUsage after a usage error (both
// already printed).
std::variant<CommandLine, int> ParseCommandLine(int argc, char** argv);

}  // namespace jitd::daemon
