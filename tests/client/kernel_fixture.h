// A small kernels tree for tests that compile for real (NVRTC, ~30 ms per
// instantiation): one trivial kernel in namespace sglang with two
// instantiations, so that `jitd warm --all` over it takes a fraction of a
// second where the shipped kernels take tens of seconds.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "process.h"

namespace jitd::testing {

inline constexpr const char* kFixtureKernel = "test.scale";
// Its name expression for dtype=fp32 and the lowered name NVRTC gives it.
inline constexpr const char* kScaleFloat = "sglang::test::scale_kernel<float>";
inline constexpr const char* kScaleFloatLowered = "_ZN6sglang4test12scale_kernelIfEEvPT_PKS2_S2_i";
inline constexpr const char* kScaleDouble = "sglang::test::scale_kernel<double>";

// Writes DIR/kernels.toml and DIR/test/scale.cu; `variant` goes into a
// comment of the source, so that a different variant is a different
// program (new content keys) with the same instantiations.
void WriteFixtureKernels(const std::filesystem::path& dir, const std::string& variant = "");

// Runs `jitd warm --cache-dir CACHE --kernels KERNELS` plus `args` (for
// example {"--all"}) to completion.
ProcessResult RunJitdWarm(const std::filesystem::path& kernels, const std::filesystem::path& cache,
                          const std::vector<std::string>& args, const std::filesystem::path& log);

// A minimal ELF64 image holding `names` as NUL-terminated strings, as a
// cubin's string table holds its symbols: enough for the test driver
// (tests/client/fake_cuda) to load and resolve, without NVRTC.
std::string FakeCubin(const std::vector<std::string>& names);

}  // namespace jitd::testing
