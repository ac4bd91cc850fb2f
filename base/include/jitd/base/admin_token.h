// The admin token files: the daemon writes and reads them, jitctl and
// jitd::Client read them, all through these functions.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace jitd {

// The token in an admin token file: its content with surrounding whitespace
// (a trailing newline) removed. The daemon (--admin-token-file) and jitctl
// (--admin-token-file) both read it with this function, so they agree.
// NOT_FOUND when the file is not there, PERMISSION_DENIED when it may not be
// read, FAILED_PRECONDITION when reading fails otherwise, INVALID_ARGUMENT when it holds no
// token or whitespace inside one (which no Bearer header can carry).
absl::StatusOr<std::string> ReadAdminTokenFile(const std::filesystem::path& path);

// The token a daemon wrote beside its Unix socket (SOCKET.admin-token), as
// Client::Connect reads it: only a regular file (never through a symlink)
// owned by the socket's owner, of at most 4 KiB. PERMISSION_DENIED when it
// is anything else (planted beside a socket by someone else) or may not be
// read, NOT_FOUND when it is not there.
absl::StatusOr<std::string> ReadSocketAdminToken(const std::filesystem::path& socket_path);

}  // namespace jitd
