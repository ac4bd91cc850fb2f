// A kernels tree made by a test: one trivial kernel (~25 ms to compile)
// with `values` instantiations, so that a test can ask for as many distinct
// cold keys as it needs (times the archs it asks for).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "jitd/v1/compiler.pb.h"

namespace jitd::testing {

// Writes DIR/kernels.toml and DIR/many.cu: kernel "many.fill", param n
// with values "v0".."v<values-1>".
void WriteManyKernelsTree(const std::filesystem::path& dir, int values);

// Archs NVRTC 13 compiles for, to multiply the keys.
const std::vector<std::string>& ManyArchs();

// A request for instantiation n of many.fill for `arch`.
v1::GetKernelRequest ManyRequest(int n, const std::string& arch,
                                 v1::GetKernelRequest::Mode mode = v1::GetKernelRequest::COMPILE);

// The request value of instantiation n ("v7"), as the resolver takes it.
std::string ManyValue(int n);

}  // namespace jitd::testing
