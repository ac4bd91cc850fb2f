// Loading the kernels directory into memory.
#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace fs = std::filesystem;
using text::Cat;

absl::StatusOr<std::shared_ptr<const KernelTree>> KernelTree::Load(const fs::path& dir_in) {
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
    // Checked: a file that cannot be read must not become an empty header.
    JITD_ASSIGN_OR_RETURN(std::string content, files::ReadWholeFile(it->path()));
    tree->files_[it->path().lexically_relative(dir).generic_string()] = std::move(content);
  }
  if (ec) return absl::FailedPreconditionError(Cat("cannot read ", dir.string(), ": ", ec.message()));
  JITD_ASSIGN_OR_RETURN(auto manifest, Manifest::Parse(tree->files_["kernels.toml"], (dir / "kernels.toml").string()));
  tree->manifest_ = std::move(manifest);
  for (const auto& k : tree->manifest_.kernels) {
    if (!tree->files_.count(k.source)) {
      return absl::InvalidArgumentError(Cat((dir / "kernels.toml").string(), ":", k.line, ": kernel ", k.name,
                                            ": source ", k.source, " does not exist in ", dir.string()));
    }
  }
  // The same fingerprint TreeFingerprint() computes, from memory.
  keys::KeyInputs fp;
  for (const auto& [rel, content] : tree->files_) fp.sources.emplace_back(rel, content);
  tree->fingerprint_ = keys::ContentKey(fp);
  return std::shared_ptr<const KernelTree>(std::move(tree));
}

const std::string* KernelTree::File(const std::string& relative) const {
  auto it = files_.find(relative);
  return it == files_.end() ? nullptr : &it->second;
}

}  // namespace jitd::manifest
