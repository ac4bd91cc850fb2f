#include "config_file.h"

#include <toml++/toml.h>

#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/base/units.h"

namespace jitd::daemon {
namespace {

// Reads one key's value into the layer; errors name neither file nor key
// (ReadConfigFile adds both).
using KeyReader = std::function<absl::Status(const toml::node&, ConfigLayer&)>;

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
  return absl::InvalidArgumentError(absl::StrCat("must be ", expected, ", not ", TypeName(node)));
}

absl::StatusOr<std::string> AsString(const toml::node& node) {
  if (const auto* text = node.as_string()) return text->get();
  return WrongType(node, "a string");
}

// A string value checked by `check` (one of config.h's Check* functions).
KeyReader StringKey(std::optional<std::string> ConfigLayer::*field, absl::Status (*check)(const std::string&)) {
  return [field, check](const toml::node& node, ConfigLayer& layer) -> absl::Status {
    JITD_ASSIGN_OR_RETURN(std::string text, AsString(node));
    JITD_RETURN_IF_ERROR(check(text));
    layer.*field = text;
    return absl::OkStatus();
  };
}

KeyReader PathKey(std::optional<std::filesystem::path> ConfigLayer::*field, const std::filesystem::path& base) {
  return [field, base](const toml::node& node, ConfigLayer& layer) -> absl::Status {
    JITD_ASSIGN_OR_RETURN(std::string text, AsString(node));
    if (text.empty()) return absl::InvalidArgumentError("must not be empty");
    layer.*field = base / text;  // an absolute text replaces base
    return absl::OkStatus();
  };
}

absl::Status ReadListen(const toml::node& node, const std::filesystem::path& base, ConfigLayer& layer) {
  std::vector<std::string> addresses;
  if (node.is_string()) {
    addresses.push_back(node.as_string()->get());
  } else if (const auto* array = node.as_array(); array != nullptr && array->is_homogeneous(toml::node_type::string)) {
    for (const auto& item : *array) addresses.push_back(item.as_string()->get());
  } else {
    return WrongType(node, "a string or an array of strings");
  }
  for (std::string& address : addresses) {
    if (absl::StartsWith(address, "unix:") && address.size() > 5 && address[5] != '/') {
      address = "unix:" + (base / address.substr(5)).string();
    }
    JITD_RETURN_IF_ERROR(CheckListenAddress(address));
  }
  layer.listen = std::move(addresses);
  return absl::OkStatus();
}

// An integer number of bytes or a size string ("10G"), into `field`.
KeyReader ByteSizeKey(std::optional<uint64_t> ConfigLayer::*field) {
  return [field](const toml::node& node, ConfigLayer& layer) -> absl::Status {
    if (const auto* number = node.as_integer()) {
      if (number->get() < 0) return absl::InvalidArgumentError("must not be negative");
      layer.*field = static_cast<uint64_t>(number->get());
      return absl::OkStatus();
    }
    if (!node.is_string()) return WrongType(node, "an integer or a size string like \"10G\"");
    JITD_ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(node.as_string()->get()));
    layer.*field = bytes;
    return absl::OkStatus();
  };
}

KeyReader BoolKey(std::optional<bool> ConfigLayer::*field) {
  return [field](const toml::node& node, ConfigLayer& layer) -> absl::Status {
    const auto* value = node.as_boolean();
    if (value == nullptr) return WrongType(node, "a boolean");
    layer.*field = value->get();
    return absl::OkStatus();
  };
}

absl::Status ReadMaxQueue(const toml::node& node, ConfigLayer& layer) {
  const auto* number = node.as_integer();
  if (number == nullptr) return WrongType(node, "an integer");
  JITD_RETURN_IF_ERROR(CheckMaxQueue(number->get()));
  layer.max_queue = static_cast<uint64_t>(number->get());
  return absl::OkStatus();
}

absl::Status ReadMaxCallsPerPeer(const toml::node& node, ConfigLayer& layer) {
  const auto* number = node.as_integer();
  if (number == nullptr || number->get() < 0) return WrongType(node, "0 (no bound) or a positive integer");
  layer.max_calls_per_peer = static_cast<uint64_t>(number->get());
  return absl::OkStatus();
}

// A count, 0 meaning no bound.
KeyReader CountKey(std::optional<uint64_t> ConfigLayer::*field) {
  return [field](const toml::node& node, ConfigLayer& layer) -> absl::Status {
    const auto* number = node.as_integer();
    if (number == nullptr || number->get() < 0) return WrongType(node, "0 (no bound) or a positive integer");
    layer.*field = static_cast<uint64_t>(number->get());
    return absl::OkStatus();
  };
}

// Seconds as an integer, or a duration string ("30s", "2m"); `example`
// is what the type error shows.
absl::StatusOr<int64_t> ReadSeconds(const toml::node& node, std::string_view example) {
  if (const auto* number = node.as_integer()) return number->get();
  if (node.is_string()) {
    JITD_ASSIGN_OR_RETURN(std::chrono::seconds duration, ParseDuration(node.as_string()->get()));
    return duration.count();
  }
  const std::string expected = jitd::text::Cat("an integer number of seconds or a duration like \"", example, "\"");
  return WrongType(node, expected.c_str());
}

absl::Status ReadListenProbeInterval(const toml::node& node, ConfigLayer& layer) {
  JITD_ASSIGN_OR_RETURN(int64_t seconds, ReadSeconds(node, "10s"));
  if (seconds < 0) return absl::InvalidArgumentError("must be 0 (off) or a positive duration");
  layer.listen_probe_interval = std::chrono::seconds(seconds);
  return absl::OkStatus();
}

absl::Status ReadNegativeTtl(const toml::node& node, ConfigLayer& layer) {
  JITD_ASSIGN_OR_RETURN(int64_t seconds, ReadSeconds(node, "30s"));
  JITD_RETURN_IF_ERROR(CheckNegativeTtl(seconds));
  layer.negative_ttl = std::chrono::seconds(seconds);
  return absl::OkStatus();
}

absl::Status ReadRemoteTimeout(const toml::node& node, ConfigLayer& layer) {
  const auto* number = node.as_integer();
  if (number == nullptr) return WrongType(node, "an integer number of milliseconds");
  JITD_RETURN_IF_ERROR(CheckRemoteTimeout(number->get()));
  layer.remote_timeout = std::chrono::milliseconds(number->get());
  return absl::OkStatus();
}

absl::Status ReadRemoteMaxValueBytes(const toml::node& node, ConfigLayer& layer) {
  absl::Status read = ByteSizeKey(&ConfigLayer::remote_max_value_bytes)(node, layer);
  if (!read.ok()) return read;
  return CheckRemoteMaxValueBytes(*layer.remote_max_value_bytes);
}

absl::Status ReadWorkers(const toml::node& node, ConfigLayer& layer) {
  const auto* number = node.as_integer();
  if (number == nullptr) return WrongType(node, "an integer");
  JITD_RETURN_IF_ERROR(CheckWorkers(number->get()));
  layer.workers = static_cast<uint32_t>(number->get());
  return absl::OkStatus();
}

std::map<std::string, KeyReader, std::less<>> KeyReaders(const std::filesystem::path& base) {
  return {
      {"listen", [base](const toml::node& n, ConfigLayer& l) { return ReadListen(n, base, l); }},
      {"cache_dir", PathKey(&ConfigLayer::cache_dir, base)},
      {"kernels", PathKey(&ConfigLayer::kernels_dir, base)},
      {"cuda_include", PathKey(&ConfigLayer::cuda_include, base)},
      {"max_cache_bytes", ByteSizeKey(&ConfigLayer::max_cache_bytes)},
      {"workers", ReadWorkers},
      {"arch", StringKey(&ConfigLayer::arch, CheckArch)},
      {"remote", StringKey(&ConfigLayer::remote, CheckRemoteUrl)},
      {"remote_password_file", PathKey(&ConfigLayer::remote_password_file, base)},
      {"remote_tls_ca", PathKey(&ConfigLayer::remote_tls_ca, base)},
      {"remote_tls_cert", PathKey(&ConfigLayer::remote_tls_cert, base)},
      {"remote_tls_key", PathKey(&ConfigLayer::remote_tls_key, base)},
      {"remote_timeout_ms", ReadRemoteTimeout},
      {"remote_max_value_bytes", ReadRemoteMaxValueBytes},
      {"remote_signing_key_file", PathKey(&ConfigLayer::remote_signing_key_file, base)},
      {"metrics_listen", StringKey(&ConfigLayer::metrics_listen, CheckMetricsListen)},
      {"admin_token_file", PathKey(&ConfigLayer::admin_token_file, base)},
      {"max_queue", ReadMaxQueue},
      {"max_calls_per_peer", ReadMaxCallsPerPeer},
      {"max_connections", CountKey(&ConfigLayer::max_connections)},
      {"max_connections_per_peer", CountKey(&ConfigLayer::max_connections_per_peer)},
      {"listen_probe_interval", ReadListenProbeInterval},
      {"hot_cache_bytes", ByteSizeKey(&ConfigLayer::hot_cache_bytes)},
      {"negative_ttl", ReadNegativeTtl},
      {"log_hits", BoolKey(&ConfigLayer::log_hits)},
      {"local_path", BoolKey(&ConfigLayer::local_path)},
      {"allow_guard_findings", BoolKey(&ConfigLayer::allow_guard_findings)},
      {"tls_cert", PathKey(&ConfigLayer::tls_cert, base)},
      {"tls_key", PathKey(&ConfigLayer::tls_key, base)},
      {"tls_client_ca", PathKey(&ConfigLayer::tls_client_ca, base)},
      {"insecure_tcp", BoolKey(&ConfigLayer::insecure_tcp)},
      {"socket_group", StringKey(&ConfigLayer::socket_group, CheckGroupName)},
  };
}

}  // namespace

std::vector<std::string> ConfigFileKeys() {
  std::vector<std::string> keys;
  for (const auto& [key, unused] : KeyReaders(std::filesystem::path("/"))) keys.push_back(key);
  return keys;
}

absl::StatusOr<ConfigLayer> ReadConfigFile(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat("config file ", name, " does not exist or is not a file"));
  }
  toml::table root;
  try {
    root = toml::parse_file(name);
  } catch (const toml::parse_error& parse_error) {
    const toml::source_position where = parse_error.source().begin;
    return absl::InvalidArgumentError(absl::StrCat(name, ":", where.line, ":", where.column,
                                                   ": invalid TOML: ", std::string(parse_error.description())));
  }

  const std::filesystem::path base = std::filesystem::absolute(path).parent_path();
  const auto readers = KeyReaders(base);
  ConfigLayer layer;
  for (const auto& [key, value] : root) {
    const std::string line = absl::StrCat(name, ":", value.source().begin.line);
    const std::string key_name(key.str());
    const auto reader = readers.find(key_name);
    if (reader == readers.end()) {
      std::vector<std::string> known;
      for (const auto& [known_key, unused] : readers) known.push_back(known_key);
      const std::vector<std::string> close = jitd::text::CloseMatches(key_name, known, 2);
      return absl::InvalidArgumentError(absl::StrCat(
          line, ": unknown key '", key_name, "'",
          close.empty() ? std::string() : absl::StrCat("; did you mean ", absl::StrJoin(close, " or "), "?"),
          " (known keys: ", absl::StrJoin(known, ", "), ")"));
    }
    if (absl::Status read = reader->second(value, layer); !read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(line, ": key '", key_name, "': ", read.message()));
    }
  }
  return layer;
}

}  // namespace jitd::daemon
