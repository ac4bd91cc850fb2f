// `jitctl get`: one kernel instantiation as a cubin, optionally saved.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "human_format.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "json_output.h"
#include "table.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

// Where the answer came from, in a person's words: "origin", not
// "source", which reads as CUDA source (the wire's field is `source`).
std::string OriginWord(v1::GetKernelResponse::Source source) {
  switch (source) {
    case v1::GetKernelResponse::MEMORY:
      return "memory (the daemon's hot cache)";
    case v1::GetKernelResponse::DISK:
      return "disk (the daemon's cache, checksum verified)";
    case v1::GetKernelResponse::REMOTE:
      return "remote (the shared tier, checksum verified)";
    case v1::GetKernelResponse::COMPILED:
      return "compiled (by NVRTC for this request)";
    case v1::GetKernelResponse::BUNDLE:
      return "bundle (a sealed seed bundle the daemon mounted, checksum verified)";
    case v1::GetKernelResponse::FALLBACK:
      return "fallback (the read-only fallback cache: the daemon could not be reached)";
    default:
      return absl::AsciiStrToLower(v1::GetKernelResponse::Source_Name(source));
  }
}

// "" when written, else why not (errno's words): a local failure, which
// the caller reports as such, not as an answer of the daemon.
std::string WriteFile(const std::string& path, const std::string& bytes) {
  errno = 0;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return errno != 0 ? std::strerror(errno) : "cannot open it";
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return errno != 0 ? std::strerror(errno) : "the write failed";
  return "";
}

// The answer as --json prints it: GetKernelResponse's fields, the cubin's
// bytes left out (they go to -o) and its size kept.
v1::GetKernelResponse ToResponse(const KernelBinary& answer) {
  v1::GetKernelResponse response;
  response.set_key(answer.key);
  for (const KernelSymbol& symbol : answer.symbols) {
    v1::Symbol* out = response.add_symbols();
    out->set_name_expression(symbol.name_expression);
    out->set_lowered_name(symbol.lowered_name);
  }
  response.set_source(answer.source);
  response.set_compile_ms(answer.compile_ms);
  response.set_log(answer.log);
  response.set_arch(answer.arch);
  for (const std::string& arch : answer.fatbin_archs) response.add_fatbin_archs(arch);
  response.set_blob_path(answer.blob_path);
  response.set_cubin_size(answer.cubin.size());
  response.set_nvrtc_version(answer.nvrtc_version);
  return response;
}

class GetVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("get", "Fetch (compiling if needed) one kernel's cubin");
    sub->add_option("kernel", kernel_, "Kernel name from the manifest (see `jitctl kernels`)")
        ->required()
        ->type_name("KERNEL");
    sub->add_option("-p,--param", params_, "Template parameter K=V (repeatable): -p dtype=bf16")->type_name("K=V");
    sub->add_option("--arch", archs_,
                    "Target arch (sm_90, sm_90a, sm_100a; compute_90 for PTX); repeat it for a fatbin of them all; "
                    "default: this host's GPU, else the daemon's")
        ->type_name("ARCH");
    sub->add_flag("--fleet", fleet_, "A fatbin for the daemon's fleet set (--fleet-archs) and the lowest's PTX");
    sub->add_option("--option", options_, "Extra NVRTC option from the daemon's allow-list")->type_name("OPTION");
    sub->add_option("--mode", mode_, "compile (default: on a miss), cached-only (never compiles) or prefetch")
        ->check(CLI::IsMember({"compile", "cached-only", "prefetch"}).description(""))
        ->type_name("MODE");
    sub->add_option("-o,--output", output_path_, "Write the cubin (a module kernel's shared object) to this file")
        ->type_name("FILE");
    return sub;
  }

  absl::Status Validate() override {
    spec_.kernel = kernel_;
    for (const std::string& param : params_) {
      std::pair<std::string, std::string> kv = absl::StrSplit(param, absl::MaxSplits('=', 1));
      if (kv.first.empty() || param.find('=') == std::string::npos) {
        return absl::InvalidArgumentError(text::Cat("-p '", param, "': expected K=V"));
      }
      spec_.params[kv.first] = kv.second;
    }
    if (fleet_ && !archs_.empty()) return absl::InvalidArgumentError("--fleet asks for the fleet set: drop --arch");
    if (archs_.size() == 1) spec_.arch = archs_.front();
    if (archs_.size() > 1) spec_.archs = archs_;
    spec_.fleet = fleet_;
    spec_.options = options_;
    std::error_code ec;
    if (!output_path_.empty() && std::filesystem::is_directory(output_path_, ec)) {
      return absl::InvalidArgumentError(text::Cat("-o ", output_path_, " is a directory; name the file to write (-o ",
                                                  output_path_, "/kernel.cubin)"));
    }
    if (mode_ == "cached-only") mode_value_ = v1::GetKernelRequest::CACHED_ONLY;
    if (mode_ == "prefetch") mode_value_ = v1::GetKernelRequest::PREFETCH;
    return absl::OkStatus();
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    // Through the library's kernel path: the arch default, path delivery
    // and (with JITD_FALLBACK_CACHE_DIR) the read-only fallback.
    JITD_ASSIGN_OR_RETURN(std::shared_ptr<const KernelBinary> binary, client.GetKernelBinary(spec_, mode_value_));
    const KernelBinary& answer = *binary;
    if (!output_path_.empty() && answer.source != v1::GetKernelResponse::NONE) {
      if (const std::string why = WriteFile(output_path_, answer.cubin); !why.empty()) {
        std::cerr << "jitctl: get: the daemon answered, but the cubin cannot be written to " << output_path_ << ": "
                  << why << "\n";
        return 1;
      }
    }
    if (output.json) {
      // What was asked for (kernel, params) beside what came back; the
      // cubin's bytes go to -o, not into the document (cubin_size says
      // how many there are).
      std::string params = "{";
      for (const auto& [name, value] : spec_.params) {
        if (params.size() > 1) params += ',';
        text::Append(params, JsonString(name), ":", JsonString(value));
      }
      params += '}';
      output.out << ToJson(
          ToResponse(answer),
          {{"kernel", JsonString(kernel_)},
           {"params", params},
           {"origin", JsonString(absl::AsciiStrToLower(v1::GetKernelResponse::Source_Name(answer.source)))}},
          {"cubin"});
      return 0;
    }
    if (answer.source == v1::GetKernelResponse::NONE) {
      output.out << "kernel  " << kernel_ << "\norigin  none (not cached yet; a compile was queued)\n";
      return 0;
    }
    std::vector<std::pair<std::string, std::string>> fields = {
        {"kernel", kernel_},
        {"key", answer.key},
        {"origin", OriginWord(answer.source)},
        {answer.fatbin_archs.empty() ? "arch" : "fatbin", answer.arch},
        // The cubin alone; `ls` shows the blob file (cubin plus metadata).
        {"cubin", text::Cat(FormatBytes(answer.cubin.size()), output_path_.empty() ? " (use -o FILE.cubin to save it)"
                                                                                   : text::Cat(" -> ", output_path_))},
        // A module's answer names its builder ("nvcc V13.0.88; tvm-ffi ...").
        {"compile", absl::StrFormat(answer.nvrtc_version.starts_with("nvcc") ? "%.1f ms (%s)" : "%.1f ms (NVRTC %s)",
                                    answer.compile_ms, answer.nvrtc_version)}};
    if (!answer.blob_path.empty()) fields.emplace_back("blob", answer.blob_path);
    Table::PrintRecord(output.out, fields);
    output.out << '\n';
    Table symbols({{"NAME EXPRESSION"}, {"LOWERED NAME"}});
    for (const KernelSymbol& symbol : answer.symbols) symbols.AddRow({symbol.name_expression, symbol.lowered_name});
    symbols.Print(output.out);
    if (!answer.log.empty()) {
      output.out << (answer.nvrtc_version.starts_with("nvcc") ? "\nbuild log:\n" : "\nNVRTC log:\n") << answer.log
                 << '\n';
    }
    return 0;
  }

 private:
  std::string kernel_;
  std::vector<std::string> params_;
  std::vector<std::string> archs_;
  bool fleet_ = false;
  std::vector<std::string> options_;
  std::string mode_ = "compile";
  std::string output_path_;
  KernelSpec spec_;
  v1::GetKernelRequest::Mode mode_value_ = v1::GetKernelRequest::COMPILE;
};

}  // namespace

std::unique_ptr<Verb> MakeGetVerb() { return std::make_unique<GetVerb>(); }

}  // namespace jitd::jitctl
