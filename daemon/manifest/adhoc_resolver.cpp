// Resolver::ResolveAdhoc: a module spec a client sent (adhoc_module.h),
// resolved as a module kernel of the tree it names.
#include <algorithm>
#include <cctype>

#include "jitd/base/error_reason.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/adhoc_module.h"
#include "manifest/lock.h"
#include "manifest/manifest.h"
#include "manifest/toml_fields.h"

namespace jitd::manifest {
namespace {

using text::Cat;
using text::Join;

std::string TreeShown(const ServedTree& tree) { return tree.name.empty() ? std::string("(unnamed)") : tree.name; }

bool IsModuleName(std::string_view name) {
  return !name.empty() && name.size() <= 128 && name.front() != '.' && name.front() != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
         });
}

}  // namespace

absl::StatusOr<const ServedTree*> Resolver::AdhocTree(std::string_view tree_name, bool named) const {
  if (named) {
    for (const ServedTree& t : trees_) {
      if (t.name == tree_name) return &t;
    }
    std::vector<std::string> names;
    for (const ServedTree& t : trees_) names.push_back(TreeShown(t));
    return absl::NotFoundError(
        Cat("no kernel tree '", Shown(tree_name.substr(0, 64)), "' is served (trees: ", Join(names, ", "), ")"));
  }
  if (trees_.size() == 1) return &trees_.front();
  std::vector<const ServedTree*> allowing;
  for (const ServedTree& t : trees_) {
    if (t.tree->manifest().adhoc_modules) allowing.push_back(&t);
  }
  if (allowing.size() == 1) return allowing.front();
  std::vector<std::string> names;
  for (const ServedTree* t : allowing) names.push_back(t->name);
  return absl::InvalidArgumentError(
      Cat("an ad-hoc module must name its tree (TREE/NAME): ",
          allowing.empty() ? std::string("no served tree allows ad-hoc modules")
                           : Cat(allowing.size(), " served trees allow them (", Join(names, ", "), ")")));
}

absl::StatusOr<ResolvedKernel> Resolver::ResolveAdhoc(const KernelRequest& req) const {
  const size_t slash = req.kernel.find('/');
  const std::string bare = slash == std::string::npos ? req.kernel : req.kernel.substr(slash + 1);
  JITD_ASSIGN_OR_RETURN(const ServedTree* served,
                        AdhocTree(std::string_view(req.kernel).substr(0, std::min(slash, req.kernel.size())),
                                  slash != std::string::npos));
  const KernelTree& tree = *served->tree;
  const std::string qualified = QualifiedName(served->name, bare);
  if (!IsModuleName(bare)) {
    return absl::InvalidArgumentError(Cat("ad-hoc module name '", Shown(bare.substr(0, 128)),
                                          "' is not a name: 1 to 128 letters, digits, '_', '.' or '-', starting with "
                                          "a letter, digit or '_'"));
  }
  if (!tree.manifest().adhoc_modules) {
    return WithReason(absl::FailedPreconditionError(
                          Cat("kernel tree ", TreeShown(*served), " does not build ad-hoc modules: its kernels.toml (",
                              tree.source_dir().string(),
                              ") must say `adhoc_modules = true` for clients to send load_jit specs over its files")),
                      kReasonAdhocNotAllowed);
  }
  if (served->lock != nullptr) {
    return WithReason(
        absl::FailedPreconditionError(
            Cat("kernel tree ", TreeShown(*served), " is locked (", served->lock->origin,
                "): only the instantiations its lock lists are served, and an ad-hoc module is none of them; declare "
                "the module in kernels.toml, lint and lock it")),
        kReasonAdhocNotAllowed);
  }
  if (tree.manifest().Find(bare) != nullptr) {
    return absl::InvalidArgumentError(Cat(qualified, " is a declared kernel of tree ", TreeShown(*served),
                                          ": request it by name, or give the ad-hoc module another name"));
  }
  if (!req.params.empty() || !req.options.empty()) {
    return absl::InvalidArgumentError(Cat("ad-hoc module ", qualified,
                                          " takes no params or request options: its exports and nvcc options are "
                                          "in its spec"));
  }
  const AdhocModule& spec = *req.module;
  if (spec.tree_fingerprint != tree.adhoc_fingerprint()) {
    const std::string theirs = spec.tree_fingerprint.empty() ? std::string("names none")
                                                             : Cat("is ", spec.tree_fingerprint.substr(0, 16), "…");
    return WithReason(
        absl::FailedPreconditionError(
            Cat("ad-hoc module ", qualified, ": the client's copy of kernel tree ", TreeShown(*served),
                " differs from the ", "daemon's (the request's fingerprint ", theirs, ", the daemon's ",
                tree.adhoc_fingerprint().substr(0, 16), "… over ", tree.source_dir().string(),
                "): a module built from the daemon's files would not be the code the client ships; serve the same tree "
                "files on both sides")),
        kReasonTreeMismatch);
  }
  JITD_ASSIGN_OR_RETURN(KernelDef def, AdhocKernelDef(qualified, spec));
  def.name = bare;
  absl::StatusOr<std::vector<std::string>> closure = ModuleClosure(tree.files(), def);
  if (!closure.ok()) {
    return absl::Status(closure.status().code(), Cat("ad-hoc module ", qualified, " in ", tree.source_dir().string(),
                                                     ": ", closure.status().message()));
  }
  std::vector<compiler::CompileHeader> files;
  for (const std::string& path : *closure) files.push_back(compiler::CompileHeader{path, path, *tree.File(path)});
  ResolvedKernel out;
  out.kernel = qualified;
  out.tree = served->name;
  out.arch = req.arch.empty() ? default_arch_ : req.arch;
  JITD_RETURN_IF_ERROR(ValidateArch(out.arch, toolchain_));
  return ResolveModule(*served, files, def, {}, std::move(out));
}

}  // namespace jitd::manifest
