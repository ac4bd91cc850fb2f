// What a compile worker is given and what it gives back: one NVRTC program,
// fully resolved (no manifest, no request validation, no cache keys here).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace jitd::compiler {

struct CompileJob {
  // Name NVRTC reports in diagnostics, e.g. "diffusion/modulate_scale_shift.cu".
  std::string program_name;
  // The program's source text.
  std::string source;
  // Every NVRTC option, in order: defaults, kernel options, request options,
  // -arch=sm_XX, and the -I include paths (an immutable snapshot of the
  // kernels tree first, then the toolkit's cccl/ and include/).
  std::vector<std::string> options;
  // Name expressions to lower, e.g. "sglang::moe::topk_sum_kernel<float>".
  std::vector<std::string> name_expressions;
  // Header-heavy program (CUB): the worker keeps a precompiled header for
  // it across compiles. The cubin is byte-identical either way.
  bool use_pch = false;
  // The compile is abandoned (the worker killed and replaced) past this.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct CompileResult {
  std::string cubin;
  // (name expression, lowered name), one per CompileJob::name_expressions,
  // in the same order.
  std::vector<std::pair<std::string, std::string>> lowered_names;
  // NVRTC's program log (warnings on success, errors on failure).
  std::string log;
  // Wall time of nvrtcCompileProgram + getting the cubin, in milliseconds.
  double compile_ms = 0;
  // Whether a precompiled header was used (heap reuse) for this compile.
  bool used_pch = false;
};

}  // namespace jitd::compiler
