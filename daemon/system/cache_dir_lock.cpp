#include "system/cache_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "jitd/base/files.h"
#include "jitd/base/text.h"
#include "jitd/cache.h"

namespace jitd::daemon {
namespace {

using text::Cat;
using text::Join;

std::string ReadHolder(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string holder = text.str();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  // One line per fact in the file, ", " between them in a message.
  std::string joined;
  for (const char c : holder) {
    if (c == '\n') {
      joined += ", ";
    } else {
      joined += c;
    }
  }
  return joined.empty() ? "a process that has not written its pid yet" : joined;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CacheDirLock>> CacheDirLock::Acquire(const std::filesystem::path& dir,
                                                                    const std::vector<std::string>& listen) {
  if (absl::Status made = files::MakePrivateDirs(dir); !made.ok()) {
    return absl::FailedPreconditionError(Cat("cannot create the cache directory ", dir.string(), ": ", made.message()));
  }
  const std::filesystem::path file = dir / kFileName;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, cache::kPrivateFileMode);
  if (fd < 0) {
    return absl::FailedPreconditionError(Cat("cannot open ", file.string(), ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error != EWOULDBLOCK) {
      return absl::FailedPreconditionError(Cat("cannot lock ", file.string(), ": ", std::strerror(error)));
    }
    return absl::FailedPreconditionError(
        Cat("the cache directory ", dir.string(), " is already served by another jitd (", ReadHolder(file),
            "); two daemons may not share a cache directory (jitd warm may): stop that one, or start this one "
            "with another --cache-dir"));
  }
  const std::string holder = Cat("pid ", ::getpid(), "\nlistening on ", Join(listen, " "), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    // The lock holds regardless; only a refused daemon's message is poorer.
  }
  return std::unique_ptr<CacheDirLock>(new CacheDirLock(fd));
}

CacheDirLock::~CacheDirLock() { ::close(fd_); }

}  // namespace jitd::daemon
