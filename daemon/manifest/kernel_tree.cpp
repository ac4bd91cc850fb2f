// Reading a kernels directory into memory: the files its kernels can reach
// and nothing else, within bounds, and never a byte from outside the tree.
// Every filesystem call takes an error_code: a tree that cannot be read is
// refused with a message, alone, and never takes the daemon down.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace fs = std::filesystem;
using text::Cat;

namespace {

constexpr char kManifestFile[] = "kernels.toml";

// What one tree may make the daemon read and hold. A tree is read at every
// start and every SIGHUP, and its files stay in memory while it is served
// (twice during a reload): the bounds keep a stray data file, or a tree
// pointed at the wrong directory, from costing gigabytes and seconds. The
// largest header of the shipped kernels and of CUTLASS/CCCL is under 1 MiB;
// a whole vendored CUTLASS include tree is about 15 MiB.
constexpr uint64_t kMaxTreeFileBytes = uint64_t{16} << 20;  // one file read
constexpr uint64_t kMaxTreeBytes = uint64_t{64} << 20;      // all files read from one tree
// Entries walked (files, directories, links of any kind, read or not): a
// tree of a million files costs seconds to list even when none is read.
constexpr size_t kMaxTreeEntries = 100'000;

// The files read whether or not a kernel includes them: every file the
// namespace guard scans (daemon/guard/source_scan.cpp, IsSource), so that it
// sees every source of the tree. Any other file is read only when an
// #include of a file read names it (a `config.inc`, a header without a
// suffix), and never otherwise: a data file beside the kernels costs a stat.
bool ReadAlways(const std::string& rel) {
  return rel == kManifestFile || rel.ends_with(".cu") || rel.ends_with(".cuda") || rel.ends_with(".cuh") ||
         rel.ends_with(".h") || rel.ends_with(".hpp");
}

std::string MiB(uint64_t bytes) { return Cat(bytes >> 20, " MiB"); }

// A regular file of the tree, found by the walk; not read yet.
struct Listed {
  fs::path target;  // what is opened, relative to the root: the file, or where its link leads
  uint64_t size = 0;
};

class TreeReader {
 public:
  explicit TreeReader(fs::path root) : root_(std::move(root)) {}

  // Lists the tree. INVALID_ARGUMENT for a link that leaves it or cannot be
  // resolved and for too many entries; FAILED_PRECONDITION for a directory
  // that cannot be listed.
  absl::Status Walk();
  bool Has(const std::string& rel) const { return listed_.count(rel) != 0; }
  // Reads `rel` (listed) into `files`, within the bounds.
  absl::Status Read(const std::string& rel, std::map<std::string, std::string>& files);
  // Reads every file an #include of a file in `files` can mean, transitively
  // (the first candidate the tree has, as keys::IncludeNames picks).
  absl::Status ReadIncluded(std::map<std::string, std::string>& files);
  const std::vector<std::string>& listed_order() const { return order_; }

 private:
  absl::Status Refuse(const std::string& rel, const std::string& why) const {
    return absl::InvalidArgumentError(Cat(rel, " in ", root_.string(), " ", why));
  }
  absl::StatusOr<files::UniqueFd> Open(const Listed& file) const;

  fs::path root_;
  files::UniqueFd root_fd_;
  std::map<std::string, Listed> listed_;
  std::vector<std::string> order_;  // listed_, sorted (its keys)
  uint64_t bytes_read_ = 0;
};

absl::Status TreeReader::Walk() {
  std::error_code ec;
  size_t entries = 0;
  std::string last = "(its first entry)";
  // Links to directories are not descended (directory_options::none): a
  // directory of the tree is a directory in it.
  for (auto it = fs::recursive_directory_iterator(root_, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    const std::string rel = path.lexically_relative(root_).generic_string();
    last = rel;
    if (++entries > kMaxTreeEntries) {
      return absl::InvalidArgumentError(Cat("kernels directory ", root_.string(), " holds more than ", kMaxTreeEntries,
                                            " entries (files, directories and links): a kernel tree ",
                                            "holds the kernels' sources and headers only; point --kernels at them"));
    }
    std::error_code entry_ec;
    const fs::file_status link = it->symlink_status(entry_ec);
    if (entry_ec) return Refuse(rel, Cat("cannot be read: ", entry_ec.message()));
    if (fs::is_symlink(link)) {
      std::error_code read_ec;
      const fs::path points_to = fs::read_symlink(path, read_ec);
      const std::string shown = read_ec ? std::string("?") : points_to.string();
      const fs::path target = fs::canonical(path, entry_ec);
      if (entry_ec == std::errc::no_such_file_or_directory) continue;  // dangling: nothing to read
      if (entry_ec) {
        return Refuse(rel, Cat("is a symbolic link (to ", shown, ") that cannot be followed: ", entry_ec.message(),
                               "; remove it or make it a file of the tree"));
      }
      if (!files::PathInside(root_, target)) {
        return Refuse(rel, Cat("is a symbolic link to ", target.string(),
                               ", outside the kernel tree: a compile reads only the tree's own files, which are in "
                               "its kernels' keys; copy the file into the tree instead of linking to it"));
      }
      const fs::file_status status = fs::status(target, entry_ec);
      if (entry_ec) return Refuse(rel, Cat("is a symbolic link that cannot be followed: ", entry_ec.message()));
      if (!fs::is_regular_file(status)) continue;  // a link to a directory of the tree: not descended
      const uint64_t size = fs::file_size(target, entry_ec);
      if (entry_ec) return Refuse(rel, Cat("cannot be read: ", entry_ec.message()));
      listed_[rel] = Listed{target.lexically_relative(root_), size};
      continue;
    }
    // Devices, pipes and sockets are never read (a read could block).
    if (!fs::is_regular_file(link)) continue;
    const uint64_t size = it->file_size(entry_ec);
    if (entry_ec) return Refuse(rel, Cat("cannot be read: ", entry_ec.message()));
    listed_[rel] = Listed{fs::path(rel), size};
  }
  if (ec) {
    return absl::FailedPreconditionError(
        Cat("cannot read the kernels directory ", root_.string(), " (at ", last, "): ", ec.message()));
  }
  for (const auto& [rel, listed] : listed_) order_.push_back(rel);
  return absl::OkStatus();
}

absl::StatusOr<files::UniqueFd> TreeReader::Open(const Listed& file) const {
  // The walk said where each file is; between the walk and this open a
  // component could be swapped for a link out of the tree. openat2 with
  // RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS resolves the path inside the root
  // with no link anywhere (the target is canonical), so such a swap fails
  // the open instead of reading outside the tree. Where openat2 is missing
  // (Linux < 5.6, or a seccomp filter), O_NOFOLLOW guards the last
  // component only.
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW;
  struct open_how how {};
  how.flags = kFlags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, root_fd_.get(), file.target.c_str(), &how, sizeof how));
  if (fd < 0 && (errno == ENOSYS || errno == EPERM)) fd = ::open((root_ / file.target).c_str(), kFlags);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == EXDEV) {
      return absl::InvalidArgumentError(
          Cat(file.target.generic_string(), " in ", root_.string(),
              " became a symbolic link while the tree was read; read it again once it is still"));
    }
    return absl::FailedPreconditionError(
        Cat("cannot read ", file.target.generic_string(), " in ", root_.string(), ": ", std::strerror(err)));
  }
  return files::UniqueFd(fd);
}

absl::Status TreeReader::Read(const std::string& rel, std::map<std::string, std::string>& files) {
  if (files.count(rel)) return absl::OkStatus();
  const Listed& file = listed_.at(rel);
  auto too_large = [&](uint64_t size) {
    return Refuse(rel, Cat("is ", size, " bytes; a file a kernel tree's compiles can read may hold at most ",
                           MiB(kMaxTreeFileBytes),
                           ": a header that large is not a kernel's (move data files "
                           "out of the tree, or give them a name that is neither a source's nor included)"));
  };
  auto over_total = [&](uint64_t size) {
    return absl::InvalidArgumentError(Cat("the files a compile can read from the kernel tree ", root_.string(),
                                          " come to more than ", MiB(kMaxTreeBytes), " (", bytes_read_,
                                          " bytes read before ", rel, ", which holds ", size,
                                          "): keep the kernels' sources and headers only in the tree"));
  };
  // Checked before the open: a file over the bound is refused unread.
  if (file.size > kMaxTreeFileBytes) return too_large(file.size);
  if (bytes_read_ + file.size > kMaxTreeBytes) return over_total(file.size);
  if (!root_fd_.valid()) {
    root_fd_ = files::UniqueFd(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd_.valid()) {
      return absl::FailedPreconditionError(
          Cat("cannot open the kernels directory ", root_.string(), ": ", std::strerror(errno)));
    }
  }
  JITD_ASSIGN_OR_RETURN(files::UniqueFd fd, Open(file));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Refuse(rel, "is not a regular file any more; read the tree again once it is still");
  }
  // The size may have grown since the walk: read at most one byte past the
  // bound, so a file that grew is refused without being read whole.
  const uint64_t limit = std::min(kMaxTreeFileBytes, kMaxTreeBytes - bytes_read_) + 1;
  std::string content(static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(st.st_size) + 1, limit)), '\0');
  size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd.get(), content.data() + got, content.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::FailedPreconditionError(
          Cat("cannot read ", rel, " in ", root_.string(), ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got == content.size() && got < limit) content.resize(std::min<uint64_t>(limit, got * 2));
  }
  content.resize(got);
  if (got > kMaxTreeFileBytes) return too_large(got);
  if (bytes_read_ + got > kMaxTreeBytes) return over_total(got);
  bytes_read_ += got;
  files.emplace(rel, std::move(content));
  return absl::OkStatus();
}

absl::Status TreeReader::ReadIncluded(std::map<std::string, std::string>& files) {
  std::vector<std::string> stack;
  for (const auto& [rel, content] : files) {
    if (rel != kManifestFile) stack.push_back(rel);
  }
  std::set<std::string> scanned(stack.begin(), stack.end());
  while (!stack.empty()) {
    const std::string file = stack.back();
    stack.pop_back();
    for (const keys::IncludeDirective& d : keys::IncludeDirectives(file, files.at(file))) {
      // NVRTC opens such a name on the disk (an absolute path, or one that
      // climbs out of the tree): bytes no key covers, and its error log
      // would quote them. A name that stays inside and names no tree file
      // is the toolkit's (<cuda/std/cstdint>).
      const fs::path spelled = fs::path(d.spelled).lexically_normal();
      if (spelled.is_absolute() || (d.candidates.empty() && !spelled.empty() && *spelled.begin() == "..")) {
        return absl::InvalidArgumentError(
            Cat(file, ":", d.line, " in ", root_.string(), ": #include \"", d.spelled,
                "\" names a file outside the kernel tree: a compile reads only the tree's bytes, which are in its "
                "key; put the header in the tree and include it by its path in the tree"));
      }
      for (const std::string& candidate : d.candidates) {
        if (!Has(candidate)) continue;
        JITD_RETURN_IF_ERROR(Read(candidate, files));
        if (scanned.insert(candidate).second) stack.push_back(candidate);
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const KernelTree>> KernelTree::Load(const fs::path& dir_in) {
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(dir_in, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return absl::NotFoundError(Cat("kernels directory ", dir_in.string(), " does not exist"));
  }
  auto tree = std::make_shared<KernelTree>();
  tree->source_dir_ = dir;
  TreeReader reader(dir);
  JITD_RETURN_IF_ERROR(reader.Walk());
  if (!reader.Has(kManifestFile)) return absl::NotFoundError(Cat("no kernels.toml in ", dir.string()));
  for (const std::string& rel : reader.listed_order()) {
    if (ReadAlways(rel)) JITD_RETURN_IF_ERROR(reader.Read(rel, tree->files_));
  }
  JITD_ASSIGN_OR_RETURN(auto manifest, Manifest::Parse(tree->files_[kManifestFile], (dir / kManifestFile).string()));
  tree->manifest_ = std::move(manifest);
  for (const auto& k : tree->manifest_.kernels) {
    if (!reader.Has(k.source)) {
      return absl::InvalidArgumentError(Cat((dir / kManifestFile).string(), ":", k.line, ": kernel ", k.name,
                                            ": source ", k.source, " does not exist in ", dir.string()));
    }
    JITD_RETURN_IF_ERROR(reader.Read(k.source, tree->files_));
  }
  if (tree->manifest_.adhoc_modules) {
    // An ad-hoc module may include any source of the tree.
    for (const std::string& rel : reader.listed_order()) {
      if (IsAdhocTreeFile(rel)) JITD_RETURN_IF_ERROR(reader.Read(rel, tree->files_));
    }
  }
  JITD_RETURN_IF_ERROR(reader.ReadIncluded(tree->files_));
  // Over every file read, which holds every file a compile can be given
  // (each kernel's source and its include closure).
  tree->fingerprint_ = keys::TreeFingerprint(tree->files_);
  tree->adhoc_fingerprint_ = AdhocFingerprint(tree->files_);
  return std::shared_ptr<const KernelTree>(std::move(tree));
}

const std::string* KernelTree::File(const std::string& relative) const {
  auto it = files_.find(relative);
  return it == files_.end() ? nullptr : &it->second;
}

}  // namespace jitd::manifest
