// Host-side launch: grid sizing, the stream to run on, and launch errors.
//
// Kernels run on the stream the caller has made current for the tensors'
// device: tvm-ffi's Python side records the framework's current stream
// (e.g. torch.cuda.current_stream()) with TVMFFIEnvSetStream for the duration
// of the call, and TVMFFIEnvGetStream reads it back here. When nobody set one
// it returns null, which CUDA takes as the legacy default stream.
#pragma once

#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/device_guard.h>

#include <algorithm>
#include <cstdint>

namespace sglang {

// Element-wise kernels: 256 threads a block, at most 1024 blocks. The kernels
// walk their index space with a grid-stride loop, so the cap only bounds how
// many blocks are resident, never which elements are computed.
inline constexpr int kElementwiseThreads = 256;
inline constexpr int64_t kElementwiseMaxBlocks = 1024;

// `work` >= 1 items of one thread each.
inline unsigned elementwise_blocks(int64_t work) {
  const int64_t blocks = (work + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kElementwiseMaxBlocks));
}

inline cudaStream_t current_stream(DLDevice device) {
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(device.device_type, device.device_id));
}

// Launches `kernel` on `device`'s current stream and turns a launch error
// (bad configuration, no kernel image for this GPU) into an exception naming
// `op`; errors the kernel raises while running surface at the caller's next
// synchronisation, as with any asynchronous launch.
template <typename... Params, typename... Args>
void launch(const char* op, void (*kernel)(Params...), dim3 grid, dim3 block, DLDevice device, Args... args) {
  // The stream belongs to `device`; launching from another current device
  // would be an error (or run on the wrong GPU with the default stream).
  tvm::ffi::CUDADeviceGuard guard(device.device_id);
  kernel<<<grid, block, 0, current_stream(device)>>>(static_cast<Params>(args)...);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << op << ": kernel launch failed: " << cudaGetErrorName(err) << " ("
                                << cudaGetErrorString(err) << ")";
  }
}

}  // namespace sglang
