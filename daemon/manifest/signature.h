// Kernel signatures: the argument list kernels.toml declares for a kernel's
// entry points, and the one its compiled entry point really takes (read from
// the lowered name), both reduced to what a launch must pass: per argument,
// a pointer (to const or not) or a scalar of a given width. The compile-all
// guard compares the two, so the signature `jitctl kernels -l` and the docs
// show is the one the cubin has.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::manifest {

// What one argument is, as a launch passes it: "pointer", "const pointer",
// "int64", "uint64", "int32", "uint32", "int16", "uint16", "int8", "uint8",
// "float32", "float64", "bool", or "struct NAME" for a struct passed by
// value (NAME unqualified, without template arguments: `sglang::ew::Params`
// and `Params<float>` are both "struct Params").
using ArgKind = std::string;

// The kinds of a declared argument list, "(T* out, const T* x, int64_t n,
// float eps)": each argument is a type and a name; a type is a pointer
// (`X*`, `const X*`, `X const*`), a fixed-width scalar (int64_t, int32_t,
// uint32_t, ..., float, double, bool; `int` is int32, `long` int64) or a
// struct by value, which says so: `const __grid_constant__ Params p` or
// `struct Params p` (so that a misspelt scalar is still an error).
// INVALID_ARGUMENT naming the argument it cannot read.
absl::StatusOr<std::vector<ArgKind>> DeclaredArgs(std::string_view signature);

// The kinds of a compiled entry point's arguments, from its lowered
// (Itanium-mangled) name; a class type is a struct by value.
// INVALID_ARGUMENT when the name does not demangle to a function or an
// argument is of a type no launch can pass.
absl::StatusOr<std::vector<ArgKind>> CompiledArgs(std::string_view lowered_name);

}  // namespace jitd::manifest
