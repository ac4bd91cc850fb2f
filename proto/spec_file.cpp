#include "jitd/spec_file.h"

#include <toml++/toml.h>

#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd {
namespace {

std::string Where(const std::filesystem::path& path, const toml::node& node) {
  return text::Cat(path.string(), ":", node.source().begin.line);
}

absl::Status Invalid(const std::filesystem::path& path, const toml::node& node, const std::string& what) {
  return absl::InvalidArgumentError(text::Cat(Where(path, node), ": ", what));
}

absl::StatusOr<v1::KernelSpec> ParseSpec(const std::filesystem::path& path, const toml::table& table, size_t index) {
  v1::KernelSpec spec;
  const std::string name = text::Cat("spec[", index, "]");
  for (const auto& [key, value] : table) {
    const std::string k(key.str());
    if (k == "kernel" || k == "arch") {
      const auto* text = value.as_string();
      if (text == nullptr) return Invalid(path, value, text::Cat(name, ".", k, " must be a string"));
      k == "kernel" ? spec.set_kernel(text->get()) : spec.set_arch(text->get());
    } else if (k == "params") {
      const auto* params = value.as_table();
      if (params == nullptr) return Invalid(path, value, text::Cat(name, ".params must be a table"));
      for (const auto& [param, param_value] : *params) {
        const auto* text = param_value.as_string();
        if (text == nullptr) {
          return Invalid(path, param_value, text::Cat(name, ".params.", std::string(param.str()), " must be a string"));
        }
        (*spec.mutable_params())[std::string(param.str())] = text->get();
      }
    } else if (k == "options") {
      const auto* options = value.as_array();
      if (options == nullptr || !options->is_homogeneous(toml::node_type::string)) {
        return Invalid(path, value, text::Cat(name, ".options must be an array of strings"));
      }
      for (const auto& option : *options) spec.add_options(option.as_string()->get());
    } else {
      return Invalid(path, value, text::Cat("unknown key ", name, ".", k, " (known: kernel, params, arch, options)"));
    }
  }
  if (spec.kernel().empty()) {
    return Invalid(path, table, text::Cat(name, " has no kernel"));
  }
  return spec;
}

}  // namespace

absl::StatusOr<std::vector<v1::KernelSpec>> LoadSpecFile(const std::filesystem::path& path) {
  toml::table root;
  try {
    root = toml::parse_file(path.string());
  } catch (const toml::parse_error& error) {
    // toml++ reports a missing file as a parse error at line 0.
    if (error.source().begin.line == 0) {
      return absl::NotFoundError(text::Cat(path.string(), ": ", std::string(error.description())));
    }
    return absl::InvalidArgumentError(
        text::Cat(path.string(), ":", error.source().begin.line, ": ", std::string(error.description())));
  }
  std::vector<v1::KernelSpec> specs;
  for (const auto& [key, value] : root) {
    const auto* array = value.as_array();
    if (key.str() != "spec" || array == nullptr) {
      return Invalid(path, value, text::Cat("unknown key ", std::string(key.str()), " (expected [[spec]] tables)"));
    }
    for (size_t i = 0; i < array->size(); ++i) {
      const auto* table = (*array)[i].as_table();
      if (table == nullptr) return Invalid(path, (*array)[i], "spec entries must be tables");
      JITD_ASSIGN_OR_RETURN(v1::KernelSpec spec, ParseSpec(path, *table, i));
      specs.push_back(std::move(spec));
    }
  }
  if (specs.empty()) {
    return absl::InvalidArgumentError(text::Cat(path.string(), ": no [[spec]] tables"));
  }
  return specs;
}

}  // namespace jitd
