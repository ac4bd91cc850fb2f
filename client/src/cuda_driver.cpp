#include "src/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "jitd/base/status.h"
#include "jitd/base/text.h"

namespace jitd::client_detail {

using text::Cat;
namespace {

// dlsym() answers void*; POSIX guarantees that it converts to a function
// pointer, which C++ spells as a conditionally-supported cast.
template <typename Fn>
bool Bind(void* library, const char* name, Fn* slot) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) return false;
  *slot = reinterpret_cast<Fn>(symbol);
  return true;
}

absl::StatusOr<CudaDriver> Open() {
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, so a
  // program that links libcuda itself (or loads it through the CUDA
  // runtime) is unaffected; dlopen of the same soname shares one copy.
  void* library = dlopen(kCudaDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        Cat("the CUDA driver is not available: dlopen(\"", kCudaDriverLibrary,
            "\") failed: ", why == nullptr ? "unknown error" : why,
            " (install the NVIDIA driver, or use Client::GetKernelBinary() for the cubin without loading it)"));
  }
  CudaDriver d;
  struct Entry {
    const char* name;
    bool bound;
  };
  const Entry required[] = {
      {"cuInit", Bind(library, "cuInit", &d.cuInit)},
      {"cuGetErrorName", Bind(library, "cuGetErrorName", &d.cuGetErrorName)},
      {"cuGetErrorString", Bind(library, "cuGetErrorString", &d.cuGetErrorString)},
      {"cuDeviceGet", Bind(library, "cuDeviceGet", &d.cuDeviceGet)},
      {"cuDeviceGetAttribute", Bind(library, "cuDeviceGetAttribute", &d.cuDeviceGetAttribute)},
      {"cuDevicePrimaryCtxRetain", Bind(library, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain)},
      {"cuCtxGetCurrent", Bind(library, "cuCtxGetCurrent", &d.cuCtxGetCurrent)},
      {"cuCtxSetCurrent", Bind(library, "cuCtxSetCurrent", &d.cuCtxSetCurrent)},
      {"cuCtxGetDevice", Bind(library, "cuCtxGetDevice", &d.cuCtxGetDevice)},
      {"cuCtxPushCurrent_v2", Bind(library, "cuCtxPushCurrent_v2", &d.cuCtxPushCurrent)},
      {"cuCtxPopCurrent_v2", Bind(library, "cuCtxPopCurrent_v2", &d.cuCtxPopCurrent)},
      {"cuModuleLoadData", Bind(library, "cuModuleLoadData", &d.cuModuleLoadData)},
      {"cuModuleUnload", Bind(library, "cuModuleUnload", &d.cuModuleUnload)},
      {"cuModuleGetFunction", Bind(library, "cuModuleGetFunction", &d.cuModuleGetFunction)},
  };
  for (const Entry& entry : required) {
    if (!entry.bound) {
      return absl::FailedPreconditionError(
          Cat(kCudaDriverLibrary, " has no ", entry.name, " (the NVIDIA driver is too old for jitd's client)"));
    }
  }
  Bind(library, "cuCtxGetId", &d.cuCtxGetId);  // optional
  JITD_RETURN_IF_ERROR(d.Check("cuInit", d.cuInit(0)));
  return d;
}

}  // namespace

std::string CudaDriver::Describe(std::string_view call, CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != kCudaSuccess) name = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &text) != kCudaSuccess) text = nullptr;
  return Cat(call, ": ", name != nullptr ? std::string(name) : Cat("CUDA error ", result),
             text != nullptr ? Cat(" (", text, ")") : std::string());
}

absl::Status CudaDriver::Check(std::string_view call, CUresult result, absl::StatusCode code) const {
  if (result == kCudaSuccess) return absl::OkStatus();
  return absl::Status(code, Describe(call, result));
}

absl::StatusOr<const CudaDriver*> GetCudaDriver() {
  // Never destroyed: Modules held in static objects unload through it while
  // the process exits.
  static const absl::StatusOr<CudaDriver>* const driver = new absl::StatusOr<CudaDriver>(Open());
  if (!driver->ok()) return driver->status();
  return &**driver;
}

absl::StatusOr<cuda::CUcontext> CurrentOrPrimaryContext(const CudaDriver& driver) {
  cuda::CUcontext context = nullptr;
  JITD_RETURN_IF_ERROR(driver.Check("cuCtxGetCurrent", driver.cuCtxGetCurrent(&context)));
  if (context != nullptr) return context;
  // Retained once and never released: the primary context then lives as
  // long as the process, as it does under the CUDA runtime.
  static std::once_flag once;
  static absl::StatusOr<cuda::CUcontext>* primary = nullptr;
  std::call_once(once, [&] {
    CUdevice device = 0;
    cuda::CUcontext retained = nullptr;
    absl::Status s = driver.Check("cuDeviceGet(0)", driver.cuDeviceGet(&device, 0));
    if (s.ok()) s = driver.Check("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(&retained, device));
    primary = s.ok() ? new absl::StatusOr<cuda::CUcontext>(retained) : new absl::StatusOr<cuda::CUcontext>(s);
  });
  if (!primary->ok()) return primary->status();
  JITD_RETURN_IF_ERROR(driver.Check("cuCtxSetCurrent", driver.cuCtxSetCurrent(**primary)));
  return **primary;
}

uint64_t ContextId(const CudaDriver& driver, cuda::CUcontext context) {
  unsigned long long id = 0;
  if (driver.cuCtxGetId != nullptr && driver.cuCtxGetId(context, &id) == kCudaSuccess) return id;
  return reinterpret_cast<uintptr_t>(context);
}

}  // namespace jitd::client_detail
