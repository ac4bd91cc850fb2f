// The CUDA driver calls the GPU tests make besides what jitd's client makes:
// device memory, copies, launches and synchronisation. Like the client, this
// opens libcuda.so.1 with dlopen() and never links it, so the test programs
// start (and skip) on hosts without a driver.
//
// cuda.h is included for its types and prototypes only: each entry point is
// held as a pointer of exactly the prototype's type, so the compiler checks
// every call against the driver's ABI.
//
// Use: only after jitd::CudaDriverStatus() is OK (the client has opened the
// driver and run cuInit), with a context current on the calling thread
// (MakePrimaryContextCurrent(), or a Client::GetKernel(), which makes device
// 0's primary context current). Thread safety: Get() is safe from any thread;
// a DeviceBuffer belongs to one thread at a time.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::gpu {

struct CudaDriver {
  decltype(&::cuInit) cuInit = nullptr;
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
  decltype(&::cuGetErrorString) cuGetErrorString = nullptr;
  decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) cuCtxSynchronize = nullptr;
  // The _v2 entry points are the ones cuda.h's cuMemAlloc & co. name (it
  // #defines the plain names to them); spelled out so no macro is involved.
  decltype(&::cuMemAlloc_v2) cuMemAlloc_v2 = nullptr;
  decltype(&::cuMemFree_v2) cuMemFree_v2 = nullptr;
  decltype(&::cuMemcpyHtoD_v2) cuMemcpyHtoD_v2 = nullptr;
  decltype(&::cuMemcpyDtoH_v2) cuMemcpyDtoH_v2 = nullptr;
  decltype(&::cuMemsetD8_v2) cuMemsetD8_v2 = nullptr;
  decltype(&::cuLaunchKernel) cuLaunchKernel = nullptr;
  decltype(&::cuFuncGetAttribute) cuFuncGetAttribute = nullptr;

  // "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)".
  std::string Describe(std::string_view call, CUresult result) const;
  // OK for CUDA_SUCCESS, else INTERNAL with Describe()'s text.
  absl::Status Check(std::string_view call, CUresult result) const;
};

// libcuda.so.1 opened, every entry point above bound and cuInit(0) run, once
// per process; later calls return the first answer. FAILED_PRECONDITION
// naming the library or the missing entry point otherwise.
absl::StatusOr<const CudaDriver*> GetCudaDriver();

// Retains device 0's primary context (once per process, never released, as
// the CUDA runtime does) and makes it current on the calling thread. This is
// the context jitd's client loads modules into when the thread has none, so
// buffers allocated here and modules from Client::GetKernel() share it.
absl::Status MakePrimaryContextCurrent();

// cuCtxSynchronize(): waits for every launch and reports a kernel's fault
// (an illegal address, a __trap()) as an error naming the call.
absl::Status Synchronize();

// Grid and block, x only: every jitd kernel is one-dimensional.
struct LaunchShape {
  unsigned grid = 1;
  unsigned block = 32;
};

// cuLaunchKernel(function, shape, no dynamic shared memory, the context's
// default stream, params), then Synchronize(). `params` holds one pointer per
// kernel parameter, each to a value of exactly the parameter's type.
absl::Status LaunchAndWait(CUfunction function, LaunchShape shape, std::span<void*> params);

// The virtual arch of the PTX `function` was compiled from
// (CU_FUNC_ATTRIBUTE_PTX_VERSION: 80 for compute_80): for a module loaded
// from a fatbin, whether the driver took SASS or JIT-compiled the PTX.
absl::StatusOr<int> FunctionPtxVersion(CUfunction function);

// Device memory that frees itself. Moves, never copies.
class DeviceBuffer {
 public:
  // cuMemAlloc of `bytes` (at least 1). The memory is uninitialised.
  static absl::StatusOr<DeviceBuffer> Allocate(std::size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

  // Every byte set to `value` (cuMemsetD8).
  absl::Status Fill(std::uint8_t value);
  // Host to device / device to host, at byte `offset`; OUT_OF_RANGE when the
  // range does not fit the buffer.
  absl::Status Upload(const void* src, std::size_t bytes, std::size_t offset = 0);
  absl::Status Download(void* dst, std::size_t bytes, std::size_t offset = 0) const;

 private:
  DeviceBuffer(CUdeviceptr ptr, std::size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  absl::Status CheckRange(std::size_t bytes, std::size_t offset) const;

  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace jitd::gpu
