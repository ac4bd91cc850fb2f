#include "compiler/nvrtc_program.h"

#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/strings/cord.h"
#include "compiler/ptx_link.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "spdlog/spdlog.h"

namespace jitd::compiler {
namespace {

// Status payload key under which the NVRTC log travels beside the message.
constexpr char kNvrtcLogPayload[] = "type.googleapis.com/jitd.compiler.NvrtcLog";

// NVRTC's automatic-PCH messages (--pch-messages, on by default), e.g.
//   "cub.cu": using precompiled header file "/pch/cub_0.pch"
constexpr std::string_view kPchUsing = "\": using precompiled header file \"";
constexpr std::string_view kPchCreating = "\": creating precompiled header file \"";

// Owns an nvrtcProgram.
class Program {
 public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (program_ != nullptr) nvrtcDestroyProgram(&program_);
  }
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

int FlowCallback(void* payload, void* /*reserved*/) {
  // Contract: once 1, always 1 for this compile. The flag is only ever set
  // during a compile, never cleared, so that holds.
  return static_cast<const std::atomic<bool>*>(payload)->load(std::memory_order_relaxed) ? 1 : 0;
}

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

// Removes NVRTC's PCH creating/using lines from `log`; says which were seen.
struct PchLogLines {
  bool used = false;
  bool created = false;
};
PchLogLines TakePchLines(std::string& log) {
  PchLogLines seen;
  std::string kept;
  kept.reserve(log.size());
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    end = end == std::string::npos ? log.size() : end + 1;
    std::string_view line(log.data() + start, end - start);
    const bool quoted = !line.empty() && line.front() == '"';
    if (quoted && line.find(kPchUsing) != std::string_view::npos) {
      seen.used = true;
    } else if (quoted && line.find(kPchCreating) != std::string_view::npos) {
      seen.created = true;
    } else {
      kept.append(line);
    }
    start = end;
  }
  log = std::move(kept);
  return seen;
}

// Empties the PCH directory once it holds more than the cap. NVRTC copes
// with its files vanishing between compiles: it creates a new one.
void PrepareDirectory(PchState& pch) {
  std::error_code ec;
  std::filesystem::create_directories(pch.dir, ec);
  std::uintmax_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(pch.dir, ec)) {
    std::error_code size_ec;
    const auto size = entry.file_size(size_ec);
    if (!size_ec) bytes += size;
  }
  if (bytes <= pch.max_dir_bytes) return;
  spdlog::info("PCH directory {} holds {} MB (cap {} MB): emptying it", pch.dir.string(), bytes >> 20,
               pch.max_dir_bytes >> 20);
  for (const auto& entry : std::filesystem::directory_iterator(pch.dir, ec)) {
    std::error_code remove_ec;
    std::filesystem::remove_all(entry.path(), remove_ec);
  }
}

bool IsNameBoundary(char c) { return c == '(' || c == '"' || c == ':' || c == ' ' || c == '\t' || c == '\n'; }

}  // namespace

std::string LogWithUserPaths(const CompileJob& job, std::string_view log) {
  if (job.log_root.empty() || log.empty()) return std::string(log);
  // (name NVRTC prints, path shown), longest name first so that a name that
  // ends another one ("dtype.cuh", "common/dtype.cuh") cannot cut it.
  std::vector<std::pair<std::string_view, std::string>> names;
  const std::string root = job.log_root.back() == '/' ? job.log_root : text::Cat(job.log_root, "/");
  names.emplace_back(job.program_name, text::Cat(root, job.program_name));
  for (const CompileHeader& header : job.headers) names.emplace_back(header.name, text::Cat(root, header.path));
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string out;
  out.reserve(log.size() + log.size() / 4);
  size_t i = 0;
  while (i < log.size()) {
    const bool at_start = i == 0 || log[i - 1] == '\n' || log[i - 1] == ' ' || log[i - 1] == '"';
    bool replaced = false;
    if (at_start) {
      for (const auto& [name, shown] : names) {
        if (name.empty() || log.compare(i, name.size(), name) != 0) continue;
        const size_t end = i + name.size();
        if (end < log.size() && !IsNameBoundary(log[end])) continue;
        out += shown;
        i = end;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(log[i++]);
  }
  return out;
}

namespace {

absl::Status NvrtcError(nvrtcResult result, const CompileJob& job, const std::string& what, const std::string& log) {
  std::string message = text::Cat("NVRTC ", what, " for ", job.program_name, ": ", nvrtcGetErrorString(result));
  if (!log.empty()) text::Append(message, "\n", log);
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (result) {
    case NVRTC_ERROR_COMPILATION:
      code = absl::StatusCode::kFailedPrecondition;
      break;
    case NVRTC_ERROR_INVALID_OPTION:
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
      code = absl::StatusCode::kInvalidArgument;
      break;
    case NVRTC_ERROR_CANCELLED:
      return absl::CancelledError(text::Cat("compile of ", job.program_name, " was cancelled"));
    case NVRTC_ERROR_OUT_OF_MEMORY:
      code = absl::StatusCode::kResourceExhausted;
      break;
    default:
      break;
  }
  return WithNvrtcLog(absl::Status(code, message), log);
}

// Replaces `cubin` by one assembled from the program's PTX without its
// unreferenced module-scope globals, when there are any (ptx_link.h says
// why). Compiles whose options the PTX route cannot carry, and any failure
// of it (logged), keep NVRTC's cubin: it is correct, only slower to load.
void DropDeadGlobals(nvrtcProgram program, const CompileJob& job, std::string& cubin) {
  const std::vector<std::string> link_options = PtxLinkOptions(job.options);
  if (link_options.empty()) return;
  size_t ptx_size = 0;
  if (nvrtcGetPTXSize(program, &ptx_size) != NVRTC_SUCCESS || ptx_size <= 1) return;
  std::string ptx(ptx_size, '\0');
  if (nvrtcGetPTX(program, ptx.data()) != NVRTC_SUCCESS) return;
  ptx.resize(ptx_size - 1);  // the terminating NUL
  StrippedPtx stripped = DropUnreferencedGlobals(ptx);
  if (stripped.dropped == 0) return;
  static const absl::StatusOr<std::filesystem::path> ptxas = ToolkitPtxas();
  if (!ptxas.ok()) {
    spdlog::warn("{}: keeping NVRTC's cubin with {} unused globals: {}", job.program_name, stripped.dropped,
                 std::string(ptxas.status().message()));
    return;
  }
  // The private directory AssemblePtx makes goes straight into TMPDIR (a
  // sticky /tmp): under a shared intermediate directory, whoever made that
  // one could swap the cubin between ptxas and the read.
  std::error_code ec;
  const std::filesystem::path scratch = std::filesystem::temp_directory_path(ec);
  absl::StatusOr<std::string> assembled = AssemblePtx(stripped.ptx, link_options, *ptxas, scratch);
  if (!assembled.ok()) {
    spdlog::warn("{}: keeping NVRTC's cubin with {} unused globals: {}", job.program_name, stripped.dropped,
                 std::string(assembled.status().message()));
    return;
  }
  spdlog::debug("{}: {} unused globals dropped, cubin {} -> {} bytes", job.program_name, stripped.dropped, cubin.size(),
                assembled->size());
  cubin = *std::move(assembled);
}

// Whether the job's -arch names a virtual architecture (compute_XX).
bool TargetsVirtualArch(const CompileJob& job) {
  for (const std::string& option : job.options) {
    if (option.starts_with("-arch=compute_") || option.starts_with("--gpu-architecture=compute_")) return true;
  }
  return false;
}

// The PTX of a compile for a virtual architecture, without its unreferenced
// module-scope globals (ptx_link.h: each would cost the driver a symbol at
// load), NUL-terminated as cuModuleLoadData wants PTX text.
absl::StatusOr<std::string> VirtualArchPtx(nvrtcProgram program, const CompileJob& job, const std::string& log) {
  size_t ptx_size = 0;
  nvrtcResult rc = nvrtcGetPTXSize(program, &ptx_size);
  if (rc != NVRTC_SUCCESS || ptx_size <= 1) return NvrtcError(rc, job, "could not return the PTX", log);
  std::string ptx(ptx_size, '\0');
  rc = nvrtcGetPTX(program, ptx.data());
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, "could not return the PTX", log);
  ptx.resize(ptx_size - 1);
  std::string stripped = DropUnreferencedGlobals(ptx).ptx;
  stripped.push_back('\0');
  return stripped;
}

}  // namespace

absl::StatusOr<CompileResult> CompileInProcess(const CompileJob& job, PchState* pch, const std::atomic<bool>* cancel) {
  Program program;
  // Project headers from memory, under every name an #include spells them
  // by: NVRTC never opens a file of the kernels directory.
  std::vector<const char*> header_contents;
  std::vector<const char*> header_names;
  header_contents.reserve(job.headers.size());
  header_names.reserve(job.headers.size());
  for (const CompileHeader& header : job.headers) {
    header_contents.push_back(header.content.c_str());
    header_names.push_back(header.name.c_str());
  }
  nvrtcResult rc =
      nvrtcCreateProgram(program.out(), job.source.c_str(), job.program_name.c_str(),
                         static_cast<int>(job.headers.size()), header_contents.data(), header_names.data());
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, "could not create the program", "");
  for (const std::string& name : job.name_expressions) {
    rc = nvrtcAddNameExpression(program.get(), name.c_str());
    if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, text::Cat("rejected name expression \"", name, "\""), "");
  }
  if (cancel != nullptr) {
    rc = nvrtcSetFlowCallback(program.get(), &FlowCallback, const_cast<std::atomic<bool>*>(cancel));
    if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, "could not set the flow callback", "");
  }

  const bool with_pch = job.use_pch && pch != nullptr;
  std::vector<std::string> pch_options;
  if (with_pch) {
    PrepareDirectory(*pch);
    // Verbose mode explains every PCH file it could not use ("options do not
    // match") as a warning in the log; the outcome is all we report.
    pch_options = {"-pch", text::Cat("--pch-dir=", pch->dir.string()), "--pch-verbose=false", "--pch-messages=true"};
  }
  std::vector<const char*> argv;
  argv.reserve(pch_options.size() + job.options.size());
  for (const std::string& option : pch_options) argv.push_back(option.c_str());
  for (const std::string& option : job.options) argv.push_back(option.c_str());

  const auto start = std::chrono::steady_clock::now();
  rc = nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  std::string log = ProgramLog(program.get());
  const PchLogLines pch_lines = TakePchLines(log);
  log = LogWithUserPaths(job, log);
  if (with_pch) {
    pch->created += pch_lines.created ? 1 : 0;
    pch->used += pch_lines.used ? 1 : 0;
    if (nvrtcGetPCHCreateStatus(program.get()) == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) {
      // Grow the heap so that the next compile of this program creates it.
      size_t required = 0;
      if (nvrtcGetPCHHeapSizeRequired(program.get(), &required) == NVRTC_SUCCESS && required > 0) {
        spdlog::info("PCH heap too small for {}: growing it to {} MB", job.program_name, required >> 20);
        nvrtcSetPCHHeapSize(required);
      }
    }
  }
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, "failed", log);

  CompileResult result;
  size_t cubin_size = 0;
  rc = nvrtcGetCUBINSize(program.get(), &cubin_size);
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, "could not return the cubin", log);
  if (cubin_size == 0 && TargetsVirtualArch(job)) {
    // -arch=compute_XX: the answer is the PTX, which the driver compiles
    // for the GPU it is loaded on (cuModuleLoadData takes it as it is).
    JITD_ASSIGN_OR_RETURN(result.cubin, VirtualArchPtx(program.get(), job, log));
  } else if (cubin_size == 0) {
    return WithNvrtcLog(absl::FailedPreconditionError(text::Cat("NVRTC produced no cubin for ", job.program_name)),
                        log);
  } else {
    result.cubin.resize(cubin_size);
    rc = nvrtcGetCUBIN(program.get(), result.cubin.data());
    if (rc != NVRTC_SUCCESS) return NvrtcError(rc, job, "could not return the cubin", log);
    DropDeadGlobals(program.get(), job, result.cubin);
  }
  result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  result.lowered_names.reserve(job.name_expressions.size());
  for (const std::string& name : job.name_expressions) {
    const char* lowered = nullptr;
    rc = nvrtcGetLoweredName(program.get(), name.c_str(), &lowered);
    if (rc != NVRTC_SUCCESS || lowered == nullptr) {
      return NvrtcError(rc, job, text::Cat("has no lowered name for \"", name, "\""), log);
    }
    result.lowered_names.emplace_back(name, lowered);
  }
  result.log = std::move(log);
  result.used_pch = with_pch && pch_lines.used;
  return result;
}

std::optional<std::string> NvrtcLogOf(const absl::Status& status) {
  auto payload = status.GetPayload(kNvrtcLogPayload);  // absl::optional in Debian's abseil
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

absl::Status WithNvrtcLog(absl::Status status, const std::string& log) {
  if (!status.ok()) status.SetPayload(kNvrtcLogPayload, absl::Cord(log));
  return status;
}

NvrtcVersionNumber NvrtcVersion() {
  NvrtcVersionNumber version;
  if (nvrtcVersion(&version.major, &version.minor) != NVRTC_SUCCESS) return {};
  return version;
}

std::vector<int> SupportedArchs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> archs(static_cast<size_t>(count));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  return archs;
}

}  // namespace jitd::compiler
