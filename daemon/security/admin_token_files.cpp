#include "security/admin_token_files.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jitd/base/files.h"
#include "jitd/base/hex.h"
#include "jitd/base/text.h"

namespace jitd::daemon {

using text::Cat;

absl::StatusOr<std::string> NewAdminToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(Cat("cannot make an admin token: getrandom: ", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  return hex::Encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::filesystem::path AdminTokenFileFor(const std::filesystem::path& socket) {
  return Cat(socket.string(), ".admin-token");
}

absl::StatusOr<std::unique_ptr<AdminTokenFiles>> AdminTokenFiles::Write(
    const std::string& token, const std::vector<std::filesystem::path>& sockets) {
  std::unique_ptr<AdminTokenFiles> files(new AdminTokenFiles());
  for (const auto& socket : sockets) {
    const std::filesystem::path path = AdminTokenFileFor(socket);
    // Replaces a previous daemon's (the socket claim makes this one the
    // owner); a link planted there is replaced, never followed. No fsync:
    // the file lives as long as this daemon and is rewritten at each start.
    files::AtomicWrite how;
    how.mode = 0600;
    how.sync = false;
    if (absl::Status written = files::WriteFileAtomically(path, Cat(token, "\n"), how); !written.ok()) {
      return absl::FailedPreconditionError(Cat("cannot write the admin token file: ", written.message()));
    }
    files->paths_.push_back(path);
  }
  return files;
}

AdminTokenFiles::~AdminTokenFiles() {
  for (const auto& path : paths_) ::unlink(path.c_str());
}

}  // namespace jitd::daemon
