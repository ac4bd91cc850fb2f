// Malformed and hostile requests against a real jitd, one table: each must
// get the right gRPC code and a message that says what to fix, and the
// daemon must still be healthy and serving afterwards (checked after every
// case, with a health check and a real request).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "jitd/v1/cache_admin.grpc.pb.h"
#include "jitd/v1/compiler.grpc.pb.h"
#include "kernel_fixtures.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::HasSubstr;
using testing::KernelRequest;
using testing::SmallKernelsDir;
using testing::TempDir;
using testing::TestDaemon;

constexpr std::chrono::seconds kCallTimeout{60};

struct Stubs {
  std::unique_ptr<v1::Compiler::Stub> compiler;
  std::unique_ptr<v1::CacheAdmin::Stub> admin;
  std::string admin_token;  // the daemon's, from beside its socket
};

// One hostile request: sends itself with the stubs, returns the status.
struct Case {
  std::string name;
  std::function<grpc::Status(Stubs&)> send;
  grpc::StatusCode code;
  std::string says;  // a part of the message that tells a person what to fix
};

void WithDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

// GetKernel with `request`, the usual deadline.
std::function<grpc::Status(Stubs&)> Get(v1::GetKernelRequest request) {
  return [request](Stubs& stubs) {
    grpc::ClientContext context;
    WithDeadline(context);
    v1::GetKernelResponse response;
    return stubs.compiler->GetKernel(&context, request, &response);
  };
}

// Warm with `request`, the usual deadline: the stream's own status.
std::function<grpc::Status(Stubs&)> Warm(v1::WarmRequest request) {
  return [request](Stubs& stubs) {
    grpc::ClientContext context;
    WithDeadline(context);
    auto reader = stubs.compiler->Warm(&context, request);
    v1::WarmProgress progress;
    while (reader->Read(&progress)) {
    }
    return reader->Finish();
  };
}

v1::GetKernelRequest Fill(const std::string& dtype = "fp32") { return KernelRequest("small.fill", {{"dtype", dtype}}); }

v1::GetKernelRequest WithOption(const std::string& option) {
  v1::GetKernelRequest request = Fill();
  request.add_options(option);
  return request;
}

v1::GetKernelRequest WithArch(const std::string& arch) {
  v1::GetKernelRequest request = Fill();
  request.set_arch(arch);
  return request;
}

std::vector<Case> Cases() {
  using C = grpc::StatusCode;
  std::vector<Case> cases = {
      {"unknown kernel, a close match named", Get(KernelRequest("small.fil", {{"dtype", "fp32"}})), C::NOT_FOUND,
       "small.fill"},
      {"empty kernel name", Get(KernelRequest("", {})), C::INVALID_ARGUMENT, "kernel"},
      {"path traversal as a kernel name", Get(KernelRequest("../../../../etc/passwd", {})), C::NOT_FOUND,
       "jitctl kernels"},
      {"absolute path as a kernel name", Get(KernelRequest("/etc/passwd", {})), C::NOT_FOUND, "unknown kernel"},
      {"NUL byte in a kernel name", Get(KernelRequest(std::string("small.fill\0x", 12), {{"dtype", "fp32"}})),
       C::NOT_FOUND, "did you mean small.fill"},
      {"100 KiB kernel name", Get(KernelRequest(std::string(100 << 10, 'k'), {})), C::INVALID_ARGUMENT,
       "not a kernel name"},
      {"value not in the param's list", Get(Fill("bf16")), C::INVALID_ARGUMENT, "fp32"},
      {"unknown param", Get(KernelRequest("small.scale", {{"factor", "2"}})), C::INVALID_ARGUMENT, "factor"},
      {"missing required param", Get(KernelRequest("small.fill", {})), C::INVALID_ARGUMENT, "dtype"},
      {"path traversal as a param value", Get(Fill("../../etc/passwd")), C::INVALID_ARGUMENT, "dtype"},
      {"code injection as a param value", Get(Fill("float> x; }\n#include </etc/shadow>\n")), C::INVALID_ARGUMENT,
       "dtype"},
      {"100 KiB param value", Get(Fill(std::string(100 << 10, 'f'))), C::INVALID_ARGUMENT, "dtype"},
      {"10,000 params", Get([] {
         v1::GetKernelRequest r = Fill();
         for (int i = 0; i < 10000; ++i) {
           char name[16];  // (GCC 12 warns falsely about "p" + std::to_string(i))
           std::snprintf(name, sizeof(name), "p%d", i);
           (*r.mutable_params())[name] = "x";
         }
         return r;
       }()),
       C::INVALID_ARGUMENT, "param"},
      {"-I/etc", Get(WithOption("-I/etc")), C::INVALID_ARGUMENT, "-I"},
      {"--include-path=/etc", Get(WithOption("--include-path=/etc")), C::INVALID_ARGUMENT, "include"},
      {"--pre-include=/etc/passwd", Get(WithOption("--pre-include=/etc/passwd")), C::INVALID_ARGUMENT, "allow"},
      {"-arch as an option", Get(WithOption("-arch=sm_90")), C::INVALID_ARGUMENT, "arch"},
      {"PCH directory as an option", Get(WithOption("--pch-dir=/tmp")), C::INVALID_ARGUMENT, "pch"},
      {"-std as an option", Get(WithOption("-std=c++03")), C::INVALID_ARGUMENT, "std"},
      {"shell in a macro", Get(WithOption("-DX=$(rm -rf /)")), C::INVALID_ARGUMENT, "-D"},
      {"empty option", Get(WithOption("")), C::INVALID_ARGUMENT, "option"},
      {"1,000 options", Get([] {
         v1::GetKernelRequest r = Fill();
         for (int i = 0; i < 1000; ++i) r.add_options("-lineinfo");
         return r;
       }()),
       C::INVALID_ARGUMENT, "option"},
      {"arch sm_9999", Get(WithArch("sm_9999")), C::INVALID_ARGUMENT, "sm_90"},
      {"arch ptx_90", Get(WithArch("ptx_90")), C::INVALID_ARGUMENT, "sm_XX"},
      {"arch with a shell command", Get(WithArch("sm_90; rm -rf /")), C::INVALID_ARGUMENT, "arch"},
      {"arch sm_090 (a leading zero NVRTC would reject)", Get(WithArch("sm_090")), C::INVALID_ARGUMENT,
       "leading zero (write sm_90)"},
      {"arch of 64 KiB", Get(WithArch(std::string(64 << 10, '9'))), C::INVALID_ARGUMENT, "arch"},
      {"unknown mode", Get([] {
         v1::GetKernelRequest r = Fill();
         r.set_mode(static_cast<v1::GetKernelRequest::Mode>(99));
         return r;
       }()),
       C::INVALID_ARGUMENT, "mode"},
      {"unknown delivery", Get([] {
         v1::GetKernelRequest r = Fill();
         r.set_delivery(static_cast<v1::GetKernelRequest::Delivery>(7));
         return r;
       }()),
       C::INVALID_ARGUMENT, "delivery"},
      {"a 2 MiB request (over the 1 MiB limit)", Get(KernelRequest(std::string(2 << 20, 'k'), {})),
       C::RESOURCE_EXHAUSTED, "larger than max"},
      {"deadline already passed",
       [](Stubs& stubs) {
         grpc::ClientContext context;
         context.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
         v1::GetKernelResponse response;
         return stubs.compiler->GetKernel(&context, Fill(), &response);
       },
       C::DEADLINE_EXCEEDED, "Deadline"},
      {"call cancelled before it is sent",
       [](Stubs& stubs) {
         grpc::ClientContext context;
         WithDeadline(context);
         context.TryCancel();
         v1::GetKernelResponse response;
         return stubs.compiler->GetKernel(&context, Fill(), &response);
       },
       C::CANCELLED, "CANCELLED"},
      {"a kernel NVRTC rejects: the log", Get(KernelRequest("small.broken", {})), C::FAILED_PRECONDITION, "error"},
      {"CACHED_ONLY miss", Get(KernelRequest("small.scale", {{"clamp", "on"}}, v1::GetKernelRequest::CACHED_ONLY)),
       C::NOT_FOUND, "cache"},
      {"Warm of an unknown kernel",
       [](Stubs& stubs) {
         grpc::ClientContext context;
         WithDeadline(context);
         v1::WarmRequest request;
         v1::KernelSpec* spec = request.add_specs();
         spec->set_kernel("small.nope");
         auto reader = stubs.compiler->Warm(&context, request);
         // The stream succeeds; the item fails, with its code first.
         v1::WarmProgress progress;
         std::string error;
         while (reader->Read(&progress)) {
           if (progress.outcome() == v1::WarmProgress::FAILED) error = progress.error();
         }
         const grpc::Status finished = reader->Finish();
         if (!finished.ok() || error.empty()) return finished;
         return grpc::Status(error.rfind("NOT_FOUND", 0) == 0 ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::UNKNOWN,
                             error);
       },
       C::NOT_FOUND, "small.nope"},
      {"Warm naming 20,000 archs (once a 10^9-item expansion)", Warm([] {
         v1::WarmRequest request;
         for (int i = 0; i < 50; ++i) request.add_specs()->set_kernel("small.fill");
         for (int i = 0; i < 20000; ++i) request.add_archs("sm_90");
         return request;
       }()),
       C::INVALID_ARGUMENT, "at most 64 archs; this one names 20000"},
      {"Warm of 60,000 specs x 2 archs", Warm([] {
         v1::WarmRequest request;
         for (int i = 0; i < 60000; ++i) request.add_specs()->set_kernel("small.fill");
         request.add_archs("sm_90");
         request.add_archs("sm_100");
         return request;
       }()),
       C::INVALID_ARGUMENT, "at most 100000 instantiations (specs x archs); this one asks for 120000"},
      {"Evict older than 2^62 s (a dry run once selected everything)",
       [](Stubs& stubs) {
         grpc::ClientContext context;
         WithDeadline(context);
         context.AddMetadata("authorization", "Bearer " + stubs.admin_token);
         v1::EvictRequest request;
         request.set_older_than_s(uint64_t{1} << 62);
         request.set_dry_run(true);
         v1::EvictResponse response;
         grpc::Status status = stubs.admin->Evict(&context, request, &response);
         if (status.ok() && response.evicted_size() != 0) {
           return grpc::Status(grpc::StatusCode::INTERNAL, "selected " + std::to_string(response.evicted_size()));
         }
         return status;
       },
       C::OK, ""},
      {"Evict of a malformed key",
       [](Stubs& stubs) {
         grpc::ClientContext context;
         WithDeadline(context);
         context.AddMetadata("authorization", "Bearer " + stubs.admin_token);
         v1::EvictRequest request;
         request.add_keys("../../index.sqlite");
         v1::EvictResponse response;
         return stubs.admin->Evict(&context, request, &response);
       },
       C::INVALID_ARGUMENT, "key"},
  };
  return cases;
}

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--kernels", SmallKernelsDir().string()});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
    auto channel = grpc::CreateChannel(daemon_->endpoint(), grpc::InsecureChannelCredentials());
    stubs_.compiler = v1::Compiler::NewStub(channel);
    stubs_.admin = v1::CacheAdmin::NewStub(channel);
    absl::StatusOr<std::string> token = ReadAdminTokenFile(daemon_->socket_path().string() + ".admin-token");
    ASSERT_TRUE(token.ok()) << token.status();
    stubs_.admin_token = *token;
    client_ = daemon_->Connect("", kCallTimeout);
    ASSERT_TRUE(client_->GetKernel(Fill()).ok());  // the request every case is followed by
  }

  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  Stubs stubs_;
  std::unique_ptr<Client> client_;
};

TEST_F(Hostile, EveryCaseGetsItsCodeAndAnActionableMessageAndTheDaemonStaysHealthy) {
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 30u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const grpc::Status status = c.send(stubs_);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.says));
    EXPECT_LT(status.error_message().size(), 64u << 10) << "the message echoes the request back";
    // Still healthy, still serving.
    absl::StatusOr<bool> serving = client_->IsServing();
    ASSERT_TRUE(serving.ok() && *serving) << "the daemon is not healthy after this case: " << serving.status() << "\n"
                                          << daemon_->process().Output();
    ASSERT_TRUE(client_->GetKernel(Fill()).ok()) << "the daemon does not serve after this case";
  }
  std::printf("%zu hostile requests, each answered as expected; the daemon served after every one\n", cases.size());
}

}  // namespace
}  // namespace jitd
