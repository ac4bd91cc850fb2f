// `jitd lint` and `jitd warm`: the work that needs the compiler but no
// daemon. Each returns the process exit code and prints what a person needs:
// progress while it runs, one line per finding or failure, a summary.
#pragma once

#include "config/command_line.h"

namespace jitd::daemon {

// The namespace guard over a kernels directory: the textual check of every
// source file, then (unless --source-only) every manifest instantiation
// compiled for every --arch. Exit 0 when clean, 1 with findings, 2 when the
// check could not run (no such directory, broken manifest).
int RunLint(const CommandLine& command_line);

// Fills --cache-dir with every instantiation (--all) or those of a spec
// file (--manifest), for every --arch, without serving. Safe beside a
// daemon on the same directory. Exit 0 when all are cached, 1 when some
// failed (each listed with its reason), 2 when it could not start.
int RunWarm(const CommandLine& command_line);

}  // namespace jitd::daemon
