// Client::GetModuleFile: a module kernel's shared object written to a
// private file and verified before it is handed out (jitd/client.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "jitd/base/files.h"
#include "jitd/base/text.h"
#include "jitd/blob.h"
#include "jitd/client.h"

namespace jitd {
namespace {

namespace fs = std::filesystem;
using text::Cat;

fs::path DefaultModuleDir() {
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && runtime[0] == '/') {
    return fs::path(runtime) / "jitd-modules";
  }
  const char* tmp = std::getenv("TMPDIR");
  return fs::path(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") / Cat("jitd-modules-", getuid());
}

// `dir` exists (made 0700 when missing) and only this user can write it.
absl::Status CheckPrivate(const fs::path& dir) {
  if (absl::Status made = files::MakePrivateDirs(dir); !made.ok()) {
    return absl::FailedPreconditionError(Cat("module directory ", dir.string(), ": ", made.message()));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(Cat("module directory ", dir.string(), ": ", std::strerror(errno)));
  }
  const char* problem = S_ISLNK(st.st_mode)       ? "is a symbolic link"
                        : !S_ISDIR(st.st_mode)    ? "is not a directory"
                        : st.st_uid != getuid()   ? "belongs to another user"
                        : (st.st_mode & 022) != 0 ? "is writable by its group or others"
                                                  : nullptr;
  if (problem == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(Cat("module directory ", dir.string(), " ", problem,
                                           ": a module is code this process runs, and it is never loaded from a "
                                           "place another user can write (give a directory of your own)"));
}

// Writes `bytes` to DIR/<key>.so through a new 0500 file, then reads it back.
absl::Status WriteVerified(const fs::path& file, const std::string& bytes) {
  const fs::path temp = Cat(file.string(), ".", getpid(), ".tmp");
  files::UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0500));
  if (!fd.valid()) return files::ErrnoStatus(errno, "create", temp);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      unlink(temp.c_str());
      return files::ErrnoStatus(err, "write", temp);
    }
    done += static_cast<size_t>(n);
  }
  if (const int err = fd.Close(); err != 0) {
    unlink(temp.c_str());
    return files::ErrnoStatus(err, "close", temp);
  }
  if (rename(temp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    unlink(temp.c_str());
    return files::ErrnoStatus(err, "rename", file);
  }
  absl::StatusOr<std::string> back = files::ReadWholeFile(file);
  if (!back.ok()) return back.status();
  if (cache::Checksum128(*back) != cache::Checksum128(bytes)) {
    return absl::DataLossError(
        Cat(file.string(),
            " does not hold the bytes just written to it: not handed out (another process may be "
            "writing the module directory)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModuleFile> Client::GetModuleFile(const KernelSpec& spec, const fs::path& dir_in) {
  absl::StatusOr<std::shared_ptr<const KernelBinary>> binary = GetKernelBinary(spec);
  if (!binary.ok()) return binary.status();
  const KernelBinary& b = **binary;
  if (!cache::IsHostSharedObject(b.cubin)) {
    return absl::InvalidArgumentError(Cat("kernel ", spec.kernel,
                                          " is not a module kernel (kind = \"module\"): the daemon answered a "
                                          "cubin, PTX or fatbin; load it with GetKernel"));
  }
  if (!cache::IsValidKey(b.key))
    return absl::DataLossError(Cat("the daemon answered a malformed key for ", spec.kernel));
  const fs::path dir = dir_in.empty() ? DefaultModuleDir() : dir_in;
  if (absl::Status s = CheckPrivate(dir); !s.ok()) return s;
  ModuleFile out;
  out.path = dir / Cat(b.key, ".so");
  out.key = b.key;
  out.builder = b.nvrtc_version;
  for (const KernelSymbol& symbol : b.symbols) out.exports.push_back(symbol.name_expression);
  if (absl::Status s = WriteVerified(out.path, b.cubin); !s.ok()) return s;
  return out;
}

}  // namespace jitd
