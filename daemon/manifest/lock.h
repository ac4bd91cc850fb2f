// A kernel lock: the exact instantiations of one kernel tree, each with its
// content key, that `jitd lint --write-lock FILE` proved compile cleanly.
// `jitd --lock FILE` serves exactly those (Resolver::CheckLock) and
// `jitd warm --lock FILE` warms exactly those, so a deployment pins what CI
// linted: a source or toolkit that gives another key is refused, not served.
//
// The file is TOML:
//   schema = 1
//   tree = ""                      # the serving name ("" = unnamed tree)
//   namespace = "sglang"           # informational
//   nvrtc_version = "13.0"         # informational
//   tree_fingerprint = "<64 hex>"  # informational
//   [[instantiation]]
//   kernel = "norm.rmsnorm"        # unqualified, as kernels.toml names it
//   params = "dtype=bf16"          # canonical
//   arch = "sm_90"
//   key = "<64 hex>"
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::manifest {

struct LockEntry {
  std::string kernel;  // as the tree's kernels.toml names it (unqualified)
  std::string params;  // canonical "k=v,k=v" (ResolvedKernel::params)
  std::string arch;    // "sm_90"
  std::string key;     // 64 hex content key (ResolvedKernel::key)
};

struct KernelLock {
  std::string tree;                // the tree's serving name ("" = unnamed)
  std::string kernel_namespace;    // informational
  std::string nvrtc_version;       // informational
  std::string tree_fingerprint;    // informational (KernelTree::fingerprint)
  std::vector<LockEntry> entries;  // sorted by (kernel, params, arch), no duplicates
  std::string origin;              // the file it was read from, for messages

  // Parses lock text strictly: INVALID_ARGUMENT naming origin:line for a
  // syntax error, an unknown key, a wrong type, a missing field, a key that
  // is not 64 lowercase hex, or an instantiation listed twice. Entries come
  // back sorted whatever order the file has them in.
  static absl::StatusOr<KernelLock> Parse(std::string_view toml, const std::string& origin);
  // Parse of a file's content; ReadWholeFile's codes when it cannot be read.
  static absl::StatusOr<KernelLock> Read(const std::filesystem::path& file);
  // The file text (header comment, schema, informational keys, entries in
  // order); Parse(ToToml()) gives back the same lock.
  std::string ToToml() const;
  // The entry of one instantiation, or nullptr (binary search: entries are
  // sorted).
  const LockEntry* Find(std::string_view kernel, std::string_view params, std::string_view arch) const;
};

}  // namespace jitd::manifest
