// `jitctl get`: one kernel instantiation as a cubin, optionally saved.
#include <fstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "human_format.h"
#include "json_output.h"
#include "table.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

class GetVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("get", "Fetch (compiling if needed) one kernel's cubin");
    sub->add_option("kernel", kernel_, "Kernel name from the manifest (see `jitctl kernels`)")
        ->required()
        ->type_name("KERNEL");
    sub->add_option("-p,--param", params_, "Template parameter K=V (repeatable): -p dtype=bf16")->type_name("K=V");
    sub->add_option("--arch", arch_, "Target arch (sm_90, sm_90a, sm_100a); default: the daemon's")->type_name("ARCH");
    sub->add_option("--option", options_, "Extra NVRTC option from the daemon's allow-list")->type_name("OPTION");
    sub->add_option("--mode", mode_, "compile (default), cached-only or prefetch")
        ->check(CLI::IsMember({"compile", "cached-only", "prefetch"}))
        ->type_name("MODE");
    sub->add_option("-o,--output", output_path_, "Write the cubin to this file")->type_name("FILE");
    return sub;
  }

  absl::Status Validate() override {
    request_.set_kernel(kernel_);
    for (const std::string& param : params_) {
      std::pair<std::string, std::string> kv = absl::StrSplit(param, absl::MaxSplits('=', 1));
      if (kv.first.empty() || param.find('=') == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("-p '", param, "': expected K=V"));
      }
      (*request_.mutable_params())[kv.first] = kv.second;
    }
    request_.set_arch(arch_);
    for (const std::string& option : options_) request_.add_options(option);
    if (mode_ == "cached-only") request_.set_mode(v1::GetKernelRequest::CACHED_ONLY);
    if (mode_ == "prefetch") request_.set_mode(v1::GetKernelRequest::PREFETCH);
    return absl::OkStatus();
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    absl::StatusOr<v1::GetKernelResponse> response = client.GetKernel(request_);
    if (!response.ok()) return response.status();
    if (!output_path_.empty()) {
      if (absl::Status written = WriteFile(output_path_, response->cubin()); !written.ok()) {
        return written;
      }
    }
    // The cubin is binary: it goes to -o, never into the printed answer.
    response->clear_cubin();
    if (output.json) {
      output.out << ToJson(*response);
      return 0;
    }
    std::vector<std::pair<std::string, std::string>> fields = {
        {"kernel", kernel_},
        {"key", response->key()},
        {"source", v1::GetKernelResponse::Source_Name(response->source())},
        {"arch", response->arch()},
        {"cubin", absl::StrCat(FormatBytes(response->cubin_size()),
                               output_path_.empty() ? " (use -o FILE to save it)" : " -> " + output_path_)},
        {"compile", absl::StrFormat("%.1f ms (NVRTC %s)", response->compile_ms(), response->nvrtc_version())},
        {"served", absl::StrFormat("%d us", response->served_us())}};
    for (const v1::Symbol& symbol : response->symbols()) {
      fields.emplace_back("symbol", symbol.name_expression() + " -> " + symbol.lowered_name());
    }
    Table::PrintRecord(output.out, fields);
    if (!response->log().empty()) output.out << "NVRTC log:\n" << response->log() << '\n';
    return 0;
  }

 private:
  std::string kernel_;
  std::vector<std::string> params_;
  std::string arch_;
  std::vector<std::string> options_;
  std::string mode_ = "compile";
  std::string output_path_;
  v1::GetKernelRequest request_;
};

}  // namespace

std::unique_ptr<Verb> MakeGetVerb() { return std::make_unique<GetVerb>(); }

}  // namespace jitd::jitctl
