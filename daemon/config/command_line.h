// jitd's command line: `jitd [serve] [flags]`, `jitd lint ...`,
// `jitd warm ...`, `jitd bundle create|verify ...`, as CONTRACT.md names them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace jitd::daemon {

// How `jitd lint` reports (--format): lint_report.h writes each.
enum class LintFormat { kText, kJson, kJunit, kGithub };

// What `jitd lint`, `jitd warm` and `jitd bundle` were given.
struct OfflineOptions {
  // warm, bundle create: every tree (--kernels [NAME=]DIR, repeatable, or
  // the trees of --config FILE; default: the shipped tree, unnamed) and
  // every lock (--lock, repeatable, or the config's locks), as the daemon
  // serves them. lint: one tree, also in kernels_dir and kernels_name.
  std::vector<manifest::TreeSource> trees;
  std::vector<std::filesystem::path> locks;
  std::filesystem::path kernels_dir;         // empty = DefaultKernelsDir()
  std::filesystem::path cuda_include;        // empty = compiler::kDefaultCudaInclude
  std::filesystem::path cache_dir;           // warm: the directory to fill
  std::vector<std::string> archs;            // empty = the default arch
  bool all = false;                          // warm: every instantiation
  std::filesystem::path manifest;            // warm: a file of [[spec]] tables
  uint32_t workers = 0;                      // 0 = one per core (lint: --jobs)
  bool source_only = false;                  // lint: skip the compile-all half
  LintFormat format = LintFormat::kText;     // lint: how findings are written
  std::filesystem::path write_lock;          // lint: the lock file a clean lint writes
  std::string kernels_name;                  // the tree's serving name ("" = unnamed): a lock's `tree`
  std::filesystem::path output;              // bundle create: the bundle to write
  std::filesystem::path bundle_file;         // bundle verify: the bundle to check
  std::filesystem::path signing_key_file;    // bundle: the fleet's key; empty = a digest seal
  manifest::ModuleToolOptions module_tools;  // --nvcc, --host-cxx, --tvm-ffi-root
};

struct CommandLine {
  enum class Command { kServe, kLint, kWarm, kBundleCreate, kBundleVerify };
  Command command = Command::kServe;
  OfflineOptions offline;
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
// `version` is what --version prints (default: the version number).
std::variant<CommandLine, int> ParseCommandLine(int argc, char** argv, const std::string& version = "");

}  // namespace jitd::daemon
