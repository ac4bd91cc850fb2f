// The kernel manifest and request resolution: the one public header of
// `jitd_manifest`.
//
// kernels/kernels.toml names every kernel a client may ask for, its source,
// its name-expression template and its parameters (the format is described at
// the top of kernels/kernels.toml). Resolving a request turns
//   (kernel, params, arch, options)
// into an NVRTC program (compiler::CompileJob) and its content key, or into a
// precise error a person can act on:
//   NOT_FOUND          unknown kernel (the message names close matches)
//   INVALID_ARGUMENT   unknown, missing or disallowed params; an arch NVRTC
//                      does not support; an option outside the allow-list
//
// The files of the kernels directory a compile can reach are read once into
// a KernelTree in memory; keys are computed from those bytes and a compile
// job carries the very same bytes to NVRTC (its source and headers, never an
// -I into the kernels tree, never a copy on disk), so an edit of kernels/ (or
// of any copy of it) while jitd runs can never put a cubin under the wrong
// key (a reload makes a new tree with new keys for what changed). Neither a
// manifest nor a request may add an option that makes NVRTC read a file
// (FileOptionProblem, CanonicalRequestOptions): what is hashed is what is
// compiled.
//
// Thread safety: Manifest, KernelTree and Resolver are immutable after
// construction and may be shared between threads.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/compile_job.h"
#include "compiler/toolkit_watch.h"
#include "manifest/adhoc_module.h"
#include "manifest/module_kernel.h"

namespace jitd::manifest {

// A kernel tree as configured: `--kernels [NAME=]DIR` (NAME "" = unnamed:
// bare kernel names).
struct TreeSource {
  std::string name;
  std::filesystem::path dir;
  bool operator==(const TreeSource&) const = default;
};

struct ParamDef {
  std::string name;  // "dtype"
  std::string type;  // "dtype" | "enum" | "int"
  // (request value, C++ template argument text), in manifest order.
  std::vector<std::pair<std::string, std::string>> values;
  std::optional<std::string> default_value;
};

// How a kernel is built: NVRTC into a cubin (device code only), or nvcc
// into a tvm-ffi shared object (host launchers beside device code, the
// form SGLang's and FlashInfer's JIT kernels have; module_kernel.h).
enum class KernelKind { kNvrtc, kModule };

struct KernelDef {
  std::string name;  // "diffusion.modulate_scale_shift"
  KernelKind kind = KernelKind::kNvrtc;
  // Relative to the kernels directory. A module's first `sources` entry (so
  // that whatever names a kernel's file names one).
  std::string source;
  std::string description;
  std::vector<std::string> name_expressions;  // with {param} placeholders
  std::vector<std::string> options;           // extra NVRTC options
  std::vector<ParamDef> params;
  // Header-heavy (CUB): compile workers keep a precompiled header for it.
  bool pch = false;
  int line = 0;  // where its [[kernel]] table starts in kernels.toml
  // The entry points' argument list, "(T* out, const T* x, int64_t n)"
  // (signature.h; the compile-all guard checks it against the compiled
  // entry points), and how to launch them, one line; "" when not given.
  std::string signature;
  std::string launch;
  // `signatures`: one argument list per entry point, in name_expressions'
  // order (entry points of different signatures); empty when `signature`
  // (or nothing) is declared.
  std::vector<std::string> entry_signatures;

  // The argument list declared for entry point `e`: its own, else the
  // kernel's `signature`; "" when none is declared.
  const std::string& SignatureOf(size_t e) const {
    return e < entry_signatures.size() ? entry_signatures[e] : signature;
  }
  // Every declared signature as one line: `signature`, or "EXPR (ARGS); ..."
  // for `signatures`.
  std::string SignatureText() const;

  // kind = "module" only (module_kernel.h): the files the generated unit
  // includes, in order; the directories nvcc searches (-I, relative to the
  // kernels directory); and the exports, (name, C++ expression with
  // {param} placeholders), in manifest order.
  std::vector<std::string> sources;
  std::vector<std::string> include_dirs;
  std::vector<std::pair<std::string, std::string>> exports;
  bool is_module() const { return kind == KernelKind::kModule; }
};

// The most instantiations one kernel tree may have: the sum over its
// kernels of each one's product of param value counts. What it protects:
// warm --all, lint, the compile-all guard and a lock list every
// instantiation of a tree and compile each, so a manifest of a few lines
// (six int params of ten values: 10^6) must not get that far. The shipped
// tree has 26, the largest test tree 64; Manifest::Parse refuses a manifest
// above it, naming the kernel, its count and this bound.
inline constexpr uint64_t kMaxInstantiationsPerTree = 4096;

// How many instantiations `kernel` has (the product of its params' value
// counts), without listing them; UINT64_MAX when that overflows.
uint64_t InstantiationCount(const KernelDef& kernel);

struct Manifest {
  int schema = 1;
  // The namespace every kernel, helper and type of the tree lives in
  // (`namespace = "sglang"` at the top of kernels.toml; sub-namespaces
  // allowed): the rule the namespace guard enforces for this tree. A C++
  // qualified name ("team" or "team::ops"); "sglang" when not given.
  std::string kernel_namespace = "sglang";
  // Whether kernels.toml says `namespace = ...` (else the rule is the
  // default, which messages about findings say).
  bool namespace_declared = false;
  std::vector<std::string> default_options;
  // `[defaults] arch_macro = "SGL_CUDA_ARCH"`: module kernels are compiled
  // with -D<it>=<arch number x 10> besides -DJITD_CUDA_ARCH; "" for none.
  std::string arch_macro;
  // `adhoc_modules = true`: clients may send module specs of their own
  // (load_jit's form, adhoc_module.h) to be built over this tree's files;
  // a tree that allows them may declare no [[kernel]] at all.
  bool adhoc_modules = false;
  std::vector<KernelDef> kernels;

  // Parses kernels.toml text. INVALID_ARGUMENT names the origin, line and
  // key of the first problem (unknown key, wrong type, duplicate kernel,
  // placeholder without a param, ...).
  static absl::StatusOr<Manifest> Parse(std::string_view toml, const std::string& origin);

  const KernelDef* Find(std::string_view name) const;
  // Up to `n` kernel names closest to `name` (edit distance, shared prefix).
  std::vector<std::string> CloseMatches(std::string_view name, size_t n = 3) const;
  // Every parameter combination of a kernel (the cartesian product of the
  // values), each as name -> request value.
  static std::vector<std::map<std::string, std::string>> Instantiations(const KernelDef& kernel);
};

// The files of a kernels directory a compile can reach, in memory. Compiles
// use these bytes (compiler::CompileJob::headers); nothing is read from the
// directory again.
class KernelTree {
 public:
  // Reads `dir` (which must hold kernels.toml) and parses the manifest.
  // Read: kernels.toml, every .cu, .cuda, .cuh, .h and .hpp file (what the
  // namespace guard scans), each kernel's source, and every file an
  // #include of a file read can mean (keys::IncludeDirectives), whatever
  // its name; other files are listed, never read. Refused, with a message
  // naming the file (INVALID_ARGUMENT unless said):
  //   - a symbolic link that resolves outside `dir`, or cannot be resolved
  //     (a loop, a target this user cannot reach); a dangling one is
  //     skipped, a link to a directory is not descended;
  //   - an #include in a file read that spells an absolute path or climbs
  //     out of `dir` (NVRTC would open it on the disk), naming file:line;
  //   - a file to read over 16 MiB (stat'ed first: refused unread), files
  //     read over 64 MiB in all, more than 100,000 entries
  //     (kernel_tree.cpp says what the bounds protect);
  //   - a directory or file this user cannot read (FAILED_PRECONDITION);
  //   - NOT_FOUND: no directory, or no kernels.toml in it.
  // Never throws: every filesystem error is one of these.
  static absl::StatusOr<std::shared_ptr<const KernelTree>> Load(const std::filesystem::path& dir);

  const Manifest& manifest() const { return manifest_; }
  // The directory it was read from (canonical): where NVRTC's log says the
  // files are, for the person who edits them.
  const std::filesystem::path& source_dir() const { return source_dir_; }
  // keys::TreeFingerprint of every file read (every file a
  // compile can reach is read; a file no kernel can reach and no guard
  // scans is not in it).
  const std::string& fingerprint() const { return fingerprint_; }
  // AdhocFingerprint of the files read: what a client's copy must have
  // for an ad-hoc module (a tree that allows them reads every file
  // IsAdhocTreeFile names).
  const std::string& adhoc_fingerprint() const { return adhoc_fingerprint_; }
  // File content by path relative to the kernels directory, or nullptr.
  const std::string* File(const std::string& relative) const;
  const std::map<std::string, std::string>& files() const { return files_; }

 private:
  Manifest manifest_;
  std::filesystem::path source_dir_;
  std::string fingerprint_;
  std::string adhoc_fingerprint_;
  std::map<std::string, std::string> files_;
};

// What NVRTC and the toolkit contribute to every compile and every key.
struct Toolchain {
  std::string nvrtc_version;  // "13.0"
  // NVRTC's supported real architectures, e.g. {75, 80, ..., 121}.
  std::vector<int> archs;
  std::filesystem::path cuda_include;  // /usr/local/cuda/include (--cuda-include)
  std::filesystem::path cccl_include;  // /usr/local/cuda/include/cccl
  std::string fingerprint;             // TreeFingerprint(cuda_include)
  // The NVRTC library files (libnvrtc, libnvrtc-builtins) and their content
  // fingerprint: part of every key, so a patch release of NVRTC gets new
  // keys although nvrtc_version stays "13.0".
  std::vector<std::filesystem::path> nvrtc_libraries;
  std::string nvrtc_library_fingerprint;
  // compiler::ToolkitIdentity::fingerprint: every job carries it
  // (CompileJob::toolkit_fingerprint) and the worker pool refuses the job
  // once the toolkit on disk is another.
  std::string identity;
  // nvcc, the host compiler and tvm-ffi, for module kernels
  // (module_kernel.h), detected on first use; null when this program
  // builds no modules (a request for a module kernel is then refused).
  std::shared_ptr<const ModuleToolchainSource> modules;

  // Asks the linked NVRTC for its version and architectures and
  // fingerprints the toolkit headers in `cuda_include` (about 30 MB read)
  // and the NVRTC libraries (~110 MB). With `memo_dir`, the fingerprints
  // are remembered there against the files' metadata
  // (keys::MemoizedTreeFingerprint): a later Detect with an unchanged
  // toolkit stats the files instead of reading them.
  static absl::StatusOr<Toolchain> Detect(const std::filesystem::path& cuda_include = compiler::kDefaultCudaInclude,
                                          const std::filesystem::path& memo_dir = {});
  // The same from an identity computed already (a ToolkitWatch's).
  static absl::StatusOr<Toolchain> FromIdentity(const compiler::ToolkitIdentity& identity);
};

// An arch name's parts: sm_90a is {90, 'a'}.
struct ArchName {
  int number = 0;
  char suffix = 0;  // 0, 'a' or 'f'
  // compute_XX: a virtual architecture. A compile for it yields PTX (which
  // the driver JIT-compiles for the GPU it loads on), not a cubin.
  bool virtual_arch = false;
};
// The spelling alone (sm_XX, sm_XXa, sm_XXf, or compute_ with the same
// numbers for PTX; no leading zero), whatever the toolchain supports: for
// filters over entries of any toolchain.
// INVALID_ARGUMENT saying what is wrong and how to write it.
absl::StatusOr<ArchName> ParseArchName(std::string_view arch);

// What a fleet fatbin holds for the fleet archs `archs` (sm_ ones): each of
// them, then the PTX of the lowest by number (compute_N without an 'a' or
// 'f' suffix, so that it runs on every later GPU). Empty for none.
std::vector<std::string> FleetTargets(const std::vector<std::string>& archs);

// Checks an arch name ("sm_90", "sm_90a", "sm_100f") against the toolchain.
// INVALID_ARGUMENT lists what is supported.
absl::Status ValidateArch(std::string_view arch, const Toolchain& toolchain);

// Checks and canonicalises request options (the allow-list): returns them
// sorted and de-duplicated. INVALID_ARGUMENT names the option and why.
absl::StatusOr<std::vector<std::string>> CanonicalRequestOptions(const std::vector<std::string>& options);
// Why a manifest's NVRTC option (an element of [defaults] or a kernel's
// `options`; `next` is the element after it, "" for none) is refused, or ""
// when it is not: any option that makes NVRTC (or ptxas) read or write a
// file (-I, --include-path, -include, --pre-include, -isystem, the
// precompiled-header options, --time, --fdevice-time-trace,
// --options-file), since a compile reads only the tree's bytes, which are
// in the key.
std::string FileOptionProblem(std::string_view option, std::string_view next);
// The allow-list, for messages and --help.
std::string AllowedOptionsSummary();

struct KernelRequest {
  // "kernel" (unambiguous among the served trees) or "tree/kernel".
  std::string kernel;
  std::map<std::string, std::string> params;
  std::string arch;  // empty = the resolver's default
  std::vector<std::string> options;
  // An ad-hoc module (adhoc_module.h): `kernel` then names it ("NAME" or
  // "TREE/NAME", NAME no kernel of the tree), and params and options are
  // empty. Null for a kernel of a manifest.
  std::shared_ptr<const AdhocModule> module = nullptr;
};

struct ResolvedKernel {
  std::string kernel;  // qualified (QualifiedName): "tree/kernel", or "kernel" in an unnamed tree
  std::string tree;    // the tree's name ("" for an unnamed tree)
  std::string params;  // canonical "k=v,k=v", sorted by k, defaults filled in
  std::string arch;
  std::vector<std::string> request_options;  // canonical
  std::string key;                           // content key (64 hex)
  // The key this instantiation had while the tree's name was part of keys
  // (jitd 0.2): what a lock or cache made then holds for it. "" for an
  // unnamed tree, whose keys never held a name. A lock listing it is
  // honoured; the rewarm copies an entry stored under it to `key`.
  std::string named_key;
  // What builds it, as entries and answers record it (nvrtc_version): ""
  // for NVRTC (the toolchain's version), "nvcc V13.0.88; tvm-ffi 0.1.15"
  // for a module (a client checks its tvm-ffi against it).
  std::string compiler;
  compiler::CompileJob job;
};

struct KernelLock;  // lock.h

// One kernel tree as the daemon serves it.
struct ServedTree {
  // `--kernels NAME=DIR`: its kernels are "NAME/kernel" and NAME is part of
  // their keys. "" for the one tree of `--kernels DIR`, served as before:
  // bare names, the keys they always had.
  std::string name;
  std::shared_ptr<const KernelTree> tree;
  // `--lock FILE`: only the instantiations it lists, with the keys it lists,
  // are served; null when the tree is not locked.
  std::shared_ptr<const KernelLock> lock;
};

// "tree/kernel", or `kernel` for the unnamed tree.
std::string QualifiedName(std::string_view tree, std::string_view kernel);
// The NVRTC this process loaded, "13.0" ("unknown" if it cannot say).
std::string NvrtcVersion();

// For messages about namespace findings: "" when `manifest` declares its
// namespace; else that kernels.toml sets none, so the rule is the default,
// and how to set another.
std::string UndeclaredNamespaceNote(const Manifest& manifest);

// A tree name: a letter, then letters, digits, '_', '-' or '.', at most 64.
// INVALID_ARGUMENT saying how to write one.
absl::Status ValidateTreeName(std::string_view name);

// A kernel of one of the served trees.
struct TreeKernel {
  const ServedTree* tree = nullptr;
  const KernelDef* def = nullptr;
  std::string name;  // qualified
};

class Resolver {
 public:
  // Computes every kernel's include closure once (the trees are immutable).
  // INVALID_ARGUMENT for a default arch the toolchain does not support, a
  // bad or repeated tree name, or an unnamed tree beside others (several
  // trees must each be named, or their bare names would change meaning
  // when one is added).
  static absl::StatusOr<std::unique_ptr<Resolver>> Create(std::vector<ServedTree> trees, Toolchain toolchain,
                                                          std::string default_arch);
  // One unnamed tree.
  static absl::StatusOr<std::unique_ptr<Resolver>> Create(std::shared_ptr<const KernelTree> tree, Toolchain toolchain,
                                                          std::string default_arch);

  // Thread-safe; successful resolutions are memoized.
  // Besides Manifest's errors: NOT_FOUND naming the trees for a qualified
  // name whose tree is not served; INVALID_ARGUMENT listing the candidates
  // for a bare name several trees have; FAILED_PRECONDITION naming the lock
  // for an instantiation a locked tree's lock does not list (or lists with
  // another key: its sources or toolkit are not the ones locked).
  absl::StatusOr<ResolvedKernel> Resolve(const KernelRequest& request) const;

  // The kernel `name` names ("tree/kernel", or a bare name one tree has).
  absl::StatusOr<TreeKernel> FindKernel(std::string_view name) const;
  // Every kernel of every tree, tree by tree in serving order.
  std::vector<TreeKernel> Kernels() const;

  // The same kernels under another toolchain (after a toolkit change): new
  // keys for everything, an empty memo.
  absl::StatusOr<std::unique_ptr<Resolver>> WithToolchain(Toolchain toolchain) const;
  // The same trees with `tree` in place of the one of its name (a reload
  // of one tree): the others keep their bytes and keys.
  absl::StatusOr<std::unique_ptr<Resolver>> WithTree(ServedTree tree) const;

  const std::vector<ServedTree>& trees() const { return trees_; }
  // The first tree (the only one for lint, warm and a daemon of one tree).
  const KernelTree& tree() const { return *trees_.front().tree; }
  const Toolchain& toolchain() const { return toolchain_; }
  const std::string& default_arch() const { return default_arch_; }

 private:
  Resolver() = default;
  std::vector<ServedTree> trees_;
  Toolchain toolchain_;
  std::string default_arch_;
  absl::StatusOr<ResolvedKernel> ResolveUncached(const KernelRequest& request) const;
  absl::Status CheckLock(const ServedTree& tree, const KernelDef& def, const ResolvedKernel& resolved) const;

  // Per tree (as trees_), per kernel source: every project header it can
  // include, under every name an #include spells it by
  // (keys::IncludeNames), with its content.
  std::vector<std::map<std::string, std::vector<compiler::CompileHeader>>> headers_;
  // Per tree, per module kernel (by name): the tree files its build may
  // read (ModuleClosure), each staged under its path.
  std::vector<std::map<std::string, std::vector<compiler::CompileHeader>>> module_files_;
  absl::StatusOr<ResolvedKernel> ResolveModule(const ServedTree& served,
                                               const std::vector<compiler::CompileHeader>& files, const KernelDef& def,
                                               const std::map<std::string, std::string>& cpp, ResolvedKernel out) const;
  // A request with a module spec (adhoc_resolver.cpp).
  absl::StatusOr<ResolvedKernel> ResolveAdhoc(const KernelRequest& request) const;
  absl::StatusOr<const ServedTree*> AdhocTree(std::string_view tree_name, bool named) const;
  // Requests resolved before, by their exact text: a repeated request (every
  // hit) costs a lookup instead of a SHA-256 over the include closure. The
  // trees are immutable, so an entry never goes stale; a reload is a new
  // Resolver with an empty memo.
  mutable std::mutex memo_mu_;
  mutable std::unordered_map<std::string, ResolvedKernel> memo_;
};

}  // namespace jitd::manifest
