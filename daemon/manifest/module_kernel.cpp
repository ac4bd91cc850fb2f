#include "manifest/module_kernel.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <set>

#include "compiler/command.h"
#include "jitd/base/digest.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/keys/content_key.h"
#include "jitd/keys/field_digest.h"
#include "manifest/manifest.h"
#include "spdlog/spdlog.h"

namespace jitd::manifest {
namespace {

namespace fs = std::filesystem;
using text::Cat;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool OneOf(std::string_view value, std::initializer_list<std::string_view> allowed) {
  return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

// A tree path `spelled` means from `dir` (a directory of the tree, "" for
// its root), lexically normal; "" when it leaves the tree.
std::string TreePath(const std::string& dir, const std::string& spelled) {
  if (spelled.empty() || spelled.front() == '/') return "";
  const fs::path joined = (fs::path(dir) / spelled).lexically_normal();
  const std::string out = joined.generic_string();
  if (out.empty() || out == "." || StartsWith(out, "../") || out == "..") return "";
  return out;
}

// The files of the tree's files map an #include of `spelled` in `file` can
// mean under nvcc's search: beside the including file, then each include
// dir (for <x> nvcc skips the first; keeping it only over-approximates).
std::vector<std::string> Candidates(const std::string& file, const std::string& spelled, const KernelDef& kernel) {
  std::vector<std::string> out;
  if (std::string p = TreePath(fs::path(file).parent_path().generic_string(), spelled); !p.empty()) out.push_back(p);
  for (const std::string& dir : kernel.include_dirs) {
    if (std::string p = TreePath(dir, spelled); !p.empty()) out.push_back(p);
  }
  return out;
}

// Where a host compiler program lives: `cxx -print-prog-name=NAME` answers
// a path, or the bare name when it uses PATH's.
fs::path ProgramPath(const fs::path& cxx, const std::string& name, const std::vector<std::string>& env) {
  auto out = compiler::CommandOutput({cxx.string(), Cat("-print-prog-name=", name)}, env);
  if (!out.ok()) return {};
  std::string path(Trim(*out));
  if (path.empty()) return {};
  if (path.front() == '/') return path;
  for (const char* dir : {"/usr/bin", "/bin"}) {
    if (access((fs::path(dir) / path).c_str(), X_OK) == 0) return fs::path(dir) / path;
  }
  return {};
}

fs::path FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  const std::string_view list = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t start = 0, end = 0; start <= list.size(); start = end + 1) {
    end = std::min(list.find(':', start), list.size());
    const std::string dir(list.substr(start, end - start));
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string FirstLine(std::string_view text) { return std::string(Trim(text.substr(0, text.find('\n')))); }

std::string LastLine(std::string_view text) {
  text = Trim(text);
  const size_t newline = text.rfind('\n');
  return std::string(newline == std::string_view::npos ? text : text.substr(newline + 1));
}

// tvm-ffi's package directory, by the rule DetectModuleToolchain states.
absl::StatusOr<fs::path> FindTvmFfi(const fs::path& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("JITD_TVM_FFI_ROOT"); env != nullptr && *env != '\0') return fs::path(env);
#ifdef JITD_DEFAULT_TVM_FFI_ROOT
  if (fs::exists(fs::path(JITD_DEFAULT_TVM_FFI_ROOT) / "include")) return fs::path(JITD_DEFAULT_TVM_FFI_ROOT);
#endif
  const fs::path python = FindOnPath("python3");
  if (!python.empty()) {
    // -I: isolated, so a tvm_ffi checkout in the working directory (or a
    // PYTHONPATH) cannot stand in for the installed package.
    auto out = compiler::CommandOutput(
        {python.string(), "-I", "-c", "import os, tvm_ffi; print(os.path.dirname(tvm_ffi.__file__))"},
        {"PATH=/usr/bin:/bin", "LC_ALL=C"});
    if (out.ok() && !Trim(*out).empty()) return fs::path(std::string(Trim(*out)));
  }
  return absl::FailedPreconditionError(
      "module kernels need tvm-ffi, and none was found: install apache-tvm-ffi (deploy/install-deps.sh does), or "
      "pass --tvm-ffi-root DIR (the tvm_ffi package directory, holding include/ and lib/libtvm_ffi.so)");
}

// "0.1.15.post2" from the dist-info beside the package; "" when not there.
std::string TvmFfiVersion(const fs::path& root) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "apache_tvm_ffi-";
    if (StartsWith(name, prefix) && name.size() > prefix.size() + 10 && name.substr(name.size() - 10) == ".dist-info") {
      return name.substr(prefix.size(), name.size() - prefix.size() - 10);
    }
  }
  return "";
}

absl::StatusOr<std::string> Fingerprint(const fs::path& dir, const fs::path& memo_dir, const std::string& tag) {
  if (memo_dir.empty()) return keys::TreeFingerprint(dir);
  return keys::MemoizedTreeFingerprint(
      dir, memo_dir / Cat("module-", tag, "-", digest::Sha256Hex(dir.string()).substr(0, 16)));
}

}  // namespace

bool IsCIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 128 || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string ModuleOptionProblem(std::string_view option) {
  const auto value_of = [&](std::string_view prefix) { return option.substr(prefix.size()); };
  if (OneOf(option, {"-std=c++17", "-std=c++20", "--std=c++17", "--std=c++20", "-O0", "-O1", "-O2", "-O3",
                     "--expt-relaxed-constexpr", "--expt-extended-lambda", "--extended-lambda", "-extended-lambda",
                     "--use_fast_math", "-use_fast_math", "-lineinfo", "--generate-line-info", "-w"})) {
    return "";
  }
  for (std::string_view flag :
       {"--fmad=", "--ftz=", "--prec-div=", "--prec-sqrt=", "-fmad=", "-ftz=", "-prec-div=", "-prec-sqrt="}) {
    if (StartsWith(option, flag)) {
      return OneOf(value_of(flag), {"true", "false"}) ? "" : Cat(flag, " takes true or false");
    }
  }
  for (std::string_view flag : {"-D", "-U"}) {
    if (!StartsWith(option, flag)) continue;
    const std::string_view macro = value_of(flag).substr(0, value_of(flag).find('='));
    if (!IsCIdentifier(macro) || (flag == "-U" && macro.size() != value_of(flag).size())) {
      return Cat("write ", flag, "NAME", flag == "-D" ? "[=VALUE]" : "", " in one element, NAME a C identifier");
    }
    return "";
  }
  if (StartsWith(option, "--diag-suppress=")) {
    const std::string_view list = value_of("--diag-suppress=");
    const bool digits = !list.empty() && std::all_of(list.begin(), list.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == ',';
    });
    return digits ? "" : "--diag-suppress= takes diagnostic numbers, comma-separated";
  }
  return "module kernels take an allow-list of nvcc options (-std=c++17|c++20, -O0..-O3, --expt-relaxed-constexpr, "
         "--expt-extended-lambda, --use_fast_math, --fmad=/--ftz=/--prec-div=/--prec-sqrt= true|false, -lineinfo, "
         "-DNAME[=VALUE], -UNAME, -w, --diag-suppress=N): others could read files no key covers, reach the host "
         "compiler or linker, or move outputs";
}

absl::StatusOr<std::vector<std::string>> ModuleClosure(const std::map<std::string, std::string>& files,
                                                       const KernelDef& kernel) {
  if (files.count(kModuleUnitName) != 0) {
    return absl::InvalidArgumentError(
        Cat("the tree has a file named ", kModuleUnitName, ", the name of the unit jitd generates: rename it"));
  }
  std::set<std::string> seen;
  std::deque<std::string> todo;
  for (const std::string& source : kernel.sources) {
    if (files.count(source) == 0) {
      return absl::NotFoundError(Cat("kernel ", kernel.name, ": source ", source, " is not in the kernel tree"));
    }
    if (seen.insert(source).second) todo.push_back(source);
  }
  while (!todo.empty()) {
    const std::string file = todo.front();
    todo.pop_front();
    for (const keys::IncludeDirective& directive : keys::IncludeDirectives(file, files.at(file))) {
      for (const std::string& candidate : Candidates(file, directive.spelled, kernel)) {
        if (files.count(candidate) != 0 && seen.insert(candidate).second) todo.push_back(candidate);
      }
    }
  }
  return std::vector<std::string>(seen.begin(), seen.end());
}

std::string ModuleUnit(const Manifest& manifest, const KernelDef& kernel,
                       const std::map<std::string, std::string>& cpp) {
  // The kernel's name is not in it: a module's key is what nvcc compiles,
  // so a declared module and an ad-hoc spec of the same unit share it.
  std::string unit = "// generated by jitd: the module's sources, then its exports\n";
  for (const std::string& source : kernel.sources) text::Append(unit, "#include \"", source, "\"\n");
  text::Append(unit, "#include <tvm/ffi/function.h>\n\nnamespace ", manifest.kernel_namespace, " {\n");
  for (const auto& [name, expression] : kernel.exports) {
    std::string e = expression;
    for (const auto& [param, value] : cpp) {
      const std::string placeholder = Cat("{", param, "}");
      for (size_t pos = e.find(placeholder); pos != std::string::npos; pos = e.find(placeholder, pos + value.size())) {
        e.replace(pos, placeholder.size(), value);
      }
    }
    text::Append(unit, "TVM_FFI_DLL_EXPORT_TYPED_FUNC(", name, ", (", e, "));\n");
  }
  text::Append(unit, "}  // namespace ", manifest.kernel_namespace, "\n");
  return unit;
}

std::vector<std::string> ModuleArchOptions(std::string_view arch, std::string_view arch_macro) {
  const absl::StatusOr<ArchName> name = ParseArchName(arch);
  if (!name.ok()) return {};
  const std::string suffix = name->suffix != 0 ? std::string(1, name->suffix) : std::string();
  const std::string virtual_arch = Cat("compute_", name->number, suffix);
  std::vector<std::string> out = {
      Cat("-gencode=arch=", virtual_arch, ",code=", name->virtual_arch ? virtual_arch : std::string(arch)),
      Cat("-DJITD_CUDA_ARCH=", name->number * 10)};
  if (!arch_macro.empty()) out.push_back(Cat("-D", arch_macro, "=", name->number * 10));
  return out;
}

namespace {

// Adds to `d` the fingerprints of the files a module build reads besides
// the staged tree, and fills t.read_roots: the read roots (the toolkit's
// headers, tvm-ffi's, the host compiler's system headers; a module key
// holds this and nothing of NVRTC's toolchain, so that a daemon keying by a
// bundle's builder, ServeOnlyToolchain, needs nothing of the host's
// toolkit), then the programs (nvcc's stages, the host compiler's, the
// linker) and the libraries linked against.
absl::Status FingerprintFiles(ModuleToolchain& t, const fs::path& cuda_include, const std::vector<std::string>& env,
                              const fs::path& memo_dir, keys::FieldDigest& d) {
  std::error_code ec;
  std::vector<fs::path> hashed_roots = {cuda_include};
  hashed_roots.insert(hashed_roots.end(), t.ffi_include.begin(), t.ffi_include.end());
  if (auto out = compiler::CommandOutput({t.host_cxx.string(), "-print-file-name=include"}, env); out.ok()) {
    const fs::path dir(std::string(Trim(*out)));
    if (dir.is_absolute() && fs::is_directory(dir, ec)) hashed_roots.push_back(dir);
  }
  for (const char* dir : {"/usr/local/include", "/usr/include"}) {
    if (fs::is_directory(dir, ec)) hashed_roots.push_back(dir);
  }
  for (const fs::path& root : hashed_roots) {
    const fs::path canonical = fs::weakly_canonical(root, ec);
    t.read_roots.push_back(canonical.string());
    JITD_ASSIGN_OR_RETURN(std::string fingerprint, Fingerprint(canonical, memo_dir, "tree"));
    d.Field("root", canonical.string());
    d.Field("root-fingerprint", fingerprint);
  }
  // The programs: nvcc's stages, the host compiler's, the linker, and the
  // libraries linked against.
  std::vector<fs::path> programs;
  const fs::path cuda_root = t.nvcc.parent_path().parent_path();
  for (const char* file :
       {"bin/nvcc", "bin/nvcc.profile", "bin/cudafe++", "bin/ptxas", "bin/fatbinary", "bin/nvlink", "bin/bin2c",
        "nvvm/bin/cicc", "nvvm/libdevice/libdevice.10.bc", "lib64/libcudart.so", "lib64/libcudart_static.a"}) {
    if (fs::exists(cuda_root / file, ec)) programs.push_back(cuda_root / file);
  }
  programs.push_back(t.host_cxx);
  for (const char* program : {"cc1plus", "as", "ld", "collect2"}) {
    if (fs::path p = ProgramPath(t.host_cxx, program, env); !p.empty()) programs.push_back(p);
  }
  programs.push_back(t.ffi_lib_dir / "libtvm_ffi.so");
  JITD_ASSIGN_OR_RETURN(std::string program_fingerprint,
                        memo_dir.empty() ? keys::FilesFingerprint(programs)
                                         : keys::MemoizedFilesFingerprint(programs, memo_dir / "module-programs"));
  d.Field("programs", program_fingerprint);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModuleToolchain> DetectModuleToolchain(const ModuleToolOptions& options, const fs::path& cuda_include,
                                                      const fs::path& memo_dir) {
  ModuleToolchain t;
  t.nvcc = options.nvcc.empty() ? cuda_include.parent_path() / "bin" / "nvcc" : options.nvcc;
  if (access(t.nvcc.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(Cat("module kernels need nvcc, and ", t.nvcc.string(),
                                             " is not an executable: install the CUDA toolkit's nvcc, or pass "
                                             "--nvcc PATH"));
  }
  t.host_cxx = options.host_cxx.empty() ? FindOnPath("g++") : options.host_cxx;
  if (t.host_cxx.empty() || access(t.host_cxx.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        Cat("module kernels need a host C++ compiler for nvcc, and ",
            t.host_cxx.empty() ? std::string("no g++ is on PATH") : Cat(t.host_cxx.string(), " is not an executable"),
            ": install g++ (build-essential), or pass --host-cxx PATH"));
  }
  std::error_code ec;
  t.nvcc = fs::absolute(t.nvcc, ec);
  t.host_cxx = fs::absolute(t.host_cxx, ec);
  const std::vector<std::string> env = {Cat("PATH=", t.host_cxx.parent_path().string(), ":/usr/bin:/bin"), "LC_ALL=C"};
  JITD_ASSIGN_OR_RETURN(std::string nvcc_version, compiler::CommandOutput({t.nvcc.string(), "--version"}, env));
  // "Cuda compilation tools, release 13.0, V13.0.88": its last word; the
  // whole text joins the fingerprint.
  const size_t release = nvcc_version.rfind(", V");
  t.nvcc_version = release == std::string::npos ? LastLine(nvcc_version)
                                                : FirstLine(std::string_view(nvcc_version).substr(release + 2));
  JITD_ASSIGN_OR_RETURN(std::string cxx_version, compiler::CommandOutput({t.host_cxx.string(), "--version"}, env));
  t.host_cxx_version = FirstLine(cxx_version);

  JITD_ASSIGN_OR_RETURN(t.tvm_ffi_root, FindTvmFfi(options.tvm_ffi_root));
  t.tvm_ffi_root = fs::absolute(t.tvm_ffi_root, ec);
  t.ffi_include = {t.tvm_ffi_root / "include"};
  t.ffi_lib_dir = t.tvm_ffi_root / "lib";
  if (!fs::exists(t.tvm_ffi_root / "include" / "tvm" / "ffi" / "function.h", ec) ||
      !fs::exists(t.ffi_lib_dir / "libtvm_ffi.so", ec)) {
    return absl::FailedPreconditionError(Cat("tvm-ffi root ", t.tvm_ffi_root.string(),
                                             " lacks include/tvm/ffi/function.h or lib/libtvm_ffi.so: pass "
                                             "--tvm-ffi-root the tvm_ffi package directory"));
  }
  t.tvm_ffi_version = TvmFfiVersion(t.tvm_ffi_root);

  keys::FieldDigest d;
  d.Field("jitd-module-toolchain", "1");
  d.Field("nvcc-version", nvcc_version);
  d.Field("host-cxx-version", t.host_cxx_version);
  d.Field("tvm-ffi-version", t.tvm_ffi_version);
  JITD_RETURN_IF_ERROR(FingerprintFiles(t, cuda_include, env, memo_dir, d));
  t.fingerprint = d.Hex();
  return t;
}

std::string ModuleBuilder(const ModuleToolchain& toolchain) {
  return Cat("nvcc ", toolchain.nvcc_version, "; tvm-ffi ",
             toolchain.tvm_ffi_version.empty() ? "unknown" : toolchain.tvm_ffi_version, "; toolchain ",
             toolchain.fingerprint);
}

std::optional<ModuleToolchain> ServeOnlyToolchain(std::string_view builder) {
  // The three fields ModuleBuilder writes, in its order.
  const std::string_view nvcc = "nvcc ", ffi = "; tvm-ffi ", tools = "; toolchain ";
  const size_t at_ffi = builder.find(ffi), at_tools = builder.find(tools);
  if (!StartsWith(builder, nvcc) || at_ffi == std::string_view::npos || at_tools == std::string_view::npos ||
      at_tools < at_ffi) {
    return std::nullopt;
  }
  ModuleToolchain t;
  t.nvcc_version = std::string(builder.substr(nvcc.size(), at_ffi - nvcc.size()));
  t.tvm_ffi_version = std::string(builder.substr(at_ffi + ffi.size(), at_tools - at_ffi - ffi.size()));
  t.fingerprint = std::string(builder.substr(at_tools + tools.size()));
  if (t.fingerprint.size() != 64) return std::nullopt;
  return t;
}

ModuleToolchainSource::ModuleToolchainSource(ModuleToolOptions options, fs::path cuda_include, fs::path memo_dir,
                                             std::vector<std::string> bundled_builders)
    : options_(std::move(options)),
      cuda_include_(std::move(cuda_include)),
      memo_dir_(std::move(memo_dir)),
      bundled_builders_(std::move(bundled_builders)) {}

ModuleToolchainSource::ModuleToolchainSource(ModuleToolchain toolchain)
    : given_(true),
      detected_(std::shared_ptr<const ModuleToolchain>(std::make_shared<ModuleToolchain>(std::move(toolchain)))) {}

absl::StatusOr<std::shared_ptr<const ModuleToolchain>> ModuleToolchainSource::Get() const {
  std::lock_guard lock(mu_);
  if (!detected_.has_value()) {
    absl::StatusOr<ModuleToolchain> found = DetectModuleToolchain(options_, cuda_include_, memo_dir_);
    std::optional<ModuleToolchain> serve_only;
    for (const std::string& builder : found.ok() ? std::vector<std::string>{} : bundled_builders_) {
      if ((serve_only = ServeOnlyToolchain(builder))) break;
    }
    if (found.ok()) {
      detected_ = std::shared_ptr<const ModuleToolchain>(std::make_shared<ModuleToolchain>(*std::move(found)));
    } else if (serve_only) {
      spdlog::warn("module kernels: {}; serving the modules of the mounted bundles only (built by nvcc {}, tvm-ffi {})",
                   std::string(found.status().message()), serve_only->nvcc_version, serve_only->tvm_ffi_version);
      serve_only->unavailable = std::string(found.status().message());
      detected_ = std::shared_ptr<const ModuleToolchain>(std::make_shared<ModuleToolchain>(*std::move(serve_only)));
    } else {
      detected_ = found.status();
    }
  }
  return *detected_;
}

std::shared_ptr<const ModuleToolchain> ModuleToolchainSource::DetectedBuilder() const {
  std::lock_guard lock(mu_);
  if (given_ || !detected_.has_value() || !detected_->ok() || !(**detected_)->unavailable.empty()) return nullptr;
  return **detected_;
}

absl::StatusOr<std::string> ModuleToolchainSource::FingerprintNow() const {
  if (given_) return (*Get())->fingerprint;
  JITD_ASSIGN_OR_RETURN(const ModuleToolchain now, DetectModuleToolchain(options_, cuda_include_, memo_dir_));
  return now.fingerprint;
}

}  // namespace jitd::manifest
