// CUDA modules from cubins: the CUDA half of `jitd::client`.
//
// jitd/client.h includes this header; Client::GetKernel() hands back the
// Module declared here. It stands alone too: Module::Load() turns any cubin
// and its symbol table (KernelBinary from Client::GetKernelBinary(), or a
// file of your own) into a loaded module.
//
// The CUDA driver is never linked. libcuda.so.1 is opened with dlopen() the
// first time something here needs it, and cuInit(0) runs once per process,
// so a program linked with jitd::client starts and runs on a host without a
// GPU or driver: only the calls that need the driver fail there, with
// FAILED_PRECONDITION naming libcuda.so.1 and the loader's reason.
//
// The handle types are the driver's own (`struct CUmod_st*` is cuda.h's
// CUmodule), declared here so that this header does not need cuda.h; with
// cuda.h included as well, jitd::cuda::CUmodule and ::CUmodule are the same
// type, and Function::handle goes straight to cuLaunchKernel.
//
// Thread safety: every function here may be called from any thread; a
// Module is immutable once loaded and may be shared.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// cuda.h's handle types, by their struct tags (which are what make them
// compatible with cuda.h's typedefs).
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;

namespace jitd {

namespace cuda {
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
}  // namespace cuda

// An entry point of a cubin: the name expression the kernel's manifest
// gives ("sglang::moe::topk_sum_kernel<__nv_bfloat16>") and the lowered
// (mangled) name NVRTC produced for it, which is what the cubin contains.
struct KernelSymbol {
  std::string name_expression;
  std::string lowered_name;
  // Spelled out: the header stays C++17 (no defaulted comparisons).
  bool operator==(const KernelSymbol& other) const {
    return name_expression == other.name_expression && lowered_name == other.lowered_name;
  }
};

// Opens libcuda.so.1 and runs cuInit(0), both once per process; later calls
// return the first answer. FAILED_PRECONDITION naming libcuda.so.1 and
// dlerror()'s text when the library cannot be opened (no driver installed),
// or naming the failing driver call and its CUDA error (no device, driver
// too old for a needed entry point, ...).
absl::Status CudaDriverStatus();

// The architecture of the calling thread's current CUDA context's device,
// or of device 0 when the thread has no current context: "sm_" followed by
// the compute capability's major and minor digits ("sm_90" on an H100 or
// H200, "sm_100" on a B200). The `a`/`f` variants are never assumed.
// Errors as CudaDriverStatus().
absl::StatusOr<std::string> CurrentDeviceArch();

// One entry point of a loaded Module, ready for cuLaunchKernel.
struct Function {
  cuda::CUfunction handle = nullptr;
  std::string name_expression;
  std::string lowered_name;
};

// A loaded CUDA module that owns its handle: the destructor unloads it (in
// the context it was loaded into). Every symbol is resolved at load, so
// GetFunction() never calls the driver.
class Module {
 public:
  // Loads `cubin` with cuModuleLoadData into the calling thread's current
  // context. A thread without one gets the primary context of device 0,
  // retained for the rest of the process and made current, as the CUDA
  // runtime does on first use. `key` names the module in messages (the
  // content key; may be empty). Errors: FAILED_PRECONDITION when the driver
  // is unusable (see CudaDriverStatus) or rejects the image (for example a
  // cubin built for another architecture: CUDA_ERROR_NO_BINARY_FOR_GPU);
  // INTERNAL when a symbol's lowered name is not in the cubin.
  static absl::StatusOr<std::unique_ptr<Module>> Load(std::string_view cubin, std::vector<KernelSymbol> symbols,
                                                      std::string key = {});

  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The entry point for a name expression, exactly as the manifest's
  // template spells it with the params substituted. NOT_FOUND listing the
  // module's name expressions for any other string.
  absl::StatusOr<Function> GetFunction(std::string_view name_expression) const;

  const std::vector<KernelSymbol>& symbols() const { return symbols_; }
  const std::string& key() const { return key_; }
  cuda::CUmodule handle() const { return module_; }
  cuda::CUcontext context() const { return context_; }

 private:
  Module(cuda::CUmodule module, cuda::CUcontext context, std::vector<KernelSymbol> symbols,
         std::vector<cuda::CUfunction> functions, std::string key);

  cuda::CUmodule module_;
  cuda::CUcontext context_;
  std::vector<KernelSymbol> symbols_;
  std::vector<cuda::CUfunction> functions_;  // parallel to symbols_
  std::string key_;
};

}  // namespace jitd
