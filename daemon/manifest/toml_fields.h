// The strict readers kernels.toml and lock files are parsed with: each
// error names the origin, the line and the key, and quotes what it shows
// without control characters. Internal to jitd_manifest.
#pragma once

#include <toml++/toml.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::manifest {

// `s` as a message may quote it: a byte outside printable ASCII but UTF-8
// text's (a control character: C0, DEL, C1) as \xNN, so that no message
// about a manifest carries a newline or an escape sequence from it.
std::string Shown(std::string_view s);

// INVALID_ARGUMENT "ORIGIN:LINE: WHAT".
absl::Status Bad(const std::string& origin, const toml::source_region& where, const std::string& what);

// Kernel names, parameter names and request values are what every message,
// log and progress line and `jitd lint`'s reports print, and what keys
// and requests spell: 1 to 128 of [A-Za-z0-9_.-], the first a letter, digit
// or '_' (docs/KERNEL-AUTHORS.md documents it). No newline, no escape
// sequence, no '/' (a tree's name qualifies a kernel's), no ',' or '='
// (canonical params are "k=v,k=v").
absl::Status CheckName(const std::string& origin, const toml::node& where, const std::string& what,
                       std::string_view name);

// Every other string of the manifest (a description, a C++ spelling, an
// option) is text: no control character (C0 but none, DEL, C1), which
// would reach terminals and logs as it is.
absl::Status CheckText(const std::string& origin, const toml::node& where, const std::string& what,
                       std::string_view text);

// Every key of `t` is one of `allowed`.
absl::Status CheckKeys(const toml::table& t, const std::set<std::string>& allowed, const std::string& origin,
                       const std::string& context);

// The string `key` of `t` ("" when absent and not `required`).
absl::StatusOr<std::string> String(const toml::table& t, const char* key, const std::string& origin,
                                   const std::string& context, bool required);

// The array of strings `key` of `t` (empty when absent).
absl::StatusOr<std::vector<std::string>> Strings(const toml::table& t, const char* key, const std::string& origin,
                                                 const std::string& context);

}  // namespace jitd::manifest
