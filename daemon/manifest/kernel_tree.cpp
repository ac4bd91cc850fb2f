// Loading the kernels directory into memory and snapshotting it.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "jitd/cache.h"
#include "jitd/detail/text.h"
#include "manifest.h"

namespace jitd::manifest {
namespace {

namespace fs = std::filesystem;
using text::Cat;

// Writes the tree to root/<fingerprint>/ unless it is already there. A
// snapshot is complete or absent: it is written under a temporary name and
// renamed, so a crash or a concurrent writer never leaves half a tree.
absl::StatusOr<fs::path> WriteSnapshot(const fs::path& root, const std::string& fingerprint,
                                       const std::map<std::string, std::string>& files) {
  fs::path final_dir = root / fingerprint.substr(0, 32);
  std::error_code ec;
  if (fs::is_directory(final_dir, ec)) return final_dir;
  fs::create_directories(root, ec);
  fs::path tmp = root / Cat(".tmp-", fingerprint.substr(0, 16), "-", ::getpid());
  fs::remove_all(tmp, ec);
  for (const auto& [rel, content] : files) {
    fs::path p = tmp / rel;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary);
    out << content;
    if (!out) return absl::FailedPreconditionError(Cat("cannot write kernel snapshot file ", p.string()));
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (fs::is_directory(final_dir)) return final_dir;  // another process won
    return absl::FailedPreconditionError(Cat("cannot create kernel snapshot ", final_dir.string()));
  }
  return final_dir;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const KernelTree>> KernelTree::Load(const fs::path& dir_in,
                                                                   const fs::path& snapshot_root) {
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(dir_in, ec);
  if (ec || !fs::is_directory(dir)) {
    return absl::NotFoundError(Cat("kernels directory ", dir_in.string(), " does not exist"));
  }
  if (!fs::is_regular_file(dir / "kernels.toml")) {
    return absl::NotFoundError(Cat("no kernels.toml in ", dir.string()));
  }
  auto tree = std::make_shared<KernelTree>();
  tree->source_dir_ = dir;
  std::vector<std::string> names;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    tree->files_[it->path().lexically_relative(dir).generic_string()] = ss.str();
  }
  if (ec) return absl::FailedPreconditionError(Cat("cannot read ", dir.string(), ": ", ec.message()));
  auto manifest = Manifest::Parse(tree->files_["kernels.toml"], (dir / "kernels.toml").string());
  if (!manifest.ok()) return manifest.status();
  tree->manifest_ = std::move(*manifest);
  for (const auto& k : tree->manifest_.kernels) {
    if (!tree->files_.count(k.source)) {
      return absl::InvalidArgumentError(Cat((dir / "kernels.toml").string(), ":", k.line, ": kernel ", k.name,
                                            ": source ", k.source, " does not exist in ", dir.string()));
    }
  }
  // The same fingerprint TreeFingerprint() computes, from memory.
  cache::KeyInputs fp;
  for (const auto& [rel, content] : tree->files_) fp.sources.emplace_back(rel, content);
  tree->fingerprint_ = cache::ContentKey(fp);
  if (snapshot_root.empty()) {
    tree->include_root_ = dir;
  } else {
    auto snap = WriteSnapshot(snapshot_root, tree->fingerprint_, tree->files_);
    if (!snap.ok()) return snap.status();
    tree->include_root_ = *snap;
  }
  return std::shared_ptr<const KernelTree>(std::move(tree));
}

const std::string* KernelTree::File(const std::string& relative) const {
  auto it = files_.find(relative);
  return it == files_.end() ? nullptr : &it->second;
}

}  // namespace jitd::manifest
