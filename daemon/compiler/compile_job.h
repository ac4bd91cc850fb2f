// What a compile worker is given and what it gives back: one NVRTC program,
// fully resolved (no manifest, no request validation, no cache keys here).
//
// Hermetic by construction: the program's source and every project header it
// can include travel in the job as bytes and reach NVRTC from memory
// (nvrtcCreateProgram's headers), so nothing of the kernels directory is read
// from disk at compile time. Only the toolkit's headers are read from disk
// (the -I options), and those are watched (toolkit_watch.h).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace jitd::compiler {

// A project header as NVRTC sees it: `name` is exactly what an #include line
// spells ("common/dtype.cuh", or "dtype.cuh" from a file beside it); the
// same file may travel under several names. `path` is the file's path
// relative to the kernels directory, used only to name it in NVRTC's log.
struct CompileHeader {
  std::string name;
  std::string path;
  std::string content;
  bool operator==(const CompileHeader&) const = default;
};

struct CompileJob {
  // Name NVRTC reports in diagnostics, e.g. "diffusion/modulate_scale_shift.cu"
  // (relative: it is part of the key and the digest, a machine path is not).
  std::string program_name;
  // The program's source text.
  std::string source;
  // Every project header the source can include, in memory.
  std::vector<CompileHeader> headers;
  // Every NVRTC option, in order: defaults, kernel options, request options,
  // -arch=sm_XX, -frandom-seed, and the toolkit's -I paths (cccl/, include/).
  // Never an -I into the kernels directory: project headers are `headers`.
  std::vector<std::string> options;
  // Name expressions to lower, e.g. "sglang::moe::topk_sum_kernel<float>".
  std::vector<std::string> name_expressions;
  // Header-heavy program (CUB): the worker keeps a precompiled header for
  // it across compiles. The cubin is byte-identical either way.
  bool use_pch = false;
  // The compile is abandoned (the worker killed and replaced) past this.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // JobDigest(*this), set by whoever built the job (the resolver). A worker
  // recomputes it on receipt and refuses a job that does not match
  // (DATA_LOSS); WorkerPool fills it in when empty (jobs built by hand).
  std::string digest;
  // For people reading NVRTC's log: the directory the program and headers
  // came from (the user's kernels/). The log's "common/dtype.cuh(12): error"
  // becomes "<log_root>/common/dtype.cuh(12): error". Empty: left as is.
  // Not part of any key (where the tree sits is not part of the program).
  std::string log_root;
  // The toolkit identity (ToolkitIdentity::fingerprint) this job's key was
  // computed under. A WorkerPool with a ToolkitWatch refuses the job
  // (UNAVAILABLE "toolkit changed") when the toolkit on disk is no longer
  // that one, before and after compiling. Empty: not checked.
  std::string toolkit_fingerprint;
};

// Hex SHA-256 over the job's program name, source, headers (name, path,
// content), options, name expressions and log root, each length-prefixed:
// what NVRTC compiles and what names its log. Not over use_pch (the cubin is
// the same either way), the timeout, the digest itself or the toolkit
// fingerprint (checked separately, against the disk).
std::string JobDigest(const CompileJob& job);

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
