// An admin credential by default. Without --admin-token-file the daemon
// makes a random token at start and writes it beside each of its Unix
// sockets, in SOCKET.admin-token, readable by its owner only (0600). The
// socket itself is 0660, so the owner's group may call the daemon (get
// kernels, read stats) but only who can read the token file, the daemon's
// own user, may evict or repair. jitd::Client (and so jitctl) reads the
// file beside the socket it connects to by itself when it can. The files
// are removed at shutdown; a new start makes a new token.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::daemon {

// 32 random bytes from the kernel's CSPRNG, as 64 hex digits.
absl::StatusOr<std::string> NewAdminToken();

// The token file of a Unix socket path: SOCKET.admin-token.
std::filesystem::path AdminTokenFileFor(const std::filesystem::path& socket);

class AdminTokenFiles {
 public:
  // Writes `token` to the token file of each socket: an existing file is
  // replaced, the new one created 0600 (O_EXCL, no symlink followed).
  static absl::StatusOr<std::unique_ptr<AdminTokenFiles>> Write(const std::string& token,
                                                                const std::vector<std::filesystem::path>& sockets);
  ~AdminTokenFiles();  // removes them
  AdminTokenFiles(const AdminTokenFiles&) = delete;
  AdminTokenFiles& operator=(const AdminTokenFiles&) = delete;

  const std::vector<std::filesystem::path>& paths() const { return paths_; }

 private:
  AdminTokenFiles() = default;
  std::vector<std::filesystem::path> paths_;
};

}  // namespace jitd::daemon
