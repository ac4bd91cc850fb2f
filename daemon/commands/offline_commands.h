// `jitd lint` and `jitd warm`: the work that needs the compiler but no
// daemon. Each returns the process exit code and prints what a person needs:
// progress while it runs, one line per finding or failure, a summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "config/command_line.h"

namespace jitd::daemon {

// The namespace guard over a kernels directory: the textual check of every
// source file, then (unless --source-only) every manifest instantiation
// compiled for every --arch. Exit 0 when clean, 1 with findings, 2 when the
// check could not run (no such directory, broken manifest).
// With --format, written as lint_report.h says; with --write-lock, a clean
// lint also writes its lock (manifest/lock.h). In lint_command.cpp.
int RunLint(const CommandLine& command_line);

// Fills --cache-dir with every instantiation (--all) or those of a spec
// file (--manifest), for every --arch, without serving. Safe beside a
// daemon on the same directory. Exit 0 when all are cached, 1 when some
// failed (each listed with its reason), 2 when it could not start.
// With --lock, exactly the lock's entries, each checked against its key.
int RunWarm(const CommandLine& command_line);

// What the offline commands share.
namespace offline {
inline constexpr int kExitFindings = 1;
inline constexpr int kExitCannotRun = 2;
// `requested` compiles at once, or one per core for 0.
size_t WorkerCount(uint32_t requested);
// --arch, or the default arch.
std::vector<std::string> Archs(const OfflineOptions& o);
// Prints "jitd WHAT: why" to stderr; returns kExitCannotRun.
int CannotRun(std::string_view what, const absl::Status& s);
}  // namespace offline

}  // namespace jitd::daemon
