// jitd::Module: a cubin loaded with cuModuleLoadData, its symbols resolved.
#include "jitd/cuda_module.h"

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "src/cuda_driver.h"

namespace jitd {

using client_detail::CudaDriver;
using client_detail::GetCudaDriver;
using text::Cat;

absl::Status CudaDriverStatus() { return GetCudaDriver().status(); }

absl::StatusOr<std::string> CurrentDeviceArch() {
  JITD_ASSIGN_OR_RETURN(const CudaDriver* driver, GetCudaDriver());
  const CudaDriver& d = *driver;
  cuda::CUcontext context = nullptr;
  JITD_RETURN_IF_ERROR(d.Check("cuCtxGetCurrent", d.cuCtxGetCurrent(&context)));
  client_detail::CUdevice device = 0;
  if (context != nullptr) {
    JITD_RETURN_IF_ERROR(d.Check("cuCtxGetDevice", d.cuCtxGetDevice(&device)));
  } else {
    JITD_RETURN_IF_ERROR(d.Check("cuDeviceGet(0)", d.cuDeviceGet(&device, 0)));
  }
  int major = 0;
  int minor = 0;
  JITD_RETURN_IF_ERROR(
      d.Check("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
              d.cuDeviceGetAttribute(&major, client_detail::kAttributeComputeCapabilityMajor, device)));
  JITD_RETURN_IF_ERROR(
      d.Check("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)",
              d.cuDeviceGetAttribute(&minor, client_detail::kAttributeComputeCapabilityMinor, device)));
  return Cat("sm_", major, minor);
}

absl::StatusOr<std::unique_ptr<Module>> Module::Load(std::string_view cubin, std::vector<KernelSymbol> symbols,
                                                     std::string key) {
  JITD_ASSIGN_OR_RETURN(const CudaDriver* driver, GetCudaDriver());
  const CudaDriver& d = *driver;
  const std::string what = key.empty() ? std::string("cubin") : Cat("cubin ", key);
  if (cubin.empty()) return absl::InvalidArgumentError(Cat("cannot load an empty ", what));
  JITD_ASSIGN_OR_RETURN(cuda::CUcontext context, client_detail::CurrentOrPrimaryContext(d));
  // A cubin is an ELF file that carries its own size, and the driver reads
  // no further; anything else (PTX, say) is read as NUL-terminated text,
  // which a string_view need not be.
  std::string terminated;
  const void* image = cubin.data();
  if (cubin.substr(0, 4) != std::string_view("\x7f"
                                             "ELF",
                                             4)) {
    terminated = std::string(cubin);
    image = terminated.c_str();
  }
  cuda::CUmodule module = nullptr;
  JITD_RETURN_IF_ERROR(d.Check(Cat("cuModuleLoadData(", what, ")"), d.cuModuleLoadData(&module, image)));
  std::vector<cuda::CUfunction> functions;
  functions.reserve(symbols.size());
  for (const KernelSymbol& symbol : symbols) {
    cuda::CUfunction function = nullptr;
    const client_detail::CUresult result = d.cuModuleGetFunction(&function, module, symbol.lowered_name.c_str());
    if (result != client_detail::kCudaSuccess) {
      d.cuModuleUnload(module);
      return absl::InternalError(Cat(d.Describe(Cat("cuModuleGetFunction(", symbol.lowered_name, ")"), result), ": ",
                                     what, " does not contain the entry point the daemon named for ",
                                     symbol.name_expression));
    }
    functions.push_back(function);
  }
  return std::unique_ptr<Module>(new Module(module, context, std::move(symbols), std::move(functions), std::move(key)));
}

Module::Module(cuda::CUmodule module, cuda::CUcontext context, std::vector<KernelSymbol> symbols,
               std::vector<cuda::CUfunction> functions, std::string key)
    : module_(module),
      context_(context),
      symbols_(std::move(symbols)),
      functions_(std::move(functions)),
      key_(std::move(key)) {}

Module::~Module() {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok() || module_ == nullptr) return;
  const CudaDriver& d = **driver;
  // cuModuleUnload acts on the current context: make ours current for the
  // call and restore the caller's. Failures (a context already destroyed,
  // the driver shutting down at exit) leave nothing to clean up.
  if (d.cuCtxPushCurrent(context_) != client_detail::kCudaSuccess) return;
  d.cuModuleUnload(module_);
  cuda::CUcontext popped = nullptr;
  d.cuCtxPopCurrent(&popped);
}

absl::StatusOr<Function> Module::GetFunction(std::string_view name_expression) const {
  for (size_t i = 0; i < symbols_.size(); ++i) {
    if (symbols_[i].name_expression == name_expression) {
      return Function{functions_[i], symbols_[i].name_expression, symbols_[i].lowered_name};
    }
  }
  std::vector<std::string> known;
  for (const KernelSymbol& symbol : symbols_) known.push_back(symbol.name_expression);
  return absl::NotFoundError(Cat("no entry point '", name_expression, "' in ", key_.empty() ? "this module" : key_,
                                 "; it has: ", known.empty() ? std::string("none") : text::Join(known, ", ")));
}

}  // namespace jitd
