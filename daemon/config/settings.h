// The daemon's settings, one row each: the one table that the command line,
// the config file, the merge of the two and `jitd --help` are made from.
//
// A row names the setting's TOML key and long flag, the kind of value it
// takes (which fixes how a flag's text and a TOML node are read), the help
// line, an example value, and three functions bound to its fields: read a
// value into a ConfigLayer, overlay one layer on another, and decide the
// DaemonConfig field (the default when no layer sets it). A new setting is
// one row here plus its fields in config.h; tests/daemon/config/test_daemon_settings
// checks that the flag and the key of every row read the same value, and
// that deploy/jitd.toml and docs/CONTRACT.md name every row.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "config/config.h"

namespace jitd::daemon {

enum class SettingKind {
  kPath,          // a file or directory; relative to the config file's directory
  kText,          // a string, checked by the row
  kAddresses,     // one or more listen addresses (the flag repeats; TOML: a string or an array)
  kFiles,         // one or more files or directories (the flag repeats; TOML: a string or an array)
  kBytes,         // bytes: an integer, or a size ("512M", "10G")
  kCount,         // an integer >= 0 (0 = no bound)
  kInteger,       // an integer, range-checked by the row
  kMilliseconds,  // an integer number of milliseconds
  kSeconds,       // seconds: an integer, or a duration ("30s", "2m")
  kSwitch,        // on or off: a flag without a value; TOML: a boolean
};

// `--kernels [NAME=]DIR` texts as the daemon reads them (relative to the
// working directory): several trees must each be named, names unique.
absl::StatusOr<std::vector<KernelTreeSource>> ParseKernelTreeFlags(const std::vector<std::string>& texts);

struct Setting {
  std::string key;   // the config file's key ("cache_dir")
  std::string flag;  // the long flag ("--cache-dir")
  SettingKind kind;
  std::string value_name;      // what --help calls the value ("DIR"); empty for a switch
  std::string help;            // the --help line, default included
  std::string example;         // a value the setting accepts, as a flag's text
  bool existing_file = false;  // the flag's file must exist when the command line is parsed
  bool switch_value = true;    // kSwitch: what the flag sets (false: a --no-... flag)
  // Reads `texts` (exactly one, or one per value for kAddresses and kFiles) into
  // `layer`. Relative paths resolve against `base`; an empty base means the
  // working directory for paths and leaves unix: addresses as given.
  // INVALID_ARGUMENT naming neither the flag nor the key (callers do).
  std::function<absl::Status(const std::vector<std::string>& texts, const std::filesystem::path& base,
                             ConfigLayer& layer)>
      read{};
  // Copies the setting from `from` to `into` when `from` sets it.
  std::function<void(ConfigLayer& into, const ConfigLayer& from)> overlay{};
  // Sets the DaemonConfig field from `merged`, or to the default.
  std::function<void(const ConfigLayer& merged, DaemonConfig& config)> decide{};
};

// Every setting, in the order `jitd --help` lists them.
const std::vector<Setting>& Settings();

// The row whose TOML key is `key`; nullptr when there is none.
const Setting* FindSetting(std::string_view key);

}  // namespace jitd::daemon
