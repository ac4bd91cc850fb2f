// Request -> NVRTC program + content key.
#include <algorithm>
#include <cctype>
#include <set>

#include "jitd/base/error_reason.h"
#include "jitd/base/kernel_params.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "manifest/lock.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace {

using text::Cat;
using text::Join;

constexpr const char* kRandomSeedOption = "-frandom-seed=jitd";
// NVRTC otherwise also looks an #include up beside the program's name,
// which is relative to the worker's working directory: a file found there
// is in no key (and NVRTC's log would quote it). The tree's headers are
// given by name and the toolkit's by -I; nothing else is read.
constexpr const char* kNoSourceIncludeOption = "--no-source-include";

// Kernel names are dotted identifiers; anything longer is not one of ours.
constexpr size_t kMaxKernelName = 128;

std::string Describe(const ParamDef& p) {
  std::vector<std::string> values;
  for (const auto& v : p.values) values.push_back(v.first);
  return Cat(p.name, " (", Join(values, "|"), p.default_value ? Cat(", default ", *p.default_value) : "", ")");
}

std::string DescribeParams(const KernelDef& k) {
  if (k.params.empty()) return "it takes no parameters";
  std::vector<std::string> parts;
  for (const auto& p : k.params) parts.push_back(Describe(p));
  return Cat("its parameters: ", Join(parts, ", "));
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out.push_back(std::isprint(static_cast<unsigned char>(c)) ? c : '?');
  if (s.size() > 64) out += "...";
  return out;
}

// The key `key` had while a tree's name was part of keys (jitd 0.2): what
// a lock written then lists, and what a cache filled then holds.
std::string NamedKey(const ServedTree& served, keys::KeyInputs& key) {
  if (served.name.empty()) return "";
  key.tree = served.name;
  std::string named = keys::ContentKey(key);
  key.tree.clear();
  return named;
}

}  // namespace

std::string QualifiedName(std::string_view tree, std::string_view kernel) {
  return tree.empty() ? std::string(kernel) : Cat(tree, "/", kernel);
}

absl::Status ValidateTreeName(std::string_view name) {
  auto ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; };
  if (name.empty() || name.size() > 64 || !std::isalpha(static_cast<unsigned char>(name.front())) ||
      !std::all_of(name.begin(), name.end(), ok)) {
    return absl::InvalidArgumentError(Cat("tree name '", Printable(name),
                                          "' is not one: a letter, then letters, digits, '_', '-' or '.' (at most "
                                          "64), as in --kernels sglang=/usr/share/jitd/kernels"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Resolver>> Resolver::Create(std::shared_ptr<const KernelTree> tree, Toolchain toolchain,
                                                           std::string default_arch) {
  return Create(std::vector<ServedTree>{ServedTree{"", std::move(tree), nullptr}}, std::move(toolchain),
                std::move(default_arch));
}

absl::StatusOr<std::unique_ptr<Resolver>> Resolver::Create(std::vector<ServedTree> trees, Toolchain toolchain,
                                                           std::string default_arch) {
  if (auto s = ValidateArch(default_arch, toolchain); !s.ok()) {
    return absl::InvalidArgumentError(Cat("default ", s.message()));
  }
  if (trees.empty()) return absl::InvalidArgumentError("no kernel tree to serve");
  std::set<std::string> tree_names;
  for (const ServedTree& t : trees) {
    if (t.name.empty() && trees.size() > 1) {
      return absl::InvalidArgumentError(
          Cat("with ", trees.size(),
              " kernel trees each needs a name (--kernels NAME=DIR): ", t.tree->source_dir().string(), " has none"));
    }
    if (!t.name.empty()) JITD_RETURN_IF_ERROR(ValidateTreeName(t.name));
    if (!tree_names.insert(t.name).second)
      return absl::InvalidArgumentError(Cat("two kernel trees are named ", t.name));
  }
  std::unique_ptr<Resolver> r(new Resolver());
  for (const ServedTree& t : trees) {
    auto& by_source = r->headers_.emplace_back();
    auto& by_module = r->module_files_.emplace_back();
    for (const auto& k : t.tree->manifest().kernels) {
      if (k.is_module()) {
        auto closure = ModuleClosure(t.tree->files(), k);
        if (!closure.ok()) {
          return absl::Status(closure.status().code(),
                              Cat("kernel ", QualifiedName(t.name, k.name), " in ", t.tree->source_dir().string(), ": ",
                                  closure.status().message()));
        }
        for (const std::string& path : *closure) {
          by_module[k.name].push_back(compiler::CompileHeader{path, path, *t.tree->File(path)});
        }
        continue;
      }
      if (by_source.count(k.source)) continue;
      auto names = keys::IncludeNames(t.tree->files(), k.source);
      if (!names.ok()) {
        return absl::Status(names.status().code(), Cat("kernel ", QualifiedName(t.name, k.name), " in ",
                                                       t.tree->source_dir().string(), ": ", names.status().message()));
      }
      auto& headers = by_source[k.source];
      for (const keys::IncludeName& name : *names) {
        const std::string* content = t.tree->File(name.path);
        if (!content) return absl::InternalError(Cat("include closure names ", name.path, ", not in the kernel tree"));
        headers.push_back(compiler::CompileHeader{name.name, name.path, *content});
      }
    }
  }
  r->trees_ = std::move(trees);
  r->toolchain_ = std::move(toolchain);
  r->default_arch_ = std::move(default_arch);
  return r;
}

absl::StatusOr<std::unique_ptr<Resolver>> Resolver::WithToolchain(Toolchain toolchain) const {
  return Create(trees_, std::move(toolchain), default_arch_);
}

absl::StatusOr<std::unique_ptr<Resolver>> Resolver::WithTree(ServedTree tree) const {
  std::vector<ServedTree> trees = trees_;
  auto same = std::find_if(trees.begin(), trees.end(), [&](const ServedTree& t) { return t.name == tree.name; });
  if (same == trees.end()) return absl::NotFoundError(Cat("no kernel tree named '", tree.name, "' is served"));
  *same = std::move(tree);
  return Create(std::move(trees), toolchain_, default_arch_);
}

std::vector<TreeKernel> Resolver::Kernels() const {
  std::vector<TreeKernel> out;
  for (const ServedTree& t : trees_) {
    for (const KernelDef& k : t.tree->manifest().kernels) out.push_back({&t, &k, QualifiedName(t.name, k.name)});
  }
  return out;
}

absl::StatusOr<TreeKernel> Resolver::FindKernel(std::string_view name) const {
  const size_t slash = name.find('/');
  std::vector<TreeKernel> found;
  for (const ServedTree& t : trees_) {
    std::string_view bare = name;
    if (slash != std::string_view::npos) {
      if (name.substr(0, slash) != t.name) continue;
      bare = name.substr(slash + 1);
    }
    if (const KernelDef* k = t.tree->manifest().Find(bare)) found.push_back({&t, k, QualifiedName(t.name, k->name)});
  }
  if (found.size() == 1) return found.front();
  if (found.size() > 1) {
    std::vector<std::string> names;
    for (const TreeKernel& k : found) names.push_back(k.name);
    return absl::InvalidArgumentError(
        Cat("kernel '", Printable(name), "' is in ", found.size(), " kernel trees: ask for ", Join(names, " or ")));
  }
  std::vector<std::string> every;
  for (const TreeKernel& k : Kernels()) every.push_back(k.name);
  auto close = text::CloseMatches(name, every, 3);
  std::string tree_note;
  if (slash != std::string_view::npos && std::none_of(trees_.begin(), trees_.end(), [&](const ServedTree& t) {
        return t.name == name.substr(0, slash);
      })) {
    std::vector<std::string> trees;
    for (const ServedTree& t : trees_) trees.push_back(t.name.empty() ? "(unnamed)" : t.name);
    tree_note =
        Cat(" (no kernel tree '", Printable(name.substr(0, slash)), "' is served; trees: ", Join(trees, ", "), ")");
  }
  return absl::NotFoundError(Cat("unknown kernel '", Printable(name), "'", tree_note,
                                 close.empty() ? std::string("; `jitctl kernels` lists the kernels this daemon has")
                                               : Cat("; did you mean ", Join(close, " or "), "?")));
}

absl::StatusOr<ResolvedKernel> Resolver::Resolve(const KernelRequest& req) const {
  // Bounds the memo; far above the instantiations a manifest has times a
  // few archs and option sets.
  constexpr size_t kMaxMemo = 4096;
  // Every field length-prefixed, and each list by its count: no field's
  // bytes can pass for a separator, so two different requests never share
  // a memo entry (an arch spelling "sm_90<sep>dtype=fp32" must be refused,
  // not answered with what a valid request resolved to).
  std::string id;
  const auto field = [&id](std::string_view f) { text::Append(id, f.size(), ':', f); };
  field(req.kernel);
  field(req.arch);
  text::Append(id, req.params.size(), '#');
  for (const auto& [name, value] : req.params) {
    field(name);
    field(value);
  }
  text::Append(id, req.options.size(), '#');
  for (const auto& o : req.options) field(o);
  if (req.module != nullptr) {
    const AdhocModule& spec = *req.module;
    for (const auto* list : {&spec.sources, &spec.include_dirs, &spec.options}) {
      text::Append(id, list->size(), '#');
      for (const std::string& item : *list) field(item);
    }
    text::Append(id, spec.exports.size(), '#');
    for (const auto& [name, expression] : spec.exports) {
      field(name);
      field(expression);
    }
    field(spec.tree_fingerprint);
  }
  {
    std::lock_guard lock(memo_mu_);
    if (auto it = memo_.find(id); it != memo_.end()) return it->second;
  }
  auto resolved = ResolveUncached(req);
  if (resolved.ok()) {
    std::lock_guard lock(memo_mu_);
    if (memo_.size() >= kMaxMemo) memo_.clear();
    memo_.emplace(std::move(id), *resolved);
  }
  return resolved;
}

absl::StatusOr<ResolvedKernel> Resolver::ResolveUncached(const KernelRequest& req) const {
  if (req.kernel.empty()) return absl::InvalidArgumentError("no kernel named: set the request's kernel field");
  if (req.kernel.size() > kMaxKernelName) {
    return absl::InvalidArgumentError(Cat("kernel name of ", req.kernel.size(), " characters is not a kernel name"));
  }
  if (req.module != nullptr) return ResolveAdhoc(req);
  JITD_ASSIGN_OR_RETURN(const TreeKernel found, FindKernel(req.kernel));
  const ServedTree& served = *found.tree;
  const KernelTree& tree = *served.tree;
  const Manifest& m = tree.manifest();
  const KernelDef* def = found.def;
  const size_t tree_index = static_cast<size_t>(&served - trees_.data());
  ResolvedKernel out;
  out.kernel = found.name;
  out.tree = served.name;
  for (const auto& param : req.params) {
    const std::string& name = param.first;  // (clang 14 cannot capture a structured binding)
    bool known = std::any_of(def->params.begin(), def->params.end(), [&](const ParamDef& p) { return p.name == name; });
    if (!known) {
      return absl::InvalidArgumentError(
          Cat("kernel ", def->name, " has no parameter '", Printable(name), "'; ", DescribeParams(*def)));
    }
  }
  std::map<std::string, std::string> cpp;     // param -> C++ template argument text
  std::map<std::string, std::string> chosen;  // every param, defaults filled in
  for (const auto& p : def->params) {
    auto it = req.params.find(p.name);
    std::string value;
    if (it != req.params.end()) {
      value = it->second;
    } else if (p.default_value) {
      value = *p.default_value;
    } else {
      return absl::InvalidArgumentError(Cat("kernel ", def->name, " needs parameter ", Describe(p)));
    }
    auto v = std::find_if(p.values.begin(), p.values.end(), [&](const auto& pv) { return pv.first == value; });
    if (v == p.values.end()) {
      return absl::InvalidArgumentError(
          Cat(p.name, "=", Printable(value), " is not allowed for kernel ", def->name, "; ", Describe(p)));
    }
    cpp[p.name] = v->second;
    chosen[p.name] = value;
  }
  out.params = CanonicalParams(chosen);
  out.arch = req.arch.empty() ? default_arch_ : req.arch;
  JITD_RETURN_IF_ERROR(ValidateArch(out.arch, toolchain_));
  JITD_ASSIGN_OR_RETURN(auto options, CanonicalRequestOptions(req.options));
  out.request_options = options;
  if (def->is_module())
    return ResolveModule(served, module_files_[tree_index].at(def->name), *def, cpp, std::move(out));

  compiler::CompileJob& job = out.job;
  job.program_name = def->source;
  job.source = *tree.File(def->source);
  job.headers = headers_[tree_index].at(def->source);
  job.log_root = tree.source_dir().string();
  job.toolkit_fingerprint = toolchain_.identity;
  job.use_pch = def->pch;
  for (const auto& tmpl : def->name_expressions) {
    std::string e = tmpl;
    for (const auto& [name, text] : cpp) {
      std::string placeholder = Cat("{", name, "}");
      for (size_t pos = e.find(placeholder); pos != std::string::npos; pos = e.find(placeholder, pos + text.size())) {
        e.replace(pos, placeholder.size(), text);
      }
    }
    job.name_expressions.push_back(std::move(e));
  }
  job.options = m.default_options;
  job.options.insert(job.options.end(), def->options.begin(), def->options.end());
  job.options.insert(job.options.end(), out.request_options.begin(), out.request_options.end());
  job.options.push_back(Cat("-arch=", out.arch));
  // NVRTC names internal symbols with a random number unless seeded; the
  // seed makes a compile reproducible byte for byte, so that any cubin in
  // the cache (or the shared tier) can be checked against a fresh compile.
  job.options.push_back(kRandomSeedOption);
  job.options.push_back(kNoSourceIncludeOption);
  job.options.push_back(Cat("-I", toolchain_.cccl_include.string()));
  job.options.push_back(Cat("-I", toolchain_.cuda_include.string()));

  keys::KeyInputs key;
  key.nvrtc_version = toolchain_.nvrtc_version;
  key.toolkit_fingerprint = toolchain_.fingerprint;
  key.nvrtc_library_fingerprint = toolchain_.nvrtc_library_fingerprint;
  key.arch = out.arch;
  key.options = job.options;
  key.name_expressions = job.name_expressions;
  // Exactly what NVRTC is given: the program under its name, every header
  // under every name it is given by.
  key.sources.emplace_back(job.program_name, job.source);
  for (const compiler::CompileHeader& header : job.headers) key.sources.emplace_back(header.name, header.content);
  out.key = keys::ContentKey(key);
  out.named_key = NamedKey(served, key);
  job.digest = compiler::JobDigest(job);
  if (served.lock != nullptr) JITD_RETURN_IF_ERROR(CheckLock(served, *def, out));
  return out;
}

absl::StatusOr<ResolvedKernel> Resolver::ResolveModule(const ServedTree& served,
                                                       const std::vector<compiler::CompileHeader>& files,
                                                       const KernelDef& def,
                                                       const std::map<std::string, std::string>& cpp,
                                                       ResolvedKernel out) const {
  if (toolchain_.modules == nullptr) {
    return absl::FailedPreconditionError(Cat("kernel ", out.kernel,
                                             " is a module (host+device, built by nvcc), which this program does "
                                             "not build"));
  }
  absl::StatusOr<std::shared_ptr<const ModuleToolchain>> detected = toolchain_.modules->Get();
  if (!detected.ok()) {
    return absl::FailedPreconditionError(
        Cat("kernel ", out.kernel, " is a module (host+device, built by nvcc): ", detected.status().message()));
  }
  if (!out.request_options.empty()) {
    return absl::InvalidArgumentError(Cat("kernel ", out.kernel,
                                          " is a module: request options are for NVRTC kernels (its nvcc options "
                                          "are the manifest's)"));
  }
  const ModuleToolchain& tools = **detected;
  const Manifest& m = served.tree->manifest();
  compiler::CompileJob& job = out.job;
  job.kind = compiler::ArtifactKind::kSharedObject;
  job.program_name = kModuleUnitName;
  job.source = ModuleUnit(m, def, cpp);
  job.headers = files;
  job.log_root = served.tree->source_dir().string();
  job.toolkit_fingerprint = toolchain_.identity;
  for (const auto& [name, expression] : def.exports) job.name_expressions.push_back(name);
  compiler::ModuleBuild& build = job.module;
  build.nvcc = tools.nvcc.string();  // empty when serve-only: the build is refused
  build.unavailable = tools.unavailable;
  build.host_cxx = tools.host_cxx.string();
  build.compile_options = m.default_options;
  build.compile_options.insert(build.compile_options.end(), def.options.begin(), def.options.end());
  for (std::string& option : ModuleArchOptions(out.arch, m.arch_macro)) build.compile_options.push_back(option);
  build.compile_options.push_back("-Xcompiler=-fPIC");
  // The device code stays as the guard reads it (module_check.cpp):
  // compressed fatbin entries it cannot open.
  build.compile_options.push_back("--no-compress");
  for (const std::string& dir : def.include_dirs) build.compile_options.push_back(Cat("-I", dir));
  // Paths of the declared roots: where they are is not part of the key,
  // their content is (tools.fingerprint).
  std::vector<std::string> root_options;
  for (const auto& dir : tools.ffi_include) root_options.push_back(Cat("-I", dir.string()));
  build.compile_options.insert(build.compile_options.end(), root_options.begin(), root_options.end());
  build.link_options = {Cat("-L", tools.ffi_lib_dir.string()), "-ltvm_ffi", "-lcudart"};
  build.read_roots = tools.read_roots;
  build.toolchain_fingerprint = tools.fingerprint;

  keys::KeyInputs key;
  // The module toolchain's fingerprint covers the toolkit headers nvcc
  // reads; NVRTC's fields stay out, so that a serve-only daemon keys as
  // the bundle's builder did on any toolkit.
  key.nvrtc_version = Cat("module ", tools.nvcc_version);
  key.arch = out.arch;
  key.options.assign(build.compile_options.begin(), build.compile_options.end() - root_options.size());
  key.name_expressions = job.name_expressions;
  key.sources.emplace_back(job.program_name, job.source);
  for (const compiler::CompileHeader& file : job.headers) key.sources.emplace_back(file.name, file.content);
  key.module_toolchain = tools.fingerprint;
  // -I options are left out of key.options (the toolkit's are machine
  // paths); a module's include dirs decide which staged file an #include
  // means, so they join the key here, in order.
  key.module_options = {"-shared", "-ltvm_ffi", "-lcudart"};
  for (const std::string& dir : def.include_dirs) key.module_options.push_back(Cat("include-dir=", dir));
  out.compiler = ModuleBuilder(tools);
  out.key = keys::ContentKey(key);
  out.named_key = NamedKey(served, key);
  job.digest = compiler::JobDigest(job);
  if (served.lock != nullptr) JITD_RETURN_IF_ERROR(CheckLock(served, def, out));
  return out;
}

absl::Status Resolver::CheckLock(const ServedTree& served, const KernelDef& def, const ResolvedKernel& resolved) const {
  const KernelLock& lock = *served.lock;
  const std::string what =
      text::Instantiation(resolved.kernel, resolved.params, resolved.arch, resolved.request_options);
  const LockEntry* entry = lock.Find(def.name, resolved.params, resolved.arch);
  if (entry == nullptr || !resolved.request_options.empty()) {
    return WithReason(
        absl::FailedPreconditionError(
            Cat(what, " is not in ", lock.origin, ", the lock of kernel tree ",
                served.name.empty() ? std::string("(unnamed)") : served.name,
                ": only the instantiations `jitd lint --write-lock` wrote there are served (lint and lock again to add "
                "it)")),
        kReasonLockViolation);
  }
  if (entry->key != resolved.key && entry->key != resolved.named_key) {
    return WithReason(
        absl::FailedPreconditionError(Cat(what, " is locked with key ", entry->key.substr(0, 16), "… in ", lock.origin,
                                          ", but its sources and "
                                          "toolkit here give ",
                                          resolved.key.substr(0, 16),
                                          "…: this is not what was linted (lint and lock again, "
                                          "or serve the locked sources and toolkit)")),
        kReasonLockViolation);
  }
  return absl::OkStatus();
}

}  // namespace jitd::manifest
