// The namespace guard: proves, before any request is made, that every kernel
// jitd ships lives in `namespace sglang` and that every registered
// instantiation compiles and resolves. The one public header of `jitd_guard`.
//
// Two checks, each producing one Finding per problem:
//  * CheckSources (textual, milliseconds; the daemon runs it at start): every
//    .cu/.cuh/.h file of the kernels directory, registered in the manifest or
//    not, holds at its top level nothing but `namespace sglang { ... }` (or
//    `namespace sglang::x { ... }`), includes and macros aside; and every
//    manifest name expression names something in sglang::. This catches the
//    two classic misses: a top-level anonymous namespace, and a
//    pseudo-namespace (`sglang_modulate_scale_shift`) never wrapped in
//    `namespace sglang`.
//  * CompileAll (NVRTC, minutes; `jitd lint`, warm-up, CI): every manifest
//    instantiation for every arch compiles and each name expression lowers.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/compile_job.h"
#include "manifest/manifest.h"

namespace jitd::guard {

struct Finding {
  std::string file;    // relative to the kernels directory
  int line = 0;        // 1-based; 0 when not tied to a line
  std::string kernel;  // manifest kernel name, when known
  std::string what;    // what is missing or wrong
  // "file:line: [kernel] what"
  std::string ToString() const;
};

// Top-level constructs of one source that are not `namespace sglang...`.
std::vector<Finding> CheckSource(std::string_view file, std::string_view source);

// CheckSource over every source file of the tree, plus the manifest's name
// expressions. Findings are sorted by file and line.
std::vector<Finding> CheckSources(const manifest::KernelTree& tree);

using CompileFunction = std::function<absl::StatusOr<compiler::CompileResult>(const compiler::CompileJob&)>;
// Called after each instantiation: (done, total, kernel, params, arch, ok).
using Progress = std::function<void(size_t, size_t, const std::string&, const std::string&, const std::string&, bool)>;

// "" when a kernel's declared signature (kernels.toml `signature`) passes
// what the compiled entry point with `lowered_name` takes, argument by
// argument (pointer or not, const, scalar width); else what differs.
std::string SignatureMismatch(std::string_view declared, std::string_view lowered_name);

// Compiles every instantiation for every arch with `compile` (called from
// up to `parallelism` threads at once) and checks every name expression
// lowered to a non-empty name, and to an entry point whose arguments are
// the ones the kernel's `signature` declares. Kernels named in `skip`
// (those with source findings, whose compile would only repeat them) are
// left out.
std::vector<Finding> CompileAll(const manifest::Resolver& resolver, const std::vector<std::string>& archs,
                                const CompileFunction& compile, size_t parallelism, const Progress& progress = {},
                                const std::set<std::string>& skip = {});

}  // namespace jitd::guard
