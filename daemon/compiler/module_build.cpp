#include "compiler/module_build.h"

#include <algorithm>
#include <chrono>

#include "compiler/command.h"
#include "compiler/nvrtc_program.h"
#include "guard/module_symbols.h"
#include "jitd/base/files.h"
#include "jitd/base/text.h"

namespace jitd::compiler {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using text::Cat;

// A staged file's path: relative, inside the tree, not the unit's name.
bool StageablePath(const std::string& path, const std::string& unit) {
  const fs::path p(path);
  if (path.empty() || p.is_absolute() || path == unit) return false;
  return std::none_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".." || part == "."; });
}

absl::Status Stage(const CompileJob& job, const fs::path& tree) {
  std::vector<std::pair<std::string, const std::string*>> files;
  files.emplace_back(job.program_name, &job.source);
  for (const CompileHeader& header : job.headers) {
    if (!StageablePath(header.path, job.program_name)) {
      return absl::InvalidArgumentError(Cat("module job names the file '", header.path, "', which cannot be staged"));
    }
    files.emplace_back(header.path, &header.content);
  }
  for (const auto& [path, content] : files) {
    const fs::path target = tree / path;
    if (absl::Status s = files::MakePrivateDirs(target.parent_path()); !s.ok()) return s;
    files::AtomicWrite how;
    how.sync = false;  // scratch: a crash empties it anyway
    if (absl::Status s = files::WriteFileAtomically(target, *content, how); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Every file the depfile names must be a staged file or lie under one of
// the read roots: what the key covers.
absl::Status CheckInputs(const CompileJob& job, const fs::path& tree, std::string_view depfile) {
  std::error_code ec;
  const fs::path staged = fs::weakly_canonical(tree, ec);
  for (const std::string& input : DepfileInputs(depfile)) {
    const fs::path p = fs::path(input).is_absolute() ? fs::path(input) : tree / input;
    const fs::path canonical = fs::weakly_canonical(p, ec);
    if (ec) return absl::FailedPreconditionError(Cat("cannot resolve '", input, "' from the depfile"));
    if (files::PathInside(staged, canonical)) continue;
    if (std::any_of(job.module.read_roots.begin(), job.module.read_roots.end(),
                    [&](const std::string& root) { return files::PathInside(fs::path(root), canonical); })) {
      continue;
    }
    return absl::FailedPreconditionError(
        Cat("the compile of ", job.program_name, " read ", canonical.string(),
            ", which is neither in the kernel tree nor under a fingerprinted root (",
            text::Join(job.module.read_roots, ", "),
            "): its bytes are not in the key, so the module is not kept (set --host-cxx, --nvcc or --tvm-ffi-root "
            "so that every header comes from a root jitd fingerprints)"));
  }
  return absl::OkStatus();
}

absl::Status CheckExports(const CompileJob& job, std::string_view object, CompileResult& result) {
  auto symbols = guard::detail::ElfExternalSymbols(object);
  if (!symbols.ok()) {
    return absl::FailedPreconditionError(
        Cat("the link of ", job.program_name, " gave no readable shared object: ", symbols.status().message()));
  }
  for (const std::string& name : job.name_expressions) {
    const std::string symbol = Cat("__tvm_ffi_", name);
    const bool found = std::any_of(symbols->begin(), symbols->end(), [&](const guard::detail::ModuleSymbol& s) {
      return s.name == symbol && s.binding != guard::detail::ModuleSymbol::Binding::kLocal;
    });
    if (!found) {
      return absl::FailedPreconditionError(Cat("the shared object of ", job.program_name, " does not export ", symbol,
                                               " (the unit declares it with TVM_FFI_DLL_EXPORT_TYPED_FUNC; is "
                                               "TVM_FFI_DLL_EXPORT defined away?)"));
    }
    result.lowered_names.emplace_back(name, symbol);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> DepfileInputs(std::string_view depfile) {
  std::vector<std::string> out;
  std::string word;
  bool target_done = false;
  const auto flush = [&] {
    if (word.empty()) return;
    if (!target_done) {
      // Targets end at the first unescaped ':' followed by a blank or the end.
      if (word.back() == ':') {
        target_done = true;
      } else if (const size_t colon = word.find(':'); colon != std::string::npos) {
        target_done = true;
        if (colon + 1 < word.size()) out.push_back(word.substr(colon + 1));
      }
    } else {
      out.push_back(word);
    }
    word.clear();
  };
  for (size_t i = 0; i < depfile.size(); ++i) {
    const char c = depfile[i];
    if (c == '\\' && i + 1 < depfile.size() && (depfile[i + 1] == '\n' || depfile[i + 1] == '\r')) {
      flush();
      ++i;
      if (depfile[i] == '\r' && i + 1 < depfile.size() && depfile[i + 1] == '\n') ++i;
    } else if (c == '\\' && i + 1 < depfile.size() && depfile[i + 1] == ' ') {
      word.push_back(' ');
      ++i;
    } else if (c == '$' && i + 1 < depfile.size() && depfile[i + 1] == '$') {
      word.push_back('$');
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
  return out;
}

absl::StatusOr<CompileResult> BuildModule(const CompileJob& job, const fs::path& scratch,
                                          const std::atomic<bool>* cancel) {
  if (job.module.nvcc.empty()) {
    return absl::FailedPreconditionError(
        Cat("this daemon cannot build modules (", job.module.unavailable.empty() ? "no nvcc" : job.module.unavailable,
            "): it serves the modules of its bundles only, and this one is not among them; warm it into a bundle where "
            "nvcc is, or give the daemon --nvcc, --host-cxx and --tvm-ffi-root"));
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      job.timeout > std::chrono::hours(24 * 365) ? Clock::time_point::max() : start + job.timeout;
  files::EmptyDirectory(scratch);
  const fs::path tree = scratch / "tree", tmp = scratch / "tmp", log = scratch / "build.log";
  for (const fs::path& dir : {tree, tmp}) {
    if (absl::Status s = files::MakePrivateDirs(dir); !s.ok()) return absl::InternalError(s.message());
  }
  if (absl::Status s = Stage(job, tree); !s.ok()) return s;

  const fs::path host_cxx(job.module.host_cxx);
  const std::vector<std::string> env = {
      Cat("PATH=", host_cxx.has_parent_path() ? Cat(host_cxx.parent_path().string(), ":") : std::string(),
          "/usr/bin:/bin"),
      Cat("TMPDIR=", tmp.string()), "LC_ALL=C"};
  std::vector<std::string> compile = {job.module.nvcc};
  if (!job.module.host_cxx.empty()) compile.insert(compile.end(), {"-ccbin", job.module.host_cxx});
  std::vector<std::string> link = compile;
  compile.insert(compile.end(), job.module.compile_options.begin(), job.module.compile_options.end());
  compile.insert(compile.end(), {"-MD", "-MF", (scratch / "unit.d").string(), "-c", job.program_name, "-o",
                                 (scratch / "unit.o").string()});
  link.insert(link.end(), {"-shared", (scratch / "unit.o").string(), "-o", (scratch / "module.so").string()});
  link.insert(link.end(), job.module.link_options.begin(), job.module.link_options.end());

  const auto run = [&](std::vector<std::string> argv, std::string_view step) {
    Command command{std::move(argv), env, tree, log, /*kill_process_group=*/true};
    absl::Status s = RunCommand(command, cancel, deadline);
    if (s.ok() || s.code() != absl::StatusCode::kInvalidArgument) {
      return s.ok() ? s
                    : absl::Status(s.code(), Cat("module build of ", job.program_name, ": ", step, ": ", s.message()));
    }
    return absl::InvalidArgumentError(Cat(step, " of ", job.program_name, " failed: ", s.message()));
  };
  absl::Status status = run(compile, "the compile");
  if (status.ok()) status = run(link, "the link");
  CompileResult result;
  result.log = files::ReadWholeFile(log).value_or("");
  if (status.ok()) {
    absl::StatusOr<std::string> depfile = files::ReadWholeFile(scratch / "unit.d");
    status = depfile.ok() ? CheckInputs(job, tree, *depfile)
                          : absl::FailedPreconditionError(Cat("nvcc wrote no depfile for ", job.program_name,
                                                              ": the files it read cannot be checked"));
  }
  absl::StatusOr<std::string> object = status.ok() ? files::ReadWholeFile(scratch / "module.so") : status;
  if (object.ok()) status = CheckExports(job, *object, result);
  files::EmptyDirectory(scratch);
  if (!status.ok()) return WithNvrtcLog(status, result.log);
  if (!object.ok()) return WithNvrtcLog(absl::InternalError(object.status().message()), result.log);
  result.cubin = *std::move(object);
  result.compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return result;
}

}  // namespace jitd::compiler
