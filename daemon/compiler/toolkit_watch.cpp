#include "compiler/toolkit_watch.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <nvrtc.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "compiler/ptx_link.h"
#include "jitd/base/digest.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "spdlog/spdlog.h"

namespace jitd::compiler {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int FindLoadedBuiltins(struct dl_phdr_info* info, size_t /*size*/, void* data) {
  const std::string_view name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (fs::path(name).filename().string().starts_with("libnvrtc-builtins")) {
    *static_cast<std::string*>(data) = std::string(name);
    return 1;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<fs::path>> NvrtcLibraryFiles() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) {
    return absl::NotFoundError("cannot tell which file libnvrtc was loaded from (dladdr of nvrtcVersion failed)");
  }
  const fs::path nvrtc = info.dli_fname;
  std::string loaded_builtins;
  dl_iterate_phdr(&FindLoadedBuiltins, &loaded_builtins);
  fs::path builtins = loaded_builtins;
  if (builtins.empty()) {
    // Not loaded yet: the name libnvrtc asks for, beside it
    // (libnvrtc.so.13 -> libnvrtc-builtins.so.13.0, and the .alt variant).
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return absl::InternalError("nvrtcVersion failed");
    const bool alt = nvrtc.filename().string().find(".alt.") != std::string::npos;
    builtins = nvrtc.parent_path() / text::Cat("libnvrtc-builtins", alt ? ".alt" : "", ".so.", major, ".", minor);
  }
  std::error_code ec;
  for (const fs::path& p : {nvrtc, builtins}) {
    if (!fs::is_regular_file(p, ec)) {
      return absl::NotFoundError(text::Cat("NVRTC library ", p.string(), " not found (the compile workers load it)"));
    }
  }
  std::vector<fs::path> files = {nvrtc, builtins};
  // ptxas assembles the cubins of compiles with unused globals (ptx_link.h);
  // without one those compiles keep NVRTC's cubins, and the key says so.
  if (absl::StatusOr<fs::path> ptxas = ToolkitPtxas(); ptxas.ok()) files.push_back(*ptxas);
  return files;
}

absl::StatusOr<ToolkitIdentity> ToolkitIdentity::Compute(const fs::path& include_dir, const fs::path& memo_dir) {
  ToolkitIdentity id;
  id.include_dir = include_dir;
  std::error_code ec;
  if (!fs::is_regular_file(include_dir / "cuda_fp16.h", ec)) {
    return absl::FailedPreconditionError(
        text::Cat("CUDA toolkit headers not found under ", include_dir.string(),
                  " (NVRTC needs cuda_fp16.h and cccl/; --cuda-include chooses the directory)"));
  }
  JITD_ASSIGN_OR_RETURN(id.headers_fingerprint,
                        memo_dir.empty() ? keys::TreeFingerprint(include_dir)
                                         : keys::MemoizedTreeFingerprint(include_dir, memo_dir / kToolkitHeadersMemo));
  JITD_ASSIGN_OR_RETURN(std::vector<fs::path> libraries, NvrtcLibraryFiles());
  JITD_ASSIGN_OR_RETURN(id.nvrtc_library_fingerprint,
                        memo_dir.empty() ? keys::FilesFingerprint(libraries)
                                         : keys::MemoizedFilesFingerprint(libraries, memo_dir / kNvrtcLibrariesMemo));
  for (const fs::path& p : libraries) id.nvrtc_libraries.push_back(fs::weakly_canonical(p, ec));
  id.fingerprint = digest::Sha256Hex(
      text::Cat("jitd-toolkit 1\nheaders ", id.headers_fingerprint, "\nnvrtc ", id.nvrtc_library_fingerprint, "\n"));
  return id;
}

std::string ToolkitIdentity::Describe() const {
  std::string libraries;
  for (const fs::path& p : nvrtc_libraries) {
    if (!libraries.empty()) libraries += '+';
    libraries += p.filename().string();
  }
  return text::Cat("headers ", include_dir.string(), " ", headers_fingerprint.substr(0, 12), ", nvrtc ", libraries, " ",
                   nvrtc_library_fingerprint.substr(0, 12));
}

// inotify over the toolkit's directories and library files, and the mount
// table: Changed() says whether anything happened there since its last
// call. An event is queued by the kernel within the write, rename or
// unlink that causes it, so a change NVRTC could have read is always
// queued by the time the compile's answer reaches Check().
class ToolkitWatch::Notifier {
 public:
  // Null when inotify cannot be set up (no instance left, the watch limit).
  static std::shared_ptr<Notifier> Make(const fs::path& include_dir, const std::vector<fs::path>& libraries) {
    auto n = std::shared_ptr<Notifier>(new Notifier());
    n->fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (n->fd_ < 0) return nullptr;
    constexpr uint32_t kContent = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE |
                                  IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF;
    constexpr uint32_t kEntries = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF;
    // `only`: the one entry of that directory that matters (the next
    // component of a path through it); empty: every event counts.
    auto watch = [&](const fs::path& p, uint32_t mask, const std::string& only = "") {
      // IN_MASK_ADD: a directory reached twice (as a header directory and
      // on a path) keeps every event either asked for.
      const int wd = inotify_add_watch(n->fd_, p.c_str(), mask | IN_MASK_ADD);
      if (wd < 0) return false;
      if (only.empty()) {
        n->only_.erase(wd);
        n->everything_.insert(wd);
      } else if (n->everything_.count(wd) == 0) {
        n->only_[wd].insert(only);
      }
      return true;
    };
    std::error_code ec;
    if (!watch(include_dir, kContent)) return nullptr;
    for (auto it = fs::recursive_directory_iterator(include_dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !watch(it->path(), kContent)) return nullptr;
    }
    if (ec) return nullptr;
    // The directories above, as written and as resolved: a link on the way
    // (/usr/local/cuda) repointed at another toolkit.
    for (const fs::path& start : {include_dir, fs::weakly_canonical(include_dir, ec)}) {
      fs::path below = start;
      for (fs::path up = start.parent_path(); !up.empty() && below != up; below = up, up = up.parent_path()) {
        if (!watch(up, kEntries, below.filename().string())) return nullptr;
      }
    }
    for (const fs::path& library : libraries) {
      if (!watch(library, kContent) || !watch(library.parent_path(), kEntries, library.filename().string())) {
        return nullptr;
      }
      const fs::path real = fs::weakly_canonical(library, ec);
      if (!ec && !watch(real.parent_path(), kEntries, real.filename().string())) return nullptr;
    }
    n->mounts_fd_ = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (n->mounts_fd_ < 0) return nullptr;
    n->DrainMounts();
    return n;
  }

  ~Notifier() {
    if (fd_ >= 0) close(fd_);
    if (mounts_fd_ >= 0) close(mounts_fd_);
  }

  // Whether an event came since the last call (and forgets them).
  bool Changed() {
    bool changed = false;
    alignas(inotify_event) char buffer[16384];
    while (true) {
      const ssize_t n = read(fd_, buffer, sizeof(buffer));
      if (n > 0) {
        for (ssize_t at = 0; at < n;) {
          const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
          at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
          if (Matters(*event)) changed = true;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EAGAIN: the queue is empty
    }
    pollfd mounts{mounts_fd_, POLLPRI, 0};
    if (poll(&mounts, 1, 0) > 0 && (mounts.revents & (POLLPRI | POLLERR)) != 0) {
      changed = true;
      DrainMounts();
    }
    return changed;
  }

 private:
  Notifier() = default;
  bool Matters(const inotify_event& event) const {
    if ((event.mask & (IN_Q_OVERFLOW | IN_IGNORED)) != 0 || everything_.count(event.wd) > 0) return true;
    const auto only = only_.find(event.wd);
    if (only == only_.end()) return true;
    // An event on the directory itself (moved, deleted) or on the entry
    // that matters.
    return event.len == 0 || only->second.count(event.name) > 0;
  }
  // Reading the mount table to its end re-arms its POLLPRI.
  void DrainMounts() {
    char buffer[8192];
    lseek(mounts_fd_, 0, SEEK_SET);
    while (read(mounts_fd_, buffer, sizeof(buffer)) > 0) {
    }
  }
  int fd_ = -1;
  int mounts_fd_ = -1;
  std::set<int> everything_;                   // watches whose every event counts
  std::map<int, std::set<std::string>> only_;  // watches where only these entries count
};

ToolkitWatch::ToolkitWatch(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::shared_ptr<ToolkitWatch>> ToolkitWatch::Start(Options options) {
  std::shared_ptr<ToolkitWatch> watch(new ToolkitWatch(std::move(options)));
  std::lock_guard lock(watch->mu_);
  JITD_RETURN_IF_ERROR(watch->Fingerprint());
  watch->last_ = Observation{watch->epoch_, watch->identity_.fingerprint};
  return watch;
}

std::uint64_t ToolkitWatch::stat_passes() const {
  std::lock_guard lock(mu_);
  return stat_passes_;
}

bool ToolkitWatch::notified() const {
  std::lock_guard lock(mu_);
  return notifier_ != nullptr;
}

bool ToolkitWatch::PassNeeded() {
  const Clock::time_point now = Clock::now();
  if (notifier_ == nullptr || options_.full_pass_every.count() <= 0 || !last_.ok()) return true;
  // Drained whatever the answer: what it held is seen by this pass.
  const bool changed = notifier_->Changed();
  return changed || now - last_full_pass_ >= options_.full_pass_every;
}

absl::StatusOr<std::string> ToolkitWatch::Metadata(bool* recent) const {
  bool headers_recent = false, libraries_recent = false;
  JITD_ASSIGN_OR_RETURN(std::string headers,
                        keys::TreeMetadataDigest(options_.include_dir, options_.settle, &headers_recent));
  JITD_ASSIGN_OR_RETURN(std::vector<fs::path> libraries, NvrtcLibraryFiles());
  JITD_ASSIGN_OR_RETURN(std::string nvrtc, keys::FilesMetadataDigest(libraries, options_.settle, &libraries_recent));
  if (recent != nullptr) *recent = headers_recent || libraries_recent;
  return text::Cat(headers, ":", nvrtc);
}

absl::Status ToolkitWatch::Fingerprint() {
  // Bounded: a toolkit being rewritten for minutes is fingerprinted as it
  // is then, and the next change is noticed by the next Check.
  for (int attempt = 0; attempt < 30; ++attempt) {
    // Watching first: whatever changes from here on is queued, so nothing
    // between this pass and the next Check() goes unseen.
    if (options_.full_pass_every.count() > 0) {
      absl::StatusOr<std::vector<fs::path>> libraries = NvrtcLibraryFiles();
      notifier_ = libraries.ok() ? Notifier::Make(options_.include_dir, *libraries) : nullptr;
      if (notifier_ == nullptr) {
        spdlog::debug("toolkit watch: no inotify watch on {}; a stat pass runs at every check",
                      options_.include_dir.string());
      }
    }
    last_full_pass_ = Clock::now();
    bool recent = false;
    JITD_ASSIGN_OR_RETURN(std::string before, Metadata(&recent));
    if (recent) {
      std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(options_.settle) / 4 +
                                  std::chrono::milliseconds(1));
      continue;
    }
    JITD_ASSIGN_OR_RETURN(ToolkitIdentity id, ToolkitIdentity::Compute(options_.include_dir, options_.memo_dir));
    JITD_ASSIGN_OR_RETURN(std::string after, Metadata(nullptr));
    if (after != before) continue;  // changed while it was read
    identity_ = std::move(id);
    metadata_ = before;
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      text::Cat("the CUDA toolkit under ", options_.include_dir.string(), " kept changing while it was fingerprinted"));
}

absl::StatusOr<ToolkitWatch::Observation> ToolkitWatch::Check() {
  const Clock::time_point called = Clock::now();
  std::lock_guard lock(mu_);
  // A pass that started after this call began saw everything this call
  // must see.
  if (last_check_started_ >= called) return last_;
  last_check_started_ = Clock::now();
  if (!PassNeeded()) return last_;
  last_full_pass_ = last_check_started_;
  ++stat_passes_;
  absl::StatusOr<std::string> now = Metadata(nullptr);
  if (now.ok() && *now == metadata_) {
    last_ = Observation{epoch_, identity_.fingerprint};
    return last_;
  }
  const ToolkitIdentity before = identity_;
  ++epoch_;
  absl::Status fingerprinted = now.ok() ? Fingerprint() : now.status();
  if (!fingerprinted.ok()) {
    metadata_.clear();  // the next Check tries again
    spdlog::error("toolkit changed: {} is no longer usable: {}; compiles fail until it is", before.Describe(),
                  std::string(fingerprinted.message()));
    last_ = absl::UnavailableError(
        text::Cat("the CUDA toolkit changed and cannot be fingerprinted: ", fingerprinted.message()));
    return last_;
  }
  if (identity_.fingerprint == before.fingerprint) {
    // Touched, same content (a reinstall of the same package): the keys
    // stay; compiles that ran across it are still discarded (new epoch).
    spdlog::info("toolkit changed: files touched, same content ({}); keys unchanged", identity_.Describe());
  } else {
    spdlog::warn("toolkit changed: {} -> {}; restarting the compile workers, new keys from now on", before.Describe(),
                 identity_.Describe());
  }
  for (const auto& [id, listener] : listeners_) listener(identity_, before);
  last_ = Observation{epoch_, identity_.fingerprint};
  return last_;
}

absl::StatusOr<ToolkitWatch::Observation> ToolkitWatch::Last() const {
  std::lock_guard lock(mu_);
  return last_;
}

ToolkitIdentity ToolkitWatch::identity() const {
  std::lock_guard lock(mu_);
  return identity_;
}

std::uint64_t ToolkitWatch::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

std::uint64_t ToolkitWatch::AddListener(Listener listener) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_listener_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void ToolkitWatch::RemoveListener(std::uint64_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(listeners_, [id](const auto& entry) { return entry.first == id; });
}

}  // namespace jitd::compiler
