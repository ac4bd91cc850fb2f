#include "config/config_file.h"

#include <toml++/toml.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/settings.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

const char* TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

absl::Status WrongType(const toml::node& node, const char* expected) {
  return absl::InvalidArgumentError(text::Cat("must be ", expected, ", not ", TypeName(node)));
}

// A TOML integer as a flag would spell it.
absl::StatusOr<std::vector<std::string>> IntegerText(const toml::node& node, const char* expected) {
  const auto* number = node.as_integer();
  if (number == nullptr) return WrongType(node, expected);
  return std::vector<std::string>{std::to_string(number->get())};
}

// The node's value as the texts a flag would give (settings.h reads both
// the same way), after checking it has a type `kind` allows.
absl::StatusOr<std::vector<std::string>> Texts(const toml::node& node, SettingKind kind) {
  switch (kind) {
    case SettingKind::kPath:
    case SettingKind::kText:
      if (!node.is_string()) return WrongType(node, "a string");
      return std::vector<std::string>{node.as_string()->get()};
    case SettingKind::kAddresses:
    case SettingKind::kFiles: {
      std::vector<std::string> addresses;
      if (node.is_string()) {
        addresses.push_back(node.as_string()->get());
      } else if (const auto* array = node.as_array();
                 array != nullptr && array->is_homogeneous(toml::node_type::string)) {
        for (const auto& item : *array) addresses.push_back(item.as_string()->get());
      } else {
        return WrongType(node, "a string or an array of strings");
      }
      return addresses;
    }
    case SettingKind::kBytes:
      if (const auto* number = node.as_integer(); number != nullptr && number->get() < 0) {
        return absl::InvalidArgumentError("must not be negative");
      }
      if (node.is_string()) return std::vector<std::string>{node.as_string()->get()};
      return IntegerText(node, "an integer or a size string like \"10G\"");
    case SettingKind::kSeconds:
      if (node.is_string()) return std::vector<std::string>{node.as_string()->get()};
      return IntegerText(node, "an integer number of seconds or a duration like \"30s\"");
    case SettingKind::kCount:
      return IntegerText(node, "0 (no bound) or a positive integer");
    case SettingKind::kInteger:
      return IntegerText(node, "an integer");
    case SettingKind::kMilliseconds:
      return IntegerText(node, "an integer number of milliseconds");
    case SettingKind::kSwitch:
      if (!node.is_boolean()) return WrongType(node, "a boolean");
      return std::vector<std::string>{node.as_boolean()->get() ? "true" : "false"};
  }
  return absl::InternalError("a setting of no known kind");
}

}  // namespace

std::vector<std::string> ConfigFileKeys() {
  std::vector<std::string> keys;
  for (const Setting& setting : Settings()) keys.push_back(setting.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::StatusOr<ConfigLayer> ReadConfigFile(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(text::Cat("config file ", name, " does not exist or is not a file"));
  }
  toml::table root;
  try {
    root = toml::parse_file(name);
  } catch (const toml::parse_error& parse_error) {
    const toml::source_position where = parse_error.source().begin;
    return absl::InvalidArgumentError(text::Cat(name, ":", where.line, ":", where.column,
                                                ": invalid TOML: ", std::string(parse_error.description())));
  }

  const std::filesystem::path base = std::filesystem::absolute(path).parent_path();
  ConfigLayer layer;
  for (const auto& [key, value] : root) {
    const std::string line = text::Cat(name, ":", value.source().begin.line);
    const std::string key_name(key.str());
    const Setting* setting = FindSetting(key_name);
    if (setting == nullptr) {
      const std::vector<std::string> known = ConfigFileKeys();
      const std::vector<std::string> close = jitd::text::CloseMatches(key_name, known, 2);
      return absl::InvalidArgumentError(
          text::Cat(line, ": unknown key '", key_name, "'",
                    close.empty() ? std::string() : text::Cat("; did you mean ", absl::StrJoin(close, " or "), "?"),
                    " (known keys: ", absl::StrJoin(known, ", "), ")"));
    }
    absl::StatusOr<std::vector<std::string>> texts = Texts(value, setting->kind);
    absl::Status read = texts.ok() ? setting->read(*texts, base, layer) : texts.status();
    if (!read.ok()) {
      return absl::InvalidArgumentError(text::Cat(line, ": key '", key_name, "': ", read.message()));
    }
  }
  return layer;
}

}  // namespace jitd::daemon
