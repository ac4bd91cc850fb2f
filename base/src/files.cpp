#include "jitd/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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

absl::Status ErrnoStatus(int err, std::string_view what, const std::filesystem::path& path) {
  const std::string message = Cat(what, " ", path.string(), ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(message);
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}

absl::Status MakePrivateDirs(const std::filesystem::path& dir) {
  std::filesystem::path at;
  for (const std::filesystem::path& part : dir) {
    at /= part;
    if (at.empty() || part.empty()) continue;
    if (::mkdir(at.c_str(), 0700) == 0 || errno == EEXIST) continue;
    return ErrnoStatus(errno, "mkdir", at);
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(Cat(dir.string(), " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status FsyncDirectory(const std::filesystem::path& dir) {
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) return ErrnoStatus(errno, "open directory", dir);
  if (::fsync(d.get()) != 0) return ErrnoStatus(errno, "fsync directory", dir);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes, const AtomicWrite& how) {
  static std::atomic<uint64_t> seq{0};
  const std::filesystem::path temp =
      how.temp.empty() ? std::filesystem::path(Cat(path.string(), ".", ::getpid(), ".", seq.fetch_add(1), ".tmp"))
                       : how.temp;
  const auto fail = [&](absl::Status status) {
    ::unlink(temp.c_str());
    return status;
  };
  UniqueFd f(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, how.mode));
  if (!f.valid()) return ErrnoStatus(errno, "create", temp);  // not ours to remove
  if (::fchmod(f.get(), how.mode) != 0) return fail(ErrnoStatus(errno, "chmod", temp));
  for (std::string_view left = bytes; !left.empty();) {
    const ssize_t n = ::write(f.get(), left.data(), left.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(ErrnoStatus(errno, "write", temp));
    }
    left.remove_prefix(static_cast<size_t>(n));
  }
  // The data must be on disk before the rename makes it visible, or a
  // power loss could leave a named, empty file.
  if (how.sync && ::fsync(f.get()) != 0) return fail(ErrnoStatus(errno, "fsync", temp));
  if (const int err = f.Close(); err != 0) return fail(ErrnoStatus(err, "close", temp));
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail(ErrnoStatus(errno, "rename", path));
  if (how.sync) return FsyncDirectory(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
  return absl::OkStatus();
}

void EmptyDirectory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code remove_ec;
    std::filesystem::remove_all(entry.path(), remove_ec);
  }
}

bool PathInside(const std::filesystem::path& root, const std::filesystem::path& p) {
  const std::filesystem::path rel = p.lexically_relative(root);
  return !rel.empty() && rel != "." && *rel.begin() != "..";
}

}  // namespace jitd::files
