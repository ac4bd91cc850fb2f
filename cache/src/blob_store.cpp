#include "blob_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "jitd/base/files.h"
#include "jitd/base/hex.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/cache.h"

namespace jitd::cache::detail {

using text::Cat;
using text::Join;
namespace {

namespace fs = std::filesystem;

bool ProcessAlive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

BlobStore::BlobStore(fs::path dir) : dir_(std::move(dir)), blobs_(dir_ / "blobs"), tmp_(dir_ / "tmp") {}

absl::Status BlobStore::Init() const {
  absl::Status made = files::MakePrivateDirs(blobs_);
  if (made.ok()) made = files::MakePrivateDirs(tmp_);
  if (!made.ok()) {
    return absl::FailedPreconditionError(Cat("cannot create cache directory ", dir_.string(), ": ", made.message()));
  }
  if (::access(dir_.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(Cat("cache directory ", dir_.string(), " is not writable"));
  }
  return absl::OkStatus();
}

fs::path BlobStore::PathFor(std::string_view key, std::string_view checksum) const {
  return dir_ / BlobFileRelativePath(key, checksum);
}

absl::StatusOr<fs::path> BlobStore::Write(std::string_view key, std::string_view checksum, std::string_view bytes,
                                          bool sync) const {
  static std::atomic<uint64_t> seq{0};
  fs::path final_path = PathFor(key, checksum);
  const fs::path parent = final_path.parent_path();
  if (::mkdir(parent.c_str(), kPrivateDirMode) != 0 && errno != EEXIST)
    return files::ErrnoStatus(errno, "mkdir", parent);
  // KEY.PID.SEQ.tmp in tmp/, the name SweepTemp reads the writer's pid from.
  files::AtomicWrite how;
  how.temp = tmp_ / Cat(key, ".", ::getpid(), ".", seq.fetch_add(1), ".tmp");
  how.mode = kPrivateFileMode;
  how.sync = sync;
  JITD_RETURN_IF_ERROR(files::WriteFileAtomically(final_path, bytes, how));
  return final_path;
}

absl::StatusOr<std::string> BlobStore::Read(const fs::path& path) const { return files::ReadWholeFile(path); }

void BlobStore::Remove(const fs::path& path) const { ::unlink(path.c_str()); }

size_t BlobStore::SweepTemp(std::chrono::seconds grace) const {
  size_t removed = 0;
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(tmp_, ec)) {
    // KEY.PID.SEQ.tmp
    const std::string name = e.path().filename().string();
    size_t first = name.find('.');
    size_t second = first == std::string::npos ? first : name.find('.', first + 1);
    pid_t pid = 0;
    bool dead_writer = false;
    if (second != std::string::npos) {
      auto [end, ec2] = std::from_chars(name.data() + first + 1, name.data() + second, pid);
      dead_writer = ec2 == std::errc() && end == name.data() + second && !ProcessAlive(pid);
    }
    std::error_code tec;
    auto mtime = fs::last_write_time(e.path(), tec);
    bool stale = !tec && now - mtime > grace;
    if (dead_writer || stale) {
      if (::unlink(e.path().c_str()) == 0) ++removed;
    }
  }
  return removed;
}

std::vector<std::string> BlobStore::Shards(const std::function<void(const fs::path&)>& stray) const {
  std::vector<std::string> shards;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(blobs_, ec)) {
    if (entry.is_directory()) {
      shards.push_back(entry.path().filename().string());
    } else {
      stray(entry.path());
    }
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

void BlobStore::ForEachBlobIn(const std::string& shard, const BlobFn& fn) const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(blobs_ / shard, ec)) {
    const std::string name = e.path().filename().string();
    size_t dash = name.rfind('-');
    if (dash == std::string::npos || name.size() - dash - 1 != 32) {
      fn(e.path(), {}, {});
      continue;
    }
    std::string_view view(name);
    std::string_view key = view.substr(0, dash);
    if (!IsValidKey(key) || key.substr(0, 2) != shard) {
      fn(e.path(), {}, {});
      continue;
    }
    fn(e.path(), key, view.substr(dash + 1));
  }
}

}  // namespace jitd::cache::detail
