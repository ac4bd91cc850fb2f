// What the GPU tests share in one process: the client connected to the
// daemon under test, the kernels it served, device arrays guarded against
// out-of-bounds writes, and the fixture that skips where there is no driver.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda_driver.h"
#include "jitd/client.h"
#include "jitd/reference.h"

namespace jitd::gpu {

// The daemon under test and the kernels fetched from it.
class KernelSession {
 public:
  // The session, made on first use: makes device 0's primary context current
  // and connects to the daemon at ResolveEndpoint("") ($JITD_ENDPOINT, which
  // tests/gpu/run.sh sets). Only call it once jitd::CudaDriverStatus() is OK.
  // The first answer (or error) is kept for the whole process.
  static absl::StatusOr<KernelSession*> Get();

  // The whole path under test: Client::GetKernel(spec) (the daemon compiles
  // or serves the cubin, the client loads it with cuModuleLoadData), then
  // Module::GetFunction(name_expression). Also checks that the module holds
  // exactly that one entry point. The module stays loaded for the process.
  absl::StatusOr<Function> GetFunction(const KernelSpec& spec, const std::string& name_expression);

  const std::string& endpoint() const { return client_->endpoint(); }

 private:
  explicit KernelSession(std::unique_ptr<Client> client) : client_(std::move(client)) {}

  std::unique_ptr<Client> client_;
  std::vector<std::shared_ptr<const Module>> modules_;
};

// Every GPU test derives from this: without a usable CUDA driver the test is
// skipped (and says why); with one, a failure to reach the daemon fails it.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  KernelSession& session() { return *session_; }

 private:
  KernelSession* session_ = nullptr;
};

template <typename Param>
class GpuParamTest : public GpuTest, public ::testing::WithParamInterface<Param> {};

// Host element types and what the manifest and the kernels call them.
template <typename T>
struct Dtype;
template <>
struct Dtype<reference::Bf16> {
  static constexpr const char* kParam = "bf16";
  static constexpr const char* kCudaType = "__nv_bfloat16";
};
template <>
struct Dtype<reference::Fp16> {
  static constexpr const char* kParam = "fp16";
  static constexpr const char* kCudaType = "__half";
};
template <>
struct Dtype<float> {
  static constexpr const char* kParam = "fp32";
  static constexpr const char* kCudaType = "float";
};

// Bytes around every array's data hold this, and must still hold it after a
// launch: a kernel writing past its output (or before it) is caught even
// where the reference would not look. kCanaryBytes is a multiple of 16, so
// the data keeps cuMemAlloc's alignment (256 bytes) unless an offset moves it.
inline constexpr std::uint8_t kCanary = 0xA5;
inline constexpr std::size_t kCanaryBytes = 256;

// "out-of-bounds write: byte 3 past the end of the data [256, 4352) of the
// buffer was changed" (byte offsets in the buffer).
std::string CanaryMessage(std::size_t byte, std::size_t begin, std::size_t end);

// A device array of n elements of T: kCanaryBytes of canary, `offset`
// elements of canary, the data, and kCanaryBytes of canary. A non-zero
// offset misaligns the data from the 16-byte packs the element-wise kernels
// vectorise with, which sends them down their scalar path.
template <typename T>
class DeviceArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  // The buffer, all canary, with `host` copied in.
  static absl::StatusOr<DeviceArray> Upload(std::span<const T> host, std::size_t offset = 0) {
    absl::StatusOr<DeviceArray> array = Output(host.size(), offset);
    if (!array.ok()) return array.status();
    if (absl::Status s = array->buffer_.Upload(host.data(), host.size_bytes(), array->begin()); !s.ok()) return s;
    return array;
  }

  // The buffer, all canary: a kernel's output.
  static absl::StatusOr<DeviceArray> Output(std::size_t n, std::size_t offset = 0) {
    absl::StatusOr<DeviceBuffer> buffer =
        DeviceBuffer::Allocate(kCanaryBytes + (offset + n) * sizeof(T) + kCanaryBytes);
    if (!buffer.ok()) return buffer.status();
    if (absl::Status s = buffer->Fill(kCanary); !s.ok()) return s;
    return DeviceArray(*std::move(buffer), n, offset);
  }

  // The kernel argument: the address of element 0.
  CUdeviceptr ptr() const { return buffer_.ptr() + begin(); }
  std::size_t size() const { return size_; }

  // The n elements. DATA_LOSS naming the first changed byte when anything
  // outside them is no longer canary.
  absl::StatusOr<std::vector<T>> Read() const {
    std::vector<unsigned char> raw(buffer_.bytes());
    if (absl::Status s = buffer_.Download(raw.data(), raw.size()); !s.ok()) return s;
    const std::size_t end = begin() + size_ * sizeof(T);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if ((i < begin() || i >= end) && raw[i] != kCanary) {
        return absl::DataLossError(CanaryMessage(i, begin(), end));
      }
    }
    std::vector<T> out(size_);
    if (size_ > 0) std::memcpy(out.data(), raw.data() + begin(), size_ * sizeof(T));
    return out;
  }

 private:
  DeviceArray(DeviceBuffer buffer, std::size_t size, std::size_t offset)
      : buffer_(std::move(buffer)), size_(size), offset_(offset) {}

  // Where the data starts in the buffer, in bytes.
  std::size_t begin() const { return kCanaryBytes + offset_ * sizeof(T); }

  DeviceBuffer buffer_;
  std::size_t size_ = 0;
  std::size_t offset_ = 0;
};

// An element-wise kernel's default launch: 256 threads, enough blocks to
// cover `work_items` (one each), capped at 132 SMs x 16 blocks (the
// grid-stride loop covers the rest), as crosscheck.py launches them.
LaunchShape ElementwiseLaunch(std::int64_t work_items);

// Launches with each argument passed by address, as cuLaunchKernel wants.
// Only the types the kernels' parameters have are accepted: device pointers
// (CUdeviceptr, 8 bytes like T*), int64_t (`long long` under NVRTC, the same
// 8 bytes), int32_t and float. Callers go through a wrapper that spells out
// one kernel's parameter list, so an argument converts to its parameter's
// type before it gets here.
template <typename... Args>
absl::Status Launch(const Function& function, LaunchShape shape, Args... args) {
  static_assert(((std::is_same_v<Args, CUdeviceptr> || std::is_same_v<Args, std::int64_t> ||
                  std::is_same_v<Args, std::int32_t> || std::is_same_v<Args, float>)&&...),
                "not a kernel parameter type");
  static_assert(sizeof(CUdeviceptr) == sizeof(void*) && sizeof(std::int64_t) == sizeof(long long));
  void* params[] = {static_cast<void*>(&args)...};
  return LaunchAndWait(function.handle, shape, params);
}

}  // namespace jitd::gpu
