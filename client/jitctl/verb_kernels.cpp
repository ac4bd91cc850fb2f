// `jitctl kernels`: the kernels the daemon's manifest registers.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "json_output.h"
#include "table.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

// "dtype=bf16|fp16 block=128*|256": allowed values, default starred.
std::string DescribeParams(const v1::KernelInfo& kernel) {
  std::vector<std::string> parts;
  for (const v1::KernelParam& param : kernel.params()) {
    std::vector<std::string> values;
    for (const std::string& value : param.allowed()) {
      values.push_back(value == param.default_value() ? text::Cat(value, "*") : value);
    }
    parts.push_back(text::Cat(param.name(), "=", absl::StrJoin(values, "|")));
  }
  return absl::StrJoin(parts, " ");
}

// "6 kernels", and "6 kernels (small 4, team 2)" when they come from named trees.
std::string Count(const v1::ListKernelsResponse& response) {
  std::vector<std::pair<std::string, int>> trees;
  for (const v1::KernelInfo& kernel : response.kernels()) {
    if (kernel.tree().empty()) continue;
    if (trees.empty() || trees.back().first != kernel.tree()) trees.emplace_back(kernel.tree(), 0);
    ++trees.back().second;
  }
  std::string text = text::Cat(response.kernels_size(), response.kernels_size() == 1 ? " kernel" : " kernels");
  if (trees.empty()) return text;
  std::vector<std::string> parts;
  for (const auto& [tree, count] : trees) parts.push_back(text::Cat(tree, " ", count));
  return text::Cat(text, " (", absl::StrJoin(parts, ", "), ")");
}

bool HasDefault(const v1::KernelInfo& kernel) {
  for (const v1::KernelParam& param : kernel.params()) {
    if (!param.default_value().empty()) return true;
  }
  return false;
}

class KernelsVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("kernels", "List the kernels the daemon can compile");
    sub->add_option("glob", glob_, "Only kernels matching this glob (\"moe.*\")")->type_name("GLOB");
    sub->add_flag("-l,--long", long_, "Each kernel in full: entry point, signature, launch rule, options");
    return sub;
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    v1::ListKernelsRequest request;
    request.set_glob(glob_);
    // No page_size: Client::ListKernels follows every page.
    JITD_ASSIGN_OR_RETURN(v1::ListKernelsResponse response, client.ListKernels(request));
    if (output.json) {
      output.out << ToJson(response);
      return 0;
    }
    if (long_) {
      for (const v1::KernelInfo& kernel : response.kernels()) {
        output.out << kernel.name() << '\n';
        std::vector<std::pair<std::string, std::string>> fields = {
            {"  what", kernel.description()},
            {"  params", DescribeParams(kernel).empty() ? "(none)"
                         : HasDefault(kernel)           ? text::Cat(DescribeParams(kernel), "  (* = default)")
                                                        : DescribeParams(kernel)},
            {"  entry point", kernel.name_expression()},
            {"  signature", kernel.signature().empty() ? "(not declared in the manifest)" : kernel.signature()},
            {"  launch", kernel.launch().empty() ? "(not declared in the manifest)" : kernel.launch()},
            {"  source", kernel.source()},
            {"  options", absl::StrJoin(kernel.default_options(), " ")},
            {"  instantiations", text::Cat(kernel.instantiations(), " per arch")}};
        Table::PrintRecord(output.out, fields);
        output.out << '\n';
      }
      output.out << Count(response) << "; default arch " << response.default_arch()
                 << "; supported: " << absl::StrJoin(response.supported_archs(), " ") << '\n';
      return 0;
    }
    Table table({{"KERNEL"}, {"PARAMS (* = default)"}, {"INSTANTIATIONS", Table::Align::kRight}, {"DESCRIPTION"}});
    for (const v1::KernelInfo& kernel : response.kernels()) {
      table.AddRow({kernel.name(), DescribeParams(kernel), text::Cat(kernel.instantiations()), kernel.description()});
    }
    table.Print(output.out);
    output.out << Count(response) << "; default arch " << response.default_arch()
               << "; supported: " << absl::StrJoin(response.supported_archs(), " ") << '\n'
               << "Signatures and launch rules: jitctl kernels -l [GLOB]\n";
    return 0;
  }

 private:
  std::string glob_;
  bool long_ = false;
};

}  // namespace

std::unique_ptr<Verb> MakeKernelsVerb() { return std::make_unique<KernelsVerb>(); }

}  // namespace jitd::jitctl
