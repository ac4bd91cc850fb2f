// The admin token file format, shared by the daemon and jitctl.
#include "jitd/base/admin_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd {

using text::Cat;

namespace {

// A file that cannot be read, with the code its errno means: NOT_FOUND
// only when it is not there, PERMISSION_DENIED when it may not be read.
absl::Status CannotRead(std::string_view what, const std::filesystem::path& path, int error,
                        std::string_view hint = {}) {
  std::string message = Cat("cannot read ", what, path.string(), ": ", std::strerror(error), hint);
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
    case ELOOP:
      return absl::PermissionDeniedError(std::move(message));
    default:
      return absl::FailedPreconditionError(std::move(message));
  }
}

// A token file holds at most this much: a token is a line of text.
constexpr size_t kMaxTokenFileBytes = 4096;

absl::StatusOr<std::string> ParseToken(const std::string& content, const std::filesystem::path& path) {
  const std::string token(absl::StripAsciiWhitespace(content));
  if (token.empty()) {
    return absl::InvalidArgumentError(Cat("admin token file ", path.string(), " holds no token"));
  }
  for (const char c : token) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || !absl::ascii_isprint(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          Cat("admin token file ", path.string(),
              " holds whitespace or control characters inside its token; use one line of printable text"));
    }
  }
  return token;
}

}  // namespace

absl::StatusOr<std::string> ReadAdminTokenFile(const std::filesystem::path& path) {
  errno = 0;
  std::ifstream file(path, std::ios::binary);
  if (!file) return CannotRead("admin token file ", path, errno != 0 ? errno : ENOENT);
  std::stringstream content;
  content << file.rdbuf();
  return ParseToken(content.str(), path);
}

absl::StatusOr<std::string> ReadSocketAdminToken(const std::filesystem::path& socket_path) {
  const std::filesystem::path path = Cat(socket_path.string(), ".admin-token");
  struct stat socket_info {};
  if (::stat(socket_path.c_str(), &socket_info) != 0) {
    return CannotRead("socket ", socket_path, errno);
  }
  // Not through a symlink: one planted beside a fake server's socket would
  // hand it whatever file it points to.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return CannotRead("admin token file ", path, error,
                      error == ELOOP    ? " (it is a symlink; the daemon writes a regular file)"
                      : error == EACCES ? " (it is readable by the daemon's user only)"
                                        : "");
  }
  struct stat info {};
  std::string content;
  absl::Status refused;
  if (::fstat(fd, &info) != 0) {
    refused = CannotRead("admin token file ", path, errno);
  } else if (!S_ISREG(info.st_mode)) {
    refused = absl::PermissionDeniedError(Cat(path.string(), " is not a regular file: not read as an admin token"));
  } else if (info.st_uid != socket_info.st_uid) {
    // The daemon writes it as the user that owns the socket; a file of
    // anyone else's was not written by that daemon.
    refused = absl::PermissionDeniedError(Cat(path.string(), " is owned by uid ", info.st_uid, ", the socket by uid ",
                                              socket_info.st_uid, ": not read as that daemon's admin token"));
  } else if (static_cast<size_t>(info.st_size) > kMaxTokenFileBytes) {
    refused = absl::InvalidArgumentError(Cat(path.string(), " is ", info.st_size, " bytes: not an admin token"));
  } else {
    content.resize(static_cast<size_t>(info.st_size));
    const ssize_t got = ::pread(fd, content.data(), content.size(), 0);
    if (got < 0) refused = CannotRead("admin token file ", path, errno);
    content.resize(got < 0 ? 0 : static_cast<size_t>(got));
  }
  ::close(fd);
  JITD_RETURN_IF_ERROR(refused);
  return ParseToken(content, path);
}

}  // namespace jitd
