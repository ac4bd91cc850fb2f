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
#include <cstdint>
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

// What a job builds.
enum class ArtifactKind : std::uint8_t {
  // NVRTC: a cubin (or PTX for compute_XX) of device code.
  kCubin = 0,
  // nvcc and the host compiler: a tvm-ffi shared object of host launchers
  // and device code (module_build.h).
  kSharedObject = 1,
};

// How a kSharedObject job is built. The tree's files travel in the job
// (CompileJob::headers, each under its path) and are staged, with the
// generated unit (CompileJob::source, named program_name), into a private
// directory the compile runs in; nothing of the kernels directory is read.
struct ModuleBuild {
  std::string nvcc;      // absolute path of nvcc
  std::string host_cxx;  // nvcc's -ccbin; "" for nvcc's default (c++ on PATH)
  // The compile's options, in order (defaults, kernel options, -gencode,
  // the arch defines, -I of each include dir relative to the staged tree,
  // tvm-ffi's include dirs); the worker adds -c, -o and the depfile.
  std::vector<std::string> compile_options;
  // The link's options (-shared is the worker's): -L tvm-ffi's lib dir,
  // -ltvm_ffi, -lcudart.
  std::vector<std::string> link_options;
  // The directories outside the staged tree a compile may read (canonical):
  // the toolkit, tvm-ffi's headers, the host compiler's system headers.
  // Every one is fingerprinted into the key; a depfile naming a file
  // outside them and the staged tree fails the job (what is hashed is what
  // is compiled).
  std::vector<std::string> read_roots;
  // Why this daemon cannot build modules (serve-only: it keys requests
  // by the toolchain that built its bundles' modules); nvcc is then empty
  // and the build is refused with this. Not part of the digest.
  std::string unavailable;
  // The module toolchain's fingerprint its key was made with, checked
  // again after the build (WorkerPool::Options::check_module_build). Not
  // sent to workers, not part of the digest.
  std::string toolchain_fingerprint;
  bool operator==(const ModuleBuild&) const = default;
};

struct CompileJob {
  ArtifactKind kind = ArtifactKind::kCubin;
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
  // kind == kSharedObject only.
  ModuleBuild module;
};

// Hex SHA-256 over the job's kind, program name, source, headers (name,
// path, content), options, name expressions, log root and module build,
// each length-prefixed:
// what NVRTC compiles and what names its log. Not over use_pch (the cubin is
// the same either way), the timeout, the digest itself or the toolkit
// fingerprint (checked separately, against the disk).
std::string JobDigest(const CompileJob& job);

struct CompileResult {
  // The artefact: a cubin, or the shared object of a kSharedObject job.
  std::string cubin;
  // (name expression, lowered name), one per CompileJob::name_expressions,
  // in the same order; for a shared object (export name, its symbol
  // "__tvm_ffi_<name>"), one per export.
  std::vector<std::pair<std::string, std::string>> lowered_names;
  // NVRTC's program log (warnings on success, errors on failure).
  std::string log;
  // Wall time of nvrtcCompileProgram + getting the cubin, in milliseconds.
  double compile_ms = 0;
  // Whether a precompiled header was used (heap reuse) for this compile.
  bool used_pch = false;
};

}  // namespace jitd::compiler
