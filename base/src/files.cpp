#include "jitd/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "jitd/base/text.h"

namespace jitd::files {

using text::Cat;

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.Release();
  }
  return *this;
}

UniqueFd::~UniqueFd() { Close(); }

int UniqueFd::Close() {
  if (fd_ < 0) return 0;
  // Linux frees the descriptor even when close fails (EINTR included), so
  // it is never retried.
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc == 0 ? 0 : errno;
}

absl::StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path) {
  auto fail = [&path](int err) {
    const std::string message = Cat("cannot read ", path.string(), ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  };
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) return fail(errno);
  struct stat st;
  if (::fstat(f.get(), &st) != 0) return fail(errno);
  if (S_ISDIR(st.st_mode)) return fail(EISDIR);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(f.get(), out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno);
    }
    if (n == 0) break;  // truncated meanwhile: a checksum says so where it matters
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

absl::StatusOr<std::string> ReadPemFile(const std::filesystem::path& path, std::string_view what) {
  absl::StatusOr<std::string> pem = ReadWholeFile(path);
  if (!pem.ok())
    return absl::InvalidArgumentError(
        Cat(what, " ", path.string(), ": not a readable PEM file (", pem.status().message(), ")"));
  if (pem->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(Cat(what, " ", path.string(), ": not a readable PEM file (no -----BEGIN line)"));
  }
  return pem;
}

void EmptyDirectory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code remove_ec;
    std::filesystem::remove_all(entry.path(), remove_ec);
  }
}

}  // namespace jitd::files
