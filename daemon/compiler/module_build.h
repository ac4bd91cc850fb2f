// Building a kSharedObject job (compile_job.h) inside a compile worker: the
// job's tree files and generated unit are staged into a private directory,
// nvcc compiles the unit there (the host compiler for host code, -MD for a
// depfile) and links it -shared against tvm-ffi; the depfile is checked
// against the job's read roots, and the shared object against its exports.
//
//   SCRATCH/tree/<path>         each CompileJob::headers file, by its path
//   SCRATCH/tree/<program_name> the generated unit (CompileJob::source)
//   SCRATCH/tmp/                nvcc's TMPDIR
//   SCRATCH/unit.o, unit.d, module.so, build.log
//
// The commands run in SCRATCH/tree with an environment of their own (PATH
// is the host compiler's directory then /usr/bin:/bin, TMPDIR as above,
// LC_ALL=C; nothing else: NVCC_APPEND_FLAGS, CPATH and the like would
// change what is compiled without changing the key).
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/compile_job.h"

namespace jitd::compiler {

// Builds `job` (kind kSharedObject) in `scratch`, a directory private to the
// caller (emptied first and after). The result's `cubin` is the shared
// object; `lowered_names` pairs each export name with __tvm_ffi_<name>;
// `log` is what nvcc and the host compiler printed.
// Errors, each with the build log attached (NvrtcLogOf):
//   INVALID_ARGUMENT     nvcc or the link failed (the log says why)
//   FAILED_PRECONDITION  the depfile names a file outside the staged tree
//                        and the read roots, or an export is missing
//   CANCELLED            `cancel` was set (the commands are killed)
//   DEADLINE_EXCEEDED    the job's timeout passed (the commands are killed)
//   INTERNAL             the scratch directory or a spawn failed
// The exports checked are the job's name_expressions, which for a
// kSharedObject job are its export names, in manifest order.
absl::StatusOr<CompileResult> BuildModule(const CompileJob& job, const std::filesystem::path& scratch,
                                          const std::atomic<bool>* cancel);

// The files a make-style depfile ("target: dep dep \\\n dep") names, in
// order, with "\ " read as a space and "$$" as "$". Exposed for tests.
std::vector<std::string> DepfileInputs(std::string_view depfile);

}  // namespace jitd::compiler
