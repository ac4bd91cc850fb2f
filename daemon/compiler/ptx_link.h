// The second half of a compile whose PTX carries module-scope globals that no
// code uses: they are dropped from the PTX and the PTX is assembled into a
// cubin by the toolkit's ptxas, the assembler NVRTC itself runs (the same
// options give the same machine code; nvJitLink does not: it assembles for
// linking, and the code differs).
//
// Why: NVRTC puts every `static constexpr` data member of libcu++ and CUB it
// parses (`integral_constant<...>::value` and the like) into the module as a
// `.global`, used or not: a kernel that includes <cub/block/block_reduce.cuh>
// carries ~785 of them, each a symbol and a relocation the CUDA driver
// resolves in cuModuleLoadData (4-5 ms on the H200, against 0.2 ms for a
// kernel without them; docs/gpu-runs/2026-12-02-local-path). Module-scope
// `.global` variables without `.visible` have internal linkage: nothing
// outside the module can name them (cuModuleGetGlobal finds only visible
// ones), so one that no instruction or initializer of the module names is
// dead, and dropping it changes no kernel's code.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace jitd::compiler {

struct StrippedPtx {
  std::string ptx;
  std::size_t dropped = 0;  // declarations removed
};

// `ptx` without the declarations of its module-scope `.global` variables
// (whole lines starting with ".global " and ending with ';', so neither
// `.visible`, `.extern` nor `.weak` ones) whose name appears nowhere else in
// the text. A name is a run of [A-Za-z0-9_$]; a name seen twice anywhere (in
// code, in another variable's initializer, in a comment) is kept, so the
// rule can only keep too much. Lines are otherwise untouched.
StrippedPtx DropUnreferencedGlobals(std::string_view ptx);

// The ptxas options that assemble the PTX of an NVRTC compile made with
// `nvrtc_options` as NVRTC's own cubin would have been: -arch=sm_XX, and
// -lineinfo, --maxrregcount=N and --fmad where the compile has them.
// Empty when an option could change code generation in a way this
// translation does not carry (-G, -Xptxas, relocatable code, LTO, a virtual
// architecture): such compiles keep NVRTC's cubin.
std::vector<std::string> PtxLinkOptions(const std::vector<std::string>& nvrtc_options);

// The toolkit's ptxas, found from the libnvrtc this process loaded
// (<lib>/../bin/ptxas, or <root>/targets/<arch>/lib -> <root>/bin); NOT_FOUND
// when the toolkit has none (a runtime-only install: compiles then keep
// NVRTC's cubins).
absl::StatusOr<std::filesystem::path> ToolkitPtxas();

// Assembles `ptx` into a cubin: `ptxas` runs with `options`
// (PtxLinkOptions) on a file in a fresh directory under `scratch` (mode
// 0700, made by mkdtemp: `scratch` must be a directory no one else can
// rename entries of, such as TMPDIR itself or a private one), removed
// afterwards. INTERNAL with ptxas's output when it fails.
absl::StatusOr<std::string> AssemblePtx(std::string_view ptx, const std::vector<std::string>& options,
                                        const std::filesystem::path& ptxas, const std::filesystem::path& scratch);

}  // namespace jitd::compiler
