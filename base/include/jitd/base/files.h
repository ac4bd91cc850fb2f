// Whole-file reads and scratch directories, with errors that name the path
// and the system's reason.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::files {

// A file descriptor closed when it goes out of scope. Close() reports what
// close(2) said, for writers whose data is not safe until it returns.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // 0, or the errno of close(2); the descriptor is gone either way.
  int Close();

 private:
  int fd_ = -1;
};

// The whole of `path` in one string: one open, one fstat, a buffer sized
// once and read into directly (a 1 MiB blob costs one page-cache copy).
// NOT_FOUND when it does not exist, PERMISSION_DENIED when it cannot be
// read by this user, UNAVAILABLE for other I/O errors; each message names
// the path and the system's reason.
absl::StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path);

// A PEM file (a TLS certificate, key or CA bundle): INVALID_ARGUMENT,
// naming `what` (the flag or field that gave the path), when it cannot be
// read or holds no "-----BEGIN" line.
absl::StatusOr<std::string> ReadPemFile(const std::filesystem::path& path, std::string_view what);

// How WriteFileAtomically writes.
struct AtomicWrite {
  // Where the bytes go first, on the same filesystem as the file. Empty:
  // beside it, "FILE.PID.SEQ.tmp".
  std::filesystem::path temp;
  // The new file's mode (the umask does not apply: it is set at creation).
  mode_t mode = 0600;
  // fsync the data before the rename, and the directory after it, so that
  // a power loss leaves the old file or the whole new one.
  bool sync = true;
};

// Replaces `path` with `bytes` so that no reader, and no crash, ever sees
// part of them: a temporary file is created (O_EXCL, never through a
// link), written in full, fsynced (with `sync`) and closed with close's
// result checked, then renamed over `path` (a link there is replaced, not
// followed). On failure the temporary file is removed and `path` is as it
// was. Codes: RESOURCE_EXHAUSTED for a full disk or quota, NOT_FOUND for a
// missing directory, FAILED_PRECONDITION for a permission or read-only
// filesystem, INTERNAL otherwise; the message names the step, the path and
// the system's reason.
absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes,
                                 const AtomicWrite& how = {});

// The status of a failed system call `what` ("create", "fsync", ...) on
// `path`, with WriteFileAtomically's codes.
absl::Status ErrnoStatus(int err, std::string_view what, const std::filesystem::path& path);

// fsyncs the directory `dir` (what makes a rename in it durable).
absl::Status FsyncDirectory(const std::filesystem::path& dir);

// Makes `dir` and each missing parent with mode 0700 (the umask does not
// widen it; create_directories would give 0755, readable by everyone).
// FAILED_PRECONDITION when `dir` exists but is not a directory.
absl::Status MakePrivateDirs(const std::filesystem::path& dir);

// Makes `dir` (and its parents) if missing and removes whatever is in it;
// best effort: what cannot be removed stays.
void EmptyDirectory(const std::filesystem::path& dir);

// Whether `p` lies strictly inside `root`, by their text: both must be
// normalised the same way (both canonical, or both lexically normal).
// `root` itself, a sibling ("/a/bc" of "/a/b") and anything reached
// through ".." are not inside. The one spelling of "inside the tree" for
// the tree reader and the include closure.
bool PathInside(const std::filesystem::path& root, const std::filesystem::path& p);

}  // namespace jitd::files
