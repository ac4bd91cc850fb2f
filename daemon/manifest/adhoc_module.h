// Ad-hoc modules: load_jit's form. SGLang builds its module specs at run
// time (template arguments from Python), so a client may send the spec
// itself instead of a manifest name: the tree files the unit includes, the
// include dirs, the exports and nvcc options. The daemon builds it exactly
// as a declared module kernel (module_kernel.h), keyed and cached the same
// way, for a served tree whose kernels.toml allows it:
//
//   adhoc_modules = true
//
// never for a locked tree. What a client sends is bounded and checked
// here: paths inside the tree, exports that are C identifiers bound to
// expressions of names, numbers and template arguments only (no quote, no
// parenthesis, no '#': an export cannot read a file or run asm), options
// from nvcc's allow-list. The client names its copy of the tree by its
// fingerprint (AdhocFingerprint), and a request whose copy differs from
// the daemon's is refused: the server would load code built from other
// bytes than its own.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::manifest {

struct KernelDef;

// What a request sends (jitd.v1.ModuleSpec).
struct AdhocModule {
  std::vector<std::string> sources;                          // tree paths, included in order
  std::vector<std::string> include_dirs;                     // tree directories, -I in order
  std::vector<std::pair<std::string, std::string>> exports;  // (name, C++ expression)
  std::vector<std::string> options;                          // nvcc options, ModuleOptionProblem's allow-list
  std::string tree_fingerprint;                              // the client's AdhocFingerprint of its copy
};

// Bounds on one ad-hoc spec (every request's cost is bounded).
inline constexpr size_t kMaxAdhocSources = 64;
inline constexpr size_t kMaxAdhocIncludeDirs = 16;
inline constexpr size_t kMaxAdhocExports = 64;
inline constexpr size_t kMaxAdhocOptions = 64;
inline constexpr size_t kMaxAdhocExpression = 1024;
inline constexpr size_t kMaxAdhocPath = 512;

// Why `expression` may not be an ad-hoc export's, or "" when it may: 1 to
// 1024 characters of letters, digits, '_', ':', '<', '>', ',', '.', '&',
// '*', '+', '-' and spaces ("AlignKernel<64, true>::run", "scale<bf16_t>",
// "norm<1e-6f>").
std::string AdhocExpressionProblem(std::string_view expression);

// Whether `path` (relative to the tree) is one of the files an ad-hoc
// fingerprint covers: a name ending in .cu, .cuda, .cuh, .h, .hh, .hpp,
// .hxx, .c, .cc, .cpp, .cxx, .inc, .inl or .ipp. kernels.toml is not one:
// a server's copy of SGLang's tree has none.
bool IsAdhocTreeFile(std::string_view path);

// SHA-256 over every file of `files` that IsAdhocTreeFile, in path order,
// each as keys::TreeFingerprint adds it ("path", u64 little-endian length,
// the path, "content", length, the bytes): what a client computes over its
// own copy of the tree (jitd.modules.tree_fingerprint in Python).
std::string AdhocFingerprint(const std::map<std::string, std::string>& files);

// The kernel `name` of `spec` as a module kernel of a tree (its
// definition: no params, the spec's sources, include dirs, exports and
// options), or INVALID_ARGUMENT naming the first thing wrong with it.
absl::StatusOr<KernelDef> AdhocKernelDef(std::string_view name, const AdhocModule& spec);

}  // namespace jitd::manifest
