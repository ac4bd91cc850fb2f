// Module kernels (`kind = "module"` in kernels.toml): host+device files
// that nvcc builds into a tvm-ffi shared object, as SGLang's `load_jit` and
// FlashInfer build theirs. A module entry names the files its unit
// includes, the directories nvcc searches and the functions it exports:
//
//   [[kernel]]
//   name = "activation.silu_and_mul"
//   kind = "module"
//   sources = ["csrc/activation/silu_and_mul.cuh"]
//   include_dirs = ["csrc"]
//   exports = { silu_and_mul = "activation::silu_and_mul<{dtype}>" }
//   options = ["-std=c++20", "-O3", "--expt-relaxed-constexpr"]
//
// One instantiation (kernel, params, arch) is one shared object, built from
// a generated unit (ModuleUnit): each source #included in order, then
// inside `namespace <the tree's namespace>` one
//   TVM_FFI_DLL_EXPORT_TYPED_FUNC(<export>, (<expression>));
// per export, {param} replaced by the param's C++ text. The build (nvcc
// -c, then -shared against tvm-ffi and cudart) runs in a compile worker
// over a staged copy of the tree's files (compiler/module_build.h).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::manifest {

struct KernelDef;
struct Manifest;

// The generated unit's name in the staged tree: no kernel tree file may
// have it.
inline constexpr char kModuleUnitName[] = "__jitd_module__.cu";

// A C identifier: a letter or '_', then letters, digits or '_', at most 128.
bool IsCIdentifier(std::string_view name);

// Why nvcc option `option` (of a module kernel, or of [defaults] in a tree
// with module kernels) is refused, or "" when it is allowed. Modules take
// an allow-list: -std=c++17|c++20, -O0..-O3, --expt-relaxed-constexpr,
// --expt-extended-lambda (-extended-lambda), --use_fast_math, --fmad=,
// --ftz=, --prec-div=, --prec-sqrt= (true|false), -lineinfo, -DNAME[=V],
// -UNAME, -w, --diag-suppress=N[,N]. Anything else could read a file, pass
// options to the host compiler or linker, or change where outputs go.
std::string ModuleOptionProblem(std::string_view option);

// The tree files a module's build may read, relative to the kernels
// directory, sorted: each of `sources` and, transitively, every file an
// #include of a file in the set can mean (beside the including file for
// "x", then in each of `include_dirs`). Files outside the tree (tvm-ffi's,
// the toolkit's, the host compiler's) are not followed: their roots are
// fingerprinted whole (ModuleToolchain). NOT_FOUND names a source the tree
// does not have; INVALID_ARGUMENT a tree file named like the unit.
absl::StatusOr<std::vector<std::string>> ModuleClosure(const std::map<std::string, std::string>& files,
                                                       const KernelDef& kernel);

// The generated unit for `kernel` with `cpp` (param name -> C++ text).
std::string ModuleUnit(const Manifest& manifest, const KernelDef& kernel,
                       const std::map<std::string, std::string>& cpp);

// nvcc's options for `arch` (sm_90a, sm_100, compute_90): the -gencode
// (an sm_ arch gets its SASS, a compute_ arch its PTX), -DJITD_CUDA_ARCH
// with the arch's number times ten (sm_90a: 900), and the same for
// `arch_macro` when the tree names one.
std::vector<std::string> ModuleArchOptions(std::string_view arch, std::string_view arch_macro);

// Where the module toolchain comes from (`--nvcc`, `--host-cxx`,
// `--tvm-ffi-root`); empty fields are found (DetectModuleToolchain says how).
struct ModuleToolOptions {
  std::filesystem::path nvcc;
  std::filesystem::path host_cxx;
  std::filesystem::path tvm_ffi_root;
};

// What nvcc, the host compiler and tvm-ffi contribute to every module build
// and every module key.
struct ModuleToolchain {
  std::filesystem::path nvcc;      // absolute
  std::string nvcc_version;        // "V13.0.88", from nvcc --version
  std::filesystem::path host_cxx;  // absolute
  std::string host_cxx_version;    // --version's first line
  std::filesystem::path tvm_ffi_root;
  std::string tvm_ffi_version;                     // the package's, "0.1.15.post2"; "" when unknown
  std::vector<std::filesystem::path> ffi_include;  // tvm-ffi's include dirs
  std::filesystem::path ffi_lib_dir;               // holds libtvm_ffi.so
  // Canonical directories a build may read besides the staged tree: the
  // toolkit, tvm-ffi's include dirs, the host compiler's system include
  // dirs. The depfile of every build is checked against them.
  std::vector<std::string> read_roots;
  // SHA-256 over the versions, the files of every read root (the
  // toolkit's headers among them), the nvcc, host compiler and linker
  // programs and libtvm_ffi.so: the toolchain's part of every module key,
  // so a change of any of them makes new keys.
  std::string fingerprint;
  // Serve-only (ServeOnlyToolchain): why nothing can be built; nvcc is
  // then empty and a build is refused with this. "" for a real toolchain.
  std::string unavailable;
};

// Finds and fingerprints the module toolchain. Defaults: nvcc beside the
// toolkit of `cuda_include` (CUDA_ROOT/bin/nvcc); the host compiler `g++`
// on PATH; tvm-ffi from the JITD_TVM_FFI_ROOT environment variable, else
// the root found when jitd was built (deploy/install-deps.sh installs
// apache-tvm-ffi), else `python3 -c "import tvm_ffi"`. Fingerprints are
// memoized in `memo_dir` (keys::MemoizedTreeFingerprint: a start with
// unchanged files stats them). FAILED_PRECONDITION names what is missing and
// the flag that sets it.
absl::StatusOr<ModuleToolchain> DetectModuleToolchain(const ModuleToolOptions& options,
                                                      const std::filesystem::path& cuda_include,
                                                      const std::filesystem::path& memo_dir);

// What built a module, as its entry records it (EntryMeta::nvrtc_version):
// "nvcc V13.0.88; tvm-ffi 0.1.15.post2; toolchain <fingerprint>".
std::string ModuleBuilder(const ModuleToolchain& toolchain);
// A toolchain that builds nothing but keys as the one `builder` names
// (nvcc empty: a build is refused), or nullopt when `builder` is not one.
std::optional<ModuleToolchain> ServeOnlyToolchain(std::string_view builder);

// The module toolchain of a daemon or command, detected once, on first
// use: a daemon that serves no module kernel never runs nvcc or hashes the
// system headers. When detection fails and the mounted bundles hold
// modules (`bundled_builders`: cache::Bundle::module_builders), the
// toolchain that built them is taken to key requests, serve-only: a module
// in a bundle is served without nvcc on the host, a module not in one is
// refused saying so. Thread-safe.
class ModuleToolchainSource {
 public:
  ModuleToolchainSource(ModuleToolOptions options, std::filesystem::path cuda_include, std::filesystem::path memo_dir,
                        std::vector<std::string> bundled_builders = {});
  // One that answers `toolchain` without detecting anything (tests).
  explicit ModuleToolchainSource(ModuleToolchain toolchain);
  // DetectModuleToolchain's answer, the same on every call (a failure
  // too: restart with the tool installed, or the flag set).
  absl::StatusOr<std::shared_ptr<const ModuleToolchain>> Get() const;
  // The fingerprint a detection now gives (nvcc, the host compiler and
  // tvm-ffi as they are on disk: memoized, a stat pass when unchanged),
  // ignoring what Get() remembers: whether a build just made still
  // matches its key.
  absl::StatusOr<std::string> FingerprintNow() const;
  // The toolchain Get() detected, when it has and can build (not
  // serve-only); null before the first module request, or when detection
  // failed: then there is nothing on disk a change could differ from.
  std::shared_ptr<const ModuleToolchain> DetectedBuilder() const;
  const ModuleToolOptions& options() const { return options_; }

 private:
  ModuleToolOptions options_;
  std::filesystem::path cuda_include_;
  std::filesystem::path memo_dir_;
  std::vector<std::string> bundled_builders_;
  bool given_ = false;  // the toolchain was given outright: nothing on disk to detect
  mutable std::mutex mu_;
  mutable std::optional<absl::StatusOr<std::shared_ptr<const ModuleToolchain>>> detected_;
};

}  // namespace jitd::manifest
