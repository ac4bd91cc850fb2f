// The compile worker: a process that runs NVRTC compiles one at a time for
// a WorkerPool over a connected socket. It exists because NVRTC serialises
// compiles inside one process; parallelism comes from several workers.
#pragma once

#include <filesystem>

namespace jitd::compiler {

// Serves the worker protocol (detail/worker_protocol.h) on `fd`, a connected
// stream socket whose other end belongs to a WorkerPool: answers the pool's
// hello, then compiles each request in order and writes its result. A second
// thread keeps reading while a compile runs, so that a cancel frame for it
// sets the flag NVRTC's flow callback polls; a cancel for a job not yet
// started makes it answer CANCELLED without compiling. A request whose job
// does not match its digest (JobDigest) is answered DATA_LOSS, not compiled.
//
// `pch_dir` is this worker's own precompiled-header directory (created if
// missing, emptied at start: a killed predecessor leaves its files). Nothing
// else may use it while the worker runs.
//
// Returns the process exit code: 0 when the pool closes the socket (EOF; a
// compile in flight is cancelled), 1 on a protocol error or a failed write.
// Takes ownership of `fd` (marks it close-on-exec, closes it on return).
int RunCompileWorker(int fd, const std::filesystem::path& pch_dir);

// The command line of a worker process, `--fd N --pch-dir DIR` (argv[0] is
// the command's name): parses it, logs to stderr as "compile-worker PID",
// and runs RunCompileWorker. Used by `jitd worker` and jitd-compile-worker.
// Exit code 2 on a bad command line.
int CompileWorkerMain(int argc, char** argv);

}  // namespace jitd::compiler
