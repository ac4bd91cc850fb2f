// jitd-compile-worker --fd N --pch-dir DIR: a compile worker as its own
// executable, for tests and benchmarks. The daemon runs its own binary in a
// hidden worker mode (`jitd worker ...`) that calls the same function.
#include "compiler/compile_worker.h"

int main(int argc, char** argv) { return jitd::compiler::CompileWorkerMain(argc, argv); }
