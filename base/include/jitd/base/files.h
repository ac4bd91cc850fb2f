// Whole-file reads and scratch directories, with errors that name the path
// and the system's reason.
#pragma once

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

// Makes `dir` (and its parents) if missing and removes whatever is in it;
// best effort: what cannot be removed stays.
void EmptyDirectory(const std::filesystem::path& dir);

}  // namespace jitd::files
