// On a host without the CUDA driver (CI, this project's build machines), a
// program linked with jitd::client starts, and only what needs the driver
// fails: with FAILED_PRECONDITION naming libcuda.so.1 and the loader's
// reason, and before any request reaches the daemon.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jitd/client.h"
#include "jitd/cuda_module.h"
#include "temp_dir.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

class WithoutCudaDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    // The client opens the driver the same way; where one is installed,
    // there is nothing to test here.
    if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); driver != nullptr) {
      dlclose(driver);
      GTEST_SKIP() << "libcuda.so.1 is installed on this host";
    }
  }
};

void ExpectPreciseDriverError(const absl::Status& status) {
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("dlopen(\"libcuda.so.1\") failed"));
  // dlerror()'s own words follow.
  EXPECT_THAT(status.message(), HasSubstr("libcuda.so.1: cannot open shared object file"));
}

TEST_F(WithoutCudaDriver, DriverStatusNamesTheLibraryAndTheLoadersReason) {
  ExpectPreciseDriverError(CudaDriverStatus());
  ExpectPreciseDriverError(CurrentDeviceArch().status());
}

TEST_F(WithoutCudaDriver, LoadingAModuleFailsPrecisely) {
  ExpectPreciseDriverError(Module::Load("\x7f"
                                        "ELF",
                                        {{"sglang::k", "_Z1kv"}}, "abc")
                               .status());
}

TEST_F(WithoutCudaDriver, GetKernelFailsBeforeAnyRequest) {
  TempDir dir;
  ClientOptions options;
  options.endpoint = "unix:" + (dir / "absent.sock").string();
  options.connect_timeout = std::chrono::milliseconds(0);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto module = (*client)->GetKernel({.kernel = "diffusion.modulate_scale_shift", .params = {{"dtype", "bf16"}}});
  ExpectPreciseDriverError(module.status());
  EXPECT_THAT(module.status().message(), HasSubstr("GetKernelBinary()"));  // says what still works
  EXPECT_EQ((*client)->counters().get_kernel_rpcs, 0u);
  EXPECT_EQ((*client)->counters().module_loads, 0u);
}

TEST_F(WithoutCudaDriver, BinaryRequestsLeaveTheArchToTheDaemon) {
  // No driver, no device arch: the request goes out with an empty arch (the
  // daemon's default), and here fails only because no daemon runs.
  TempDir dir;
  ClientOptions options;
  options.endpoint = "unix:" + (dir / "absent.sock").string();
  options.connect_timeout = std::chrono::milliseconds(0);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok());
  auto binary = (*client)->GetKernelBinary({.kernel = "diffusion.modulate_scale_shift"});
  EXPECT_TRUE(absl::IsUnavailable(binary.status())) << binary.status();
  EXPECT_EQ((*client)->counters().get_kernel_rpcs, 1u);
}

}  // namespace
}  // namespace jitd
