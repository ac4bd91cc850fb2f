#include "security/unix_socket_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

// Whether something accepts connections on the socket at `path`.
bool SomeoneAccepts(const std::filesystem::path& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  // ECONNREFUSED: a socket file without a listener (stale). A live
  // listener with a full backlog answers EAGAIN and counts as live.
  const int result = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const bool accepts = result == 0 || errno == EAGAIN;
  close(fd);
  return accepts;
}

// The pid recorded in a lock file, for the message about who holds it.
std::string LockHolder(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  int pid = 0;
  if (n > 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buffer, static_cast<size_t>(n))), &pid)) {
    return text::Cat(" (pid ", pid, ")");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<UnixSocketClaim>> UnixSocketClaim::Acquire(const std::filesystem::path& path) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return absl::FailedPreconditionError(
        text::Cat("cannot create the socket directory ", path.parent_path().string(), ": ", error.message()));
  }
  // In a directory every user may write to (without the sticky bit that
  // /tmp has), anyone could remove jitd's socket and put their own there.
  struct stat directory {};
  if (stat(path.parent_path().c_str(), &directory) == 0 && (directory.st_mode & S_IWOTH) != 0 &&
      (directory.st_mode & S_ISVTX) == 0) {
    return absl::FailedPreconditionError(text::Cat(
        "the socket directory ", path.parent_path().string(),
        " is writable by every user (no sticky bit): anyone could replace jitd's socket there; use a directory the "
        "daemon's user owns ($XDG_RUNTIME_DIR, a systemd RuntimeDirectory) or chmod o-w it"));
  }

  // A directory of another user's: that user could swap the socket, the
  // lock or the token file under the daemon. Root's directories are
  // trusted (root is); the sticky bit of /tmp keeps others' names apart.
  if (stat(path.parent_path().c_str(), &directory) == 0 && directory.st_uid != geteuid() && directory.st_uid != 0) {
    return absl::FailedPreconditionError(
        text::Cat("the socket directory ", path.parent_path().string(), " belongs to uid ", directory.st_uid,
                  ", not to the daemon's user (uid ", geteuid(),
                  ") or root: its owner could replace jitd's socket; use a "
                  "directory the daemon's user owns ($XDG_RUNTIME_DIR, a systemd RuntimeDirectory)"));
  }

  // Never through a symlink (one planted in /tmp would have the daemon
  // truncate whatever it points to), and only a regular file of its own.
  const std::string lock_path = text::Cat(path.string(), ".lock");
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return absl::FailedPreconditionError(text::Cat("cannot open the lock file ", lock_path, ": ", ErrnoText(),
                                                   errno == ELOOP ? " (it is a symlink: remove it)" : ""));
  }
  struct stat lock_info {};
  if (fstat(lock_fd, &lock_info) != 0 || !S_ISREG(lock_info.st_mode) || lock_info.st_uid != geteuid()) {
    close(lock_fd);
    return absl::FailedPreconditionError(text::Cat("the lock file ", lock_path,
                                                   " is not a regular file of the daemon's user (uid ", geteuid(),
                                                   "); refusing to use it: remove it"));
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = LockHolder(lock_fd);
    close(lock_fd);
    return absl::FailedPreconditionError(text::Cat("another jitd", holder,
                                                   " is already serving on unix:", path.string(),
                                                   "; stop it first or choose another --listen address"));
  }
  const std::string pid = text::Cat(getpid(), "\n");
  if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, pid.data(), pid.size(), 0) < 0) {
    // Only the message about the holder suffers; the lock itself holds.
  }

  bool removed_stale = false;
  struct stat info {};
  if (lstat(path.c_str(), &info) == 0) {
    if (!S_ISSOCK(info.st_mode)) {
      close(lock_fd);
      return absl::FailedPreconditionError(
          text::Cat(path.string(), " exists and is not a socket; refusing to replace it"));
    }
    if (SomeoneAccepts(path)) {
      close(lock_fd);
      return absl::FailedPreconditionError(text::Cat("another process is already serving on unix:", path.string(),
                                                     "; stop it first or choose another --listen address"));
    }
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      close(lock_fd);
      return absl::FailedPreconditionError(
          text::Cat("cannot remove the stale socket ", path.string(), ": ", ErrnoText()));
    }
    removed_stale = true;
  }
  return std::unique_ptr<UnixSocketClaim>(new UnixSocketClaim(path, lock_fd, removed_stale));
}

UnixSocketClaim::UnixSocketClaim(std::filesystem::path path, int lock_fd, bool removed_stale)
    : path_(std::move(path)), lock_fd_(lock_fd), removed_stale_(removed_stale) {}

UnixSocketClaim::~UnixSocketClaim() {
  unlink(path_.c_str());
  close(lock_fd_);
}

absl::Status UnixSocketClaim::RestrictMode() const {
  if (chmod(path_.c_str(), 0660) != 0) {
    return absl::FailedPreconditionError(text::Cat("cannot set mode 0660 on ", path_.string(), ": ", ErrnoText()));
  }
  return absl::OkStatus();
}

}  // namespace jitd::daemon
