// Module kernels served by the real daemon: the project's module tree
// (examples/module_tree, host+device files with tvm-ffi launchers), built
// by nvcc in the compile workers into shared objects, cached and served like
// cubins. Each build takes several seconds, so these tests are few and build
// two modules in all; tests/compiler covers the build's rules on small units.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "kernel_fixtures.h"
#include "poll_until.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::ProcessResult;
using testing::TempDir;
using testing::TestDaemon;

bool IsHostSharedObject(const std::string& bytes) {
  return bytes.size() > 20 &&
         bytes.compare(0, 4,
                       "\x7f"
                       "ELF") == 0 &&
         static_cast<unsigned char>(bytes[18]) == 62;
}

class ModulesTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--kernels", JITD_MODULE_TREE_DIR, "--arch", "sm_90a", "--workers", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    daemon_.reset();
    daemon_ = std::make_unique<TestDaemon>(dir_, args);
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
    // A module build takes several seconds on a busy machine.
    client_ = daemon_->Connect("", std::chrono::seconds(300));
  }

  absl::StatusOr<v1::GetKernelResponse> Get(const std::string& kernel, const std::string& dtype) {
    return client_->GetKernel(KernelRequest(kernel, {{"dtype", dtype}}));
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(ModulesTest, AModuleIsBuiltOnceThenServedFromMemoryAndAfterARestartFromDisk) {
  Start();
  absl::StatusOr<v1::GetKernelResponse> built = Get("activation.silu_and_mul", "bf16");
  ASSERT_TRUE(built.ok()) << built.status() << "\n" << daemon_->process().Output();
  EXPECT_EQ(built->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(built->arch(), "sm_90a");
  EXPECT_TRUE(IsHostSharedObject(built->cubin())) << "a module is an x86-64 shared object, not a cubin";
  EXPECT_EQ(built->cubin_size(), built->cubin().size());
  ASSERT_EQ(built->symbols_size(), 1);
  EXPECT_EQ(built->symbols(0).name_expression(), "silu_and_mul");
  EXPECT_EQ(built->symbols(0).lowered_name(), "__tvm_ffi_silu_and_mul");
  EXPECT_THAT(built->log(), HasSubstr("nvcc")) << "the log is nvcc's commands and what they printed";

  absl::StatusOr<v1::GetKernelResponse> again = Get("activation.silu_and_mul", "bf16");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source(), v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(again->key(), built->key());
  EXPECT_EQ(daemon_->Stats().compiles(), 1u);

  Start();  // the same cache directory
  absl::StatusOr<v1::GetKernelResponse> disk = Get("activation.silu_and_mul", "bf16");
  ASSERT_TRUE(disk.ok()) << disk.status();
  EXPECT_EQ(disk->source(), v1::GetKernelResponse::DISK);
  EXPECT_EQ(disk->key(), built->key()) << "a restart finds the same key: the toolchain fingerprint is stable";
  EXPECT_EQ(disk->cubin(), built->cubin());

  // jitctl get -o writes the module; jitctl ls lists it.
  const std::filesystem::path out = dir_ / "silu.so";
  ProcessResult got = daemon_->Jitctl({"get", "activation.silu_and_mul", "-p", "dtype=bf16", "-o", out.string()});
  ASSERT_EQ(got.exit_code, 0) << got.output;
  std::ifstream file(out, std::ios::binary);
  std::stringstream written;
  written << file.rdbuf();
  EXPECT_EQ(written.str(), built->cubin());
  ProcessResult listed = daemon_->Jitctl({"ls"});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr("KIND")) << "a module in the cache shows the kind column";
  EXPECT_THAT(listed.output, HasSubstr("module"));
  ProcessResult listed_json = daemon_->Jitctl({"--json", "ls"});
  ASSERT_EQ(listed_json.exit_code, 0) << listed_json.output;
  EXPECT_THAT(listed_json.output, ::testing::ContainsRegex(R"("kind": *"module")"));

  // The C++ client's verified file: private directory, mode 0500, the
  // bytes served, the exports; never from a directory others can write.
  const std::filesystem::path modules = dir_ / "modules";
  absl::StatusOr<ModuleFile> module = client_->GetModuleFile(
      {.kernel = "activation.silu_and_mul", .params = {{"dtype", "bf16"}}, .arch = "sm_90a"}, modules);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module->path, modules / (built->key() + ".so"));
  EXPECT_EQ(module->exports, std::vector<std::string>{"silu_and_mul"});
  EXPECT_THAT(module->builder, HasSubstr("tvm-ffi 0.1.15.post2"));
  EXPECT_EQ(std::filesystem::status(module->path).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  EXPECT_EQ(std::filesystem::status(modules).permissions(), std::filesystem::perms::owner_all);
  std::ifstream module_file(module->path, std::ios::binary);
  std::stringstream module_bytes;
  module_bytes << module_file.rdbuf();
  EXPECT_EQ(module_bytes.str(), built->cubin());
  std::filesystem::permissions(modules, std::filesystem::perms::group_write, std::filesystem::perm_options::add);
  absl::StatusOr<ModuleFile> shared = client_->GetModuleFile(
      {.kernel = "activation.silu_and_mul", .params = {{"dtype", "bf16"}}, .arch = "sm_90a"}, modules);
  EXPECT_EQ(shared.status().code(), absl::StatusCode::kFailedPrecondition) << shared.status();
  EXPECT_THAT(std::string(shared.status().message()), HasSubstr("writable by its group or others"));

  // One arch per shared object; NVRTC's request options are not a module's.
  v1::GetKernelRequest fleet = KernelRequest("activation.silu_and_mul", {{"dtype", "bf16"}});
  fleet.set_arch("");
  fleet.add_archs("sm_90a");
  fleet.add_archs("sm_100a");
  absl::StatusOr<v1::GetKernelResponse> several = client_->GetKernel(fleet);
  EXPECT_EQ(several.status().code(), absl::StatusCode::kInvalidArgument) << several.status();
  EXPECT_THAT(std::string(several.status().message()), HasSubstr("is a module"));
  v1::GetKernelRequest with_option = KernelRequest("activation.silu_and_mul", {{"dtype", "bf16"}});
  with_option.add_options("-lineinfo");
  absl::StatusOr<v1::GetKernelResponse> optioned = client_->GetKernel(with_option);
  EXPECT_EQ(optioned.status().code(), absl::StatusCode::kInvalidArgument) << optioned.status();
}

TEST_F(ModulesTest, EightSimultaneousRequestsForOneModuleMakeOneBuild) {
  Start();
  std::vector<std::future<absl::StatusOr<v1::GetKernelResponse>>> ranks;
  for (int rank = 0; rank < 8; ++rank) {
    ranks.push_back(std::async(std::launch::async, [this] {
      std::unique_ptr<Client> client = daemon_->Connect("", std::chrono::seconds(300));
      return client->GetKernel(KernelRequest("diffusion.residual_gate_add", {{"dtype", "fp16"}}));
    }));
  }
  std::string key;
  for (auto& rank : ranks) {
    absl::StatusOr<v1::GetKernelResponse> answer = rank.get();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_TRUE(IsHostSharedObject(answer->cubin()));
    if (key.empty()) key = answer->key();
    EXPECT_EQ(answer->key(), key);
  }
  EXPECT_EQ(daemon_->Stats().compiles(), 1u);
}

TEST_F(ModulesTest, WithoutTvmFfiAModuleRequestSaysWhatIsMissing) {
  Start({"--tvm-ffi-root", (dir_ / "no-such-tvm-ffi").string()});
  absl::StatusOr<v1::GetKernelResponse> refused = Get("activation.silu_and_mul", "bf16");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no-such-tvm-ffi"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--tvm-ffi-root"));
  EXPECT_EQ(daemon_->Stats().compiles(), 0u);
}

TEST_F(ModulesTest, ABundledModuleIsServedWithoutNvccAndAnotherIsRefusedSayingSo) {
  // The image build: one module into a sealed bundle, where nvcc is.
  const std::filesystem::path spec = dir_ / "spec.toml", bundle = dir_ / "modules.bundle";
  std::ofstream(spec) << "[[spec]]\nkernel = \"activation.silu_and_mul\"\nparams = { dtype = \"bf16\" }\n";
  ProcessResult made =
      testing::RunProcess({testing::JitdBinary(), "bundle", "create", "--kernels", JITD_MODULE_TREE_DIR, "--manifest",
                           spec.string(), "--arch", "sm_90a", "-o", bundle.string()},
                          dir_ / "bundle.log", std::chrono::seconds(300));
  ASSERT_EQ(made.exit_code, 0) << made.output;

  // The serving host: no nvcc.
  Start({"--bundle", bundle.string(), "--nvcc", (dir_ / "no-nvcc" / "nvcc").string()});
  absl::StatusOr<v1::GetKernelResponse> served = Get("activation.silu_and_mul", "bf16");
  ASSERT_TRUE(served.ok()) << served.status() << "\n" << daemon_->process().Output();
  EXPECT_EQ(served->source(), v1::GetKernelResponse::BUNDLE);
  EXPECT_TRUE(IsHostSharedObject(served->cubin()));
  EXPECT_THAT(served->nvrtc_version(), HasSubstr("toolchain "));
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("serving the modules of the mounted bundles only"));

  absl::StatusOr<v1::GetKernelResponse> missing = Get("activation.silu_and_mul", "fp16");
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("cannot build modules"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no-nvcc"));
}

// nvcc, the host compiler and tvm-ffi are outside the toolkit watch: a
// module build is checked after it ends. Here the host compiler is a
// wrapper that rewrites itself the first time it compiles: the build it
// took part in is discarded (its key names the old toolchain), the daemon
// takes in the new toolchain, and the retry builds under the new key.
TEST_F(ModulesTest, AHostCompilerChangedDuringABuildDiscardsItAndTheRetryBuildsUnderTheNewKey) {
  const std::filesystem::path tree = dir_ / "tiny", wrapper = dir_ / "bin" / "g++";
  std::filesystem::create_directories(tree);
  std::filesystem::create_directories(wrapper.parent_path());
  std::ofstream(tree / "kernels.toml") << "schema = 1\nnamespace = \"tiny\"\n[[kernel]]\nname = \"tiny.add\"\n"
                                          "kind = \"module\"\nsources = [\"add.cuh\"]\n"
                                          "exports = { add = \"add<{n}>\" }\noptions = [\"-std=c++17\", \"-O0\"]\n"
                                          "  [[kernel.params]]\n  name = \"n\"\n  type = \"int\"\n"
                                          "  values = { \"1\" = \"1\" }\n";
  std::ofstream(tree / "add.cuh") << "namespace tiny {\ntemplate <int N>\nint add(int x) { return x + N; }\n}\n";
  const std::filesystem::path marker = dir_ / "changed";
  {
    std::ofstream script(wrapper);
    script << "#!/bin/sh\ncase \" $* \" in *\" -c \"*) [ -e " << marker.string() << " ] || { touch " << marker.string()
           << "; echo '# rewritten' >> \"$0\"; } ;; esac\nexec /usr/bin/g++ \"$@\"\n";
  }
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  daemon_ = std::make_unique<TestDaemon>(
      dir_, std::vector<std::string>{"--kernels", tree.string(), "--arch", "sm_90a", "--host-cxx", wrapper.string()});
  ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
  client_ = daemon_->Connect("", std::chrono::seconds(300));

  absl::StatusOr<v1::GetKernelResponse> first = client_->GetKernel(KernelRequest("tiny.add", {{"n", "1"}}));
  ASSERT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  EXPECT_THAT(std::string(first.status().message()), HasSubstr("the module toolchain"));
  EXPECT_THAT(std::string(first.status().message()), HasSubstr("was discarded"));
  ASSERT_TRUE(std::filesystem::exists(marker));
  EXPECT_EQ(daemon_->Stats().entries(), 0u) << "nothing is stored under the old toolchain's key";

  absl::StatusOr<v1::GetKernelResponse> retry = client_->GetKernel(KernelRequest("tiny.add", {{"n", "1"}}));
  ASSERT_TRUE(retry.ok()) << retry.status() << daemon_->process().Output();
  EXPECT_EQ(retry->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_TRUE(IsHostSharedObject(retry->cubin()));
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("the module toolchain changed on disk"));

  // Changed again with no build running: the cached module would be served
  // as it is until the next build. SIGHUP checks the toolchain, and the
  // request after it builds under a new key.
  { std::ofstream(wrapper, std::ios::app) << "# upgraded in place\n"; }
  absl::StatusOr<v1::GetKernelResponse> cached = client_->GetKernel(KernelRequest("tiny.add", {{"n", "1"}}));
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->key(), retry->key());
  daemon_->process().Signal(SIGHUP);
  const auto changes_logged = [&] {
    const std::string output = daemon_->process().Output(), line = "the module toolchain changed on disk";
    size_t n = 0;
    for (size_t at = output.find(line); at != std::string::npos; at = output.find(line, at + 1)) ++n;
    return n;
  };
  ASSERT_TRUE(testing::PollUntil([&] { return changes_logged() >= 2; }, testing::kProcessTimeout))
      << daemon_->process().Output();
  absl::StatusOr<v1::GetKernelResponse> rebuilt = client_->GetKernel(KernelRequest("tiny.add", {{"n", "1"}}));
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status() << daemon_->process().Output();
  EXPECT_NE(rebuilt->key(), retry->key()) << "the new host compiler makes a new key";
  EXPECT_TRUE(IsHostSharedObject(rebuilt->cubin()));
}

}  // namespace
}  // namespace jitd
