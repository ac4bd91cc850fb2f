#include "cuda_driver.h"

#include <dlfcn.h>

#include <mutex>
#include <utility>

#include "jitd/base/text.h"

namespace jitd::gpu {
namespace {

using text::Cat;

constexpr const char* kDriverLibrary = "libcuda.so.1";

// dlsym() answers void*; POSIX guarantees it converts to a function pointer.
template <typename Fn>
bool Bind(void* library, const char* name, Fn* slot) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) return false;
  *slot = reinterpret_cast<Fn>(symbol);
  return true;
}

absl::StatusOr<CudaDriver> Open() {
  // The same soname and flags as jitd's client: dlopen() hands back the copy
  // the client already opened, so both talk to one driver instance.
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        Cat("dlopen(\"", kDriverLibrary, "\") failed: ", why == nullptr ? "unknown error" : why));
  }
  CudaDriver d;
  struct Entry {
    const char* name;
    bool bound;
  };
  const Entry entries[] = {
      {"cuInit", Bind(library, "cuInit", &d.cuInit)},
      {"cuGetErrorName", Bind(library, "cuGetErrorName", &d.cuGetErrorName)},
      {"cuGetErrorString", Bind(library, "cuGetErrorString", &d.cuGetErrorString)},
      {"cuDeviceGet", Bind(library, "cuDeviceGet", &d.cuDeviceGet)},
      {"cuDevicePrimaryCtxRetain", Bind(library, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain)},
      {"cuCtxSetCurrent", Bind(library, "cuCtxSetCurrent", &d.cuCtxSetCurrent)},
      {"cuCtxSynchronize", Bind(library, "cuCtxSynchronize", &d.cuCtxSynchronize)},
      {"cuMemAlloc_v2", Bind(library, "cuMemAlloc_v2", &d.cuMemAlloc_v2)},
      {"cuMemFree_v2", Bind(library, "cuMemFree_v2", &d.cuMemFree_v2)},
      {"cuMemcpyHtoD_v2", Bind(library, "cuMemcpyHtoD_v2", &d.cuMemcpyHtoD_v2)},
      {"cuMemcpyDtoH_v2", Bind(library, "cuMemcpyDtoH_v2", &d.cuMemcpyDtoH_v2)},
      {"cuMemsetD8_v2", Bind(library, "cuMemsetD8_v2", &d.cuMemsetD8_v2)},
      {"cuLaunchKernel", Bind(library, "cuLaunchKernel", &d.cuLaunchKernel)},
      {"cuFuncGetAttribute", Bind(library, "cuFuncGetAttribute", &d.cuFuncGetAttribute)},
  };
  for (const Entry& entry : entries) {
    if (!entry.bound) return absl::FailedPreconditionError(Cat(kDriverLibrary, " has no ", entry.name));
  }
  if (absl::Status s = d.Check("cuInit", d.cuInit(0)); !s.ok()) return absl::FailedPreconditionError(s.message());
  return d;
}

}  // namespace

std::string CudaDriver::Describe(std::string_view call, CUresult result) const {
  const char* name = nullptr;
  const char* what = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &what) != CUDA_SUCCESS) what = nullptr;
  return Cat(call, ": ", name != nullptr ? std::string(name) : Cat("CUDA error ", static_cast<int>(result)),
             what != nullptr ? Cat(" (", what, ")") : std::string());
}

absl::Status CudaDriver::Check(std::string_view call, CUresult result) const {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  return absl::InternalError(Describe(call, result));
}

absl::StatusOr<const CudaDriver*> GetCudaDriver() {
  // Never destroyed: DeviceBuffers in static objects free through it at exit.
  static const absl::StatusOr<CudaDriver>* const driver = new absl::StatusOr<CudaDriver>(Open());
  if (!driver->ok()) return driver->status();
  return &**driver;
}

absl::Status MakePrimaryContextCurrent() {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  const CudaDriver& d = **driver;
  static std::once_flag once;
  static CUcontext primary = nullptr;
  static absl::Status* retained = nullptr;
  std::call_once(once, [&] {
    CUdevice device = 0;
    absl::Status s = d.Check("cuDeviceGet(0)", d.cuDeviceGet(&device, 0));
    if (s.ok()) s = d.Check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&primary, device));
    retained = new absl::Status(std::move(s));
  });
  if (!retained->ok()) return *retained;
  return d.Check("cuCtxSetCurrent", d.cuCtxSetCurrent(primary));
}

absl::Status Synchronize() {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  return (*driver)->Check("cuCtxSynchronize", (*driver)->cuCtxSynchronize());
}

absl::Status LaunchAndWait(CUfunction function, LaunchShape shape, std::span<void*> params) {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  const CudaDriver& d = **driver;
  const CUresult launched = d.cuLaunchKernel(function, shape.grid, 1, 1, shape.block, 1, 1, /*sharedMemBytes=*/0,
                                             /*hStream=*/nullptr, params.data(), /*extra=*/nullptr);
  if (absl::Status s = d.Check(Cat("cuLaunchKernel(grid ", shape.grid, ", block ", shape.block, ")"), launched);
      !s.ok()) {
    return s;
  }
  return d.Check("cuCtxSynchronize after the launch", d.cuCtxSynchronize());
}

absl::StatusOr<int> FunctionPtxVersion(CUfunction function) {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  int version = 0;
  const CUresult got = (*driver)->cuFuncGetAttribute(&version, CU_FUNC_ATTRIBUTE_PTX_VERSION, function);
  if (absl::Status s = (*driver)->Check("cuFuncGetAttribute(PTX_VERSION)", got); !s.ok()) return s;
  return version;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(std::size_t bytes) {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  if (bytes == 0) bytes = 1;  // cuMemAlloc refuses 0
  CUdeviceptr ptr = 0;
  if (absl::Status s = (*driver)->Check(Cat("cuMemAlloc(", bytes, " bytes)"), (*driver)->cuMemAlloc_v2(&ptr, bytes));
      !s.ok()) {
    return s;
  }
  return DeviceBuffer(ptr, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ == 0) return;
  // A buffer exists only once the driver was opened, so this cannot fail.
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  // After a kernel fault the context is unusable and cuMemFree fails; there
  // is nothing better to do with that than to leak the buffer.
  if (driver.ok()) (void)(*driver)->cuMemFree_v2(ptr_);
}

absl::Status DeviceBuffer::CheckRange(std::size_t bytes, std::size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    return absl::OutOfRangeError(Cat("bytes [", offset, ", ", offset + bytes, ") of a ", bytes_, "-byte buffer"));
  }
  return absl::OkStatus();
}

absl::Status DeviceBuffer::Fill(std::uint8_t value) {
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  return (*driver)->Check("cuMemsetD8", (*driver)->cuMemsetD8_v2(ptr_, value, bytes_));
}

absl::Status DeviceBuffer::Upload(const void* src, std::size_t bytes, std::size_t offset) {
  if (absl::Status s = CheckRange(bytes, offset); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  return (*driver)->Check("cuMemcpyHtoD", (*driver)->cuMemcpyHtoD_v2(ptr_ + offset, src, bytes));
}

absl::Status DeviceBuffer::Download(void* dst, std::size_t bytes, std::size_t offset) const {
  if (absl::Status s = CheckRange(bytes, offset); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  absl::StatusOr<const CudaDriver*> driver = GetCudaDriver();
  if (!driver.ok()) return driver.status();
  return (*driver)->Check("cuMemcpyDtoH", (*driver)->cuMemcpyDtoH_v2(dst, ptr_ + offset, bytes));
}

}  // namespace jitd::gpu
