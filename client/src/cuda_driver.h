// The CUDA driver API, opened at run time: the few entry points jitd's
// client uses, looked up in libcuda.so.1 with dlsym. Nothing here includes
// cuda.h; the signatures are the driver's ABI, spelled with cuda.h's struct
// tags and integer types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/cuda_module.h"

namespace jitd::client_detail {

// cuda.h: CUresult is an enum (CUDA_SUCCESS = 0), CUdevice an int.
using CUresult = int;
using CUdevice = int;
inline constexpr CUresult kCudaSuccess = 0;
// CUdevice_attribute values (stable since CUDA 2.0).
inline constexpr int kAttributeComputeCapabilityMajor = 75;
inline constexpr int kAttributeComputeCapabilityMinor = 76;

// The soname dlopen() asks for: the driver's ABI-stable name, which every
// driver installation provides (libcuda.so, without the suffix, ships only
// with development packages).
inline constexpr const char* kCudaDriverLibrary = "libcuda.so.1";

struct CudaDriver {
  CUresult (*cuInit)(unsigned int flags) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(cuda::CUcontext* context, CUdevice device) = nullptr;
  CUresult (*cuCtxGetCurrent)(cuda::CUcontext* context) = nullptr;
  CUresult (*cuCtxSetCurrent)(cuda::CUcontext context) = nullptr;
  CUresult (*cuCtxGetDevice)(CUdevice* device) = nullptr;
  CUresult (*cuCtxPushCurrent)(cuda::CUcontext context) = nullptr;  // cuCtxPushCurrent_v2
  CUresult (*cuCtxPopCurrent)(cuda::CUcontext* context) = nullptr;  // cuCtxPopCurrent_v2
  // CUDA 12.0+; null with an older driver (contexts are then told apart by
  // address, see ContextId).
  CUresult (*cuCtxGetId)(cuda::CUcontext context, unsigned long long* id) = nullptr;
  CUresult (*cuModuleLoadData)(cuda::CUmodule* module, const void* image) = nullptr;
  CUresult (*cuModuleUnload)(cuda::CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(cuda::CUfunction* function, cuda::CUmodule module, const char* name) = nullptr;

  // "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is
  // available for execution on the device)".
  std::string Describe(std::string_view call, CUresult result) const;
  // OK for CUDA_SUCCESS, else `code` with Describe()'s text.
  absl::Status Check(std::string_view call, CUresult result,
                     absl::StatusCode code = absl::StatusCode::kFailedPrecondition) const;
};

// The process's driver: libcuda.so.1 opened and cuInit(0) run, once; every
// later call returns the first answer (the library is never closed).
absl::StatusOr<const CudaDriver*> GetCudaDriver();

// The calling thread's current context; without one, device 0's primary
// context, retained once per process and made current on this thread.
absl::StatusOr<cuda::CUcontext> CurrentOrPrimaryContext(const CudaDriver& driver);

// An identity for `context` that a later context never reuses: the driver's
// context ID where it has cuCtxGetId, else the handle's address.
uint64_t ContextId(const CudaDriver& driver, cuda::CUcontext context);

}  // namespace jitd::client_detail
