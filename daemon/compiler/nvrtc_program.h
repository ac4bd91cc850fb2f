// One NVRTC compile in the calling process: the unit of work a compile
// worker runs. The daemon does not call this directly (NVRTC serialises
// compiles inside a process, so parallel compiles go through WorkerPool);
// tests and benchmarks do, as the in-process reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/compile_job.h"

namespace jitd::compiler {

// A CUB-sized PCH file is ~170 MB on disk (measured: cub/block/block_reduce.cuh,
// sm_90) and NVRTC's automatic mode writes one per distinct option set, so a
// long-lived worker's directory only grows. Past this many bytes it is emptied
// before the next PCH compile: about six option sets, and the next compile of
// each pays one PCH creation again.
inline constexpr std::uintmax_t kDefaultMaxPchDirBytes = std::uintmax_t{1} << 30;

// A compile worker's precompiled-header state: NVRTC's automatic PCH mode
// (`-pch --pch-dir=dir`) creates a PCH file from a program's leading
// #includes on the first compile and reuses it on later compiles whose
// include prefix and options match (other name expressions, even another
// program name). The PCH is loaded into a process-wide heap at a fixed
// address, so a file is only usable by the process that made it: one
// PchState per process, and the directory must not be shared.
// Not thread-safe (NVRTC serialises compiles anyway).
struct PchState {
  // Created if missing. NVRTC deletes the files it made at a clean exit; a
  // killed worker leaves them, so whoever starts a worker empties it first.
  std::filesystem::path dir;
  std::uintmax_t max_dir_bytes = kDefaultMaxPchDirBytes;
  // Counters, for logs and tests.
  std::uint64_t created = 0;  // compiles that wrote a new PCH file
  std::uint64_t used = 0;     // compiles that loaded one
};

// Compiles `job` with NVRTC in this process: the source and job.headers go to
// NVRTC from memory (nothing of the kernels tree is read from disk), every
// name expression is added,
// the program compiled with job.options, and the cubin and each lowered name
// read back. Thread-safe, but concurrent calls run one at a time inside NVRTC.
//
// PCH: when job.use_pch and `pch` is non-null, "-pch --pch-dir=<pch->dir>
// --pch-verbose=false" go before job.options (NVRTC requires PCH options
// first). NVRTC's "creating/using precompiled header file" lines are taken out
// of the log and reported as result.used_pch instead, so a result does not
// depend on which worker produced it; the cubin is byte-identical either way
// provided the options make it deterministic at all (see -frandom-seed below).
// With `pch` null, use_pch is ignored.
//
// Determinism: NVRTC names internal-linkage symbols with a random number per
// compile unless the options carry -frandom-seed=<x>; without it two compiles
// of the same job give different cubins (same size, different bytes).
//
// `cancel` (may be null) is polled through nvrtcSetFlowCallback. NVRTC first
// calls it after the front end (measured: ~1.2 s into a 1.3 s CUB compile), so
// a cancel during parsing takes effect only then.
//
// Errors (all but CANCELLED carry the NVRTC log in the message and as a
// payload, see NvrtcLogOf):
//   FAILED_PRECONDITION  the program does not compile (NVRTC_ERROR_COMPILATION);
//                        also a compile that produced no cubin (a virtual
//                        -arch=compute_XX).
//   INVALID_ARGUMENT     NVRTC rejected an option or a name expression.
//   CANCELLED            *cancel became true during the compile.
//   RESOURCE_EXHAUSTED   NVRTC ran out of memory.
//   INTERNAL             any other NVRTC failure.
absl::StatusOr<CompileResult> CompileInProcess(const CompileJob& job, PchState* pch, const std::atomic<bool>* cancel);

// `log` with every file name NVRTC prints for the job's program or headers
// ("common/dtype.cuh(12): error", "compilation of \"act/silu.cu\"") shown as
// the user's file, job.log_root/<path>. Unchanged when log_root is empty.
// CompileInProcess applies it to every log it returns.
std::string LogWithUserPaths(const CompileJob& job, std::string_view log);

// The NVRTC log attached to an error from CompileInProcess or WorkerPool
// (absent for errors that did not come from NVRTC).
std::optional<std::string> NvrtcLogOf(const absl::Status& status);
// Returns `status` with `log` attached as the payload NvrtcLogOf reads.
absl::Status WithNvrtcLog(absl::Status status, const std::string& log);

struct NvrtcVersionNumber {
  int major = 0;
  int minor = 0;
};
// The version of the libnvrtc this process loaded (13.0 here).
NvrtcVersionNumber NvrtcVersion();
// The SM versions this NVRTC can target, ascending (75, 80, ..., 121 for
// 13.0); empty if NVRTC could not say.
std::vector<int> SupportedArchs();

}  // namespace jitd::compiler
