#include "compiler/ptx_link.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::compiler {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

// Calls `f(name)` for every run of name characters in `text`.
template <typename F>
void ForEachName(std::string_view text, F&& f) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (!IsNameChar(text[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < text.size() && IsNameChar(text[i])) ++i;
    f(text.substr(start, i - start));
  }
}

// The variable a whole-line module-scope declaration declares:
//   .global .align 8 .u64 NAME[4] = {...};   -> NAME
// Empty for any other line.
std::string_view DeclaredGlobal(std::string_view line) {
  constexpr std::string_view kGlobal = ".global ";
  if (!line.starts_with(kGlobal) || !line.ends_with(';')) return {};
  std::size_t i = kGlobal.size();
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i < line.size() && line[i] == '.') {  // a state, alignment or type word
      while (i < line.size() && line[i] != ' ') ++i;
      continue;
    }
    if (i < line.size() && line[i] >= '0' && line[i] <= '9') {  // .align's operand
      while (i < line.size() && line[i] != ' ') ++i;
      continue;
    }
    break;
  }
  std::size_t end = i;
  while (end < line.size() && IsNameChar(line[end])) ++end;
  return line.substr(i, end - i);
}

std::string_view OptionValue(std::string_view option, std::string_view name) {
  if (!option.starts_with(name) || option.size() <= name.size() || option[name.size()] != '=') return {};
  return option.substr(name.size() + 1);
}

}  // namespace

StrippedPtx DropUnreferencedGlobals(std::string_view ptx) {
  std::unordered_map<std::string_view, std::size_t> uses;
  ForEachName(ptx, [&](std::string_view name) { ++uses[name]; });

  StrippedPtx out;
  out.ptx.reserve(ptx.size());
  std::size_t start = 0;
  while (start < ptx.size()) {
    std::size_t end = ptx.find('\n', start);
    end = end == std::string_view::npos ? ptx.size() : end + 1;
    std::string_view line = ptx.substr(start, end - start);
    std::string_view body = line.ends_with('\n') ? line.substr(0, line.size() - 1) : line;
    const std::string_view name = DeclaredGlobal(body);
    if (!name.empty() && uses[name] == 1) {
      ++out.dropped;
    } else {
      out.ptx.append(line);
    }
    start = end;
  }
  return out;
}

std::vector<std::string> PtxLinkOptions(const std::vector<std::string>& nvrtc_options) {
  std::vector<std::string> link;
  bool has_arch = false;
  for (const std::string& option : nvrtc_options) {
    std::string_view o = option;
    std::string_view value;
    if (!(value = OptionValue(o, "-arch")).empty()) {
      if (!value.starts_with("sm_")) return {};
      link.push_back(text::Cat("-arch=", value));
      has_arch = true;
    } else if (o == "--generate-line-info" || o == "-lineinfo") {
      link.emplace_back("-lineinfo");
    } else if (!(value = OptionValue(o, "--maxrregcount")).empty() ||
               !(value = OptionValue(o, "-maxrregcount")).empty()) {
      link.push_back(text::Cat("--maxrregcount=", value));
    } else if (!(value = OptionValue(o, "--fmad")).empty() || !(value = OptionValue(o, "-fmad")).empty()) {
      link.push_back(text::Cat("--fmad=", value));
    } else if (o == "-G" || o == "--device-debug" || o.starts_with("-Xptxas") || o.starts_with("--ptxas-options") ||
               o.starts_with("-dlto") || o == "-rdc=true" || o.starts_with("--relocatable-device-code=true") ||
               o == "-ewp" || o == "--extensible-whole-program" || o.starts_with("-dopt") || o.starts_with("--dopt") ||
               o.starts_with("-arch") || o.starts_with("--gpu-architecture")) {
      return {};
    }
  }
  if (!has_arch) return {};
  return link;
}

absl::StatusOr<std::filesystem::path> ToolkitPtxas() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr) {
    return absl::NotFoundError("cannot tell which file libnvrtc was loaded from");
  }
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::weakly_canonical(info.dli_fname, ec).parent_path();
  for (const std::filesystem::path& candidate :
       {lib.parent_path() / "bin" / "ptxas", lib.parent_path().parent_path().parent_path() / "bin" / "ptxas"}) {
    if (std::filesystem::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) {
      return std::filesystem::weakly_canonical(candidate, ec);
    }
  }
  return absl::NotFoundError(text::Cat("no ptxas beside ", lib.string(), " (looked in ../bin and ../../../bin)"));
}

absl::StatusOr<std::string> AssemblePtx(std::string_view ptx, const std::vector<std::string>& options,
                                        const std::filesystem::path& ptxas, const std::filesystem::path& scratch) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(scratch, ec);
  std::string dir_template = (scratch / "jitd-ptxas-XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) {
    return absl::InternalError(
        text::Cat("cannot make a directory for ptxas under ", scratch.string(), ": ", std::strerror(errno)));
  }
  const fs::path dir = dir_template;
  struct RemoveDir {
    fs::path dir;
    ~RemoveDir() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remove_dir{dir};
  const fs::path input = dir / "program.ptx";
  const fs::path output = dir / "program.cubin";
  const fs::path log = dir / "ptxas.log";
  JITD_RETURN_IF_ERROR(files::WriteFileAtomically(input, ptx, {.temp = {}, .mode = 0600, .sync = false}));

  std::vector<std::string> args = {ptxas.string()};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), {input.string(), "-o", output.string()});
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int spawn_error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0)
    return absl::InternalError(text::Cat("cannot run ", ptxas.string(), ": ", std::strerror(spawn_error)));
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(text::Cat("waitpid for ptxas: ", std::strerror(errno)));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    absl::StatusOr<std::string> said = files::ReadWholeFile(log);
    return absl::InternalError(text::Cat("ptxas could not assemble the PTX (",
                                         WIFEXITED(wait_status) ? text::Cat("exit ", WEXITSTATUS(wait_status))
                                                                : text::Cat("signal ", WTERMSIG(wait_status)),
                                         "): ", said.ok() ? *said : std::string()));
  }
  absl::StatusOr<std::string> cubin = files::ReadWholeFile(output);
  if (!cubin.ok()) return absl::InternalError(text::Cat("ptxas wrote no cubin: ", cubin.status().message()));
  if (cubin->empty()) return absl::InternalError("ptxas wrote an empty cubin");
  return cubin;
}

}  // namespace jitd::compiler
