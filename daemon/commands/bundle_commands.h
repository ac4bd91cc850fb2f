// `jitd bundle create` and `jitd bundle verify`: sealed seed bundles
// (jitd/bundle.h) made from a cache directory and checked before use, with
// no daemon and no GPU.
#pragma once

#include "config/command_line.h"

namespace jitd::daemon {

// Writes every entry of --cache-dir, each read back verified, into the
// bundle --output, signed with --signing-key-file's key or sealed with a
// SHA-256 digest. Exit 0 when written, 1 when an entry could not be read
// (nothing is written), 2 when it could not start.
int RunBundleCreate(const CommandLine& command_line);

// Opens the bundle FILE as a daemon would mount it: every entry against its
// checksum and key, then the seal (with --signing-key-file, the signature).
// Exit 0 and a summary when it verifies, 1 and the first problem when not,
// 2 when it could not start.
int RunBundleVerify(const CommandLine& command_line);

}  // namespace jitd::daemon
