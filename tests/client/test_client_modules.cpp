// Modules and functions through the CUDA driver API, on hosts without a
// GPU: this test binary's run path holds tests/client/fake_cuda's
// libcuda.so.1, a stand-in that loads ELF images, resolves names found in
// them and counts what it did. The client cannot tell it from the driver.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "fallback_client.h"
#include "jitd/client.h"
#include "jitd/cuda_module.h"
#include "kernel_fixture.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using testing::FakeCubin;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestDaemon;

// The stand-in driver, opened as the client opens it, and its test hooks.
class FakeDriver {
 public:
  FakeDriver() {
    handle_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) return;
    loads_ = reinterpret_cast<int (*)()>(dlsym(handle_, "jitd_fake_cuda_loads"));
    unloads_ = reinterpret_cast<int (*)()>(dlsym(handle_, "jitd_fake_cuda_unloads"));
    new_context_ = reinterpret_cast<cuda::CUcontext (*)()>(dlsym(handle_, "jitd_fake_cuda_new_context"));
    function_name_ =
        reinterpret_cast<const char* (*)(cuda::CUfunction)>(dlsym(handle_, "jitd_fake_cuda_function_name"));
    set_current_ = reinterpret_cast<int (*)(cuda::CUcontext)>(dlsym(handle_, "cuCtxSetCurrent"));
    get_current_ = reinterpret_cast<int (*)(cuda::CUcontext*)>(dlsym(handle_, "cuCtxGetCurrent"));
  }
  ~FakeDriver() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  // Whether libcuda.so.1 is the stand-in (and not a real driver).
  bool ok() const { return loads_ != nullptr; }
  int loads() const { return loads_(); }
  int unloads() const { return unloads_(); }
  cuda::CUcontext NewContext() const { return new_context_(); }
  std::string FunctionName(cuda::CUfunction function) const { return function_name_(function); }
  void SetCurrent(cuda::CUcontext context) const { set_current_(context); }
  cuda::CUcontext Current() const {
    cuda::CUcontext context = nullptr;
    get_current_(&context);
    return context;
  }

 private:
  void* handle_ = nullptr;
  int (*loads_)() = nullptr;
  int (*unloads_)() = nullptr;
  cuda::CUcontext (*new_context_)() = nullptr;
  const char* (*function_name_)(cuda::CUfunction) = nullptr;
  int (*set_current_)(cuda::CUcontext) = nullptr;
  int (*get_current_)(cuda::CUcontext*) = nullptr;
};

class ModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.ok()) << "libcuda.so.1 is not tests/client/fake_cuda's: " << dlerror();
    ASSERT_TRUE(CudaDriverStatus().ok()) << CudaDriverStatus();
    context_ = fake_.NewContext();
    fake_.SetCurrent(context_);
  }
  void TearDown() override {
    if (fake_.ok()) fake_.SetCurrent(nullptr);
  }

  FakeDriver fake_;
  cuda::CUcontext context_ = nullptr;
};

TEST_F(ModuleTest, FunctionsAreFoundByNameExpression) {
  auto module = Module::Load(FakeCubin({"_Z1av", "_Z1bIfEvv"}),
                             {{"sglang::a", "_Z1av"}, {"sglang::b<float>", "_Z1bIfEvv"}}, "k1");
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->context(), context_);
  auto b = (*module)->GetFunction("sglang::b<float>");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->lowered_name, "_Z1bIfEvv");
  EXPECT_EQ(fake_.FunctionName(b->handle), "_Z1bIfEvv");
}

TEST_F(ModuleTest, AnUnknownNameExpressionIsNotFoundListingTheKnownOnes) {
  auto module = Module::Load(FakeCubin({"_Z1av", "_Z1bv"}), {{"sglang::a", "_Z1av"}, {"sglang::b", "_Z1bv"}}, "k1");
  ASSERT_TRUE(module.ok());
  auto missing = (*module)->GetFunction("sglang::c");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("no entry point 'sglang::c' in k1; it has: sglang::a, sglang::b"));
  // A lowered name is not a name expression.
  EXPECT_TRUE(absl::IsNotFound((*module)->GetFunction("_Z1av").status()));
}

TEST_F(ModuleTest, ASymbolMissingFromTheCubinFailsTheLoadAndLeaksNothing) {
  const int unloads = fake_.unloads();
  auto module = Module::Load(FakeCubin({"_Z1av"}), {{"sglang::a", "_Z1av"}, {"sglang::b", "_Z1bv"}}, "k2");
  EXPECT_TRUE(absl::IsInternal(module.status())) << module.status();
  EXPECT_THAT(module.status().message(), HasSubstr("cuModuleGetFunction(_Z1bv): CUDA_ERROR_NOT_FOUND"));
  EXPECT_THAT(module.status().message(), HasSubstr("sglang::b"));
  EXPECT_EQ(fake_.unloads(), unloads + 1);
}

TEST_F(ModuleTest, ARejectedImageIsAFailedPreconditionWithTheDriversWords) {
  auto module = Module::Load("not an ELF image", {}, "k3");
  EXPECT_TRUE(absl::IsFailedPrecondition(module.status())) << module.status();
  EXPECT_THAT(module.status().message(),
              HasSubstr("cuModuleLoadData(cubin k3): CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)"));
  EXPECT_TRUE(absl::IsInvalidArgument(Module::Load("", {}, "k3").status()));
}

TEST_F(ModuleTest, TheDestructorUnloadsInTheModulesContextAndRestoresTheCallers) {
  auto module = Module::Load(FakeCubin({"_Z1av"}), {{"sglang::a", "_Z1av"}});
  ASSERT_TRUE(module.ok());
  const cuda::CUcontext other = fake_.NewContext();
  fake_.SetCurrent(other);  // the stand-in refuses an unload from another context
  const int unloads = fake_.unloads();
  module->reset();
  EXPECT_EQ(fake_.unloads(), unloads + 1);
  EXPECT_EQ(fake_.Current(), other);
}

TEST_F(ModuleTest, AThreadWithoutAContextGetsDeviceZerosPrimaryContext) {
  fake_.SetCurrent(nullptr);
  auto module = Module::Load(FakeCubin({"_Z1av"}), {{"sglang::a", "_Z1av"}});
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_NE((*module)->context(), nullptr);
  EXPECT_EQ(fake_.Current(), (*module)->context());  // made current, as the runtime does
}

TEST_F(ModuleTest, TheArchIsTheDevicesComputeCapability) {
  EXPECT_EQ(CurrentDeviceArch().value_or("?"), "sm_90");  // never sm_90a
  setenv("JITD_FAKE_CUDA_CC", "10.0", 1);
  EXPECT_EQ(CurrentDeviceArch().value_or("?"), "sm_100");
  setenv("JITD_FAKE_CUDA_CC", "8.6", 1);
  EXPECT_EQ(CurrentDeviceArch().value_or("?"), "sm_86");
  unsetenv("JITD_FAKE_CUDA_CC");
}

// Client::GetKernel against a real daemon compiling the fixture kernels.
class GetKernelTest : public ModuleTest {
 protected:
  void SetUp() override {
    ModuleTest::SetUp();
    if (HasFatalFailure()) return;
    testing::WriteFixtureKernels(dir_ / "kernels");
    daemon_ = std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--kernels", (dir_ / "kernels").string()});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok());
    client_ = daemon_->Connect();
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(GetKernelTest, LoadsTheCubinOncePerContextAndFindsTheKernelByNameExpression) {
  const KernelSpec spec{.kernel = testing::kFixtureKernel, .params = {{"dtype", "fp32"}}};
  const int loads = fake_.loads();
  auto module = client_->GetKernel(spec);
  ASSERT_TRUE(module.ok()) << module.status();
  auto function = (*module)->GetFunction(testing::kScaleFloat);
  ASSERT_TRUE(function.ok()) << function.status();
  EXPECT_EQ(function->lowered_name, testing::kScaleFloatLowered);
  // The stand-in found that name in the real cubin's string table.
  EXPECT_EQ(fake_.FunctionName(function->handle), testing::kScaleFloatLowered);

  auto again = client_->GetKernel(spec);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), module->get());
  EXPECT_EQ(fake_.loads(), loads + 1);
  EXPECT_EQ(client_->counters().get_kernel_rpcs, 1u);

  // Another context gets a module of its own, from the memoized cubin.
  fake_.SetCurrent(fake_.NewContext());
  auto elsewhere = client_->GetKernel(spec);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_NE(elsewhere->get(), module->get());
  EXPECT_EQ(fake_.loads(), loads + 2);
  EXPECT_EQ(client_->counters().get_kernel_rpcs, 1u);
  EXPECT_EQ(client_->counters().module_loads, 2u);
}

TEST_F(GetKernelTest, TheArchDefaultsToTheCurrentDevices) {
  setenv("JITD_FAKE_CUDA_CC", "8.6", 1);
  auto binary = client_->GetKernelBinary({.kernel = testing::kFixtureKernel, .params = {{"dtype", "fp32"}}});
  unsetenv("JITD_FAKE_CUDA_CC");
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->arch, "sm_86");
}

TEST_F(GetKernelTest, AnUnknownKernelIsTheDaemonsNotFoundAndLoadsNothing) {
  const int loads = fake_.loads();
  auto module = client_->GetKernel({.kernel = "test.scal", .params = {{"dtype", "fp32"}}});
  EXPECT_TRUE(absl::IsNotFound(module.status())) << module.status();
  EXPECT_THAT(module.status().message(), HasSubstr("test.scale"));  // a close match
  EXPECT_EQ(fake_.loads(), loads);
}

TEST_F(GetKernelTest, WithTheDaemonStoppedModulesComeFromTheFallback) {
  const KernelSpec spec{.kernel = testing::kFixtureKernel, .params = {{"dtype", "fp64"}}};
  ASSERT_TRUE(client_->GetKernel(spec).ok());  // the daemon compiles it into its cache dir
  // Stopped without a connection open: the daemon's drain waits for those.
  client_.reset();
  daemon_->process().Signal(SIGTERM);
  ASSERT_EQ(daemon_->process().WaitForExit(testing::kProcessTimeout), 0);

  auto client = testing::ConnectWithFallback(daemon_->endpoint(), daemon_->cache_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  auto module = (*client)->GetKernel(spec);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE((*module)->GetFunction(testing::kScaleDouble).ok());
  EXPECT_EQ((*client)->counters().fallback_answers, 1u);
}

}  // namespace
}  // namespace jitd
