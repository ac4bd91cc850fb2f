// Every error CONTRACT.md names, as a client of a real jitd receives it:
// the gRPC code and a message a person can act on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <latch>
#include <thread>

#include "kernel_fixtures.h"
#include "poll_until.h"
#include "small_daemon_test.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::kCompileCallTimeout;
using testing::KernelRequest;
using testing::kProcessTimeout;
using testing::PollUntil;

class ErrorsTest : public testing::SmallDaemonTest {
 protected:
  void SetUp() override { Start(); }

  // The error a GetKernel answers (OK if it succeeded).
  absl::Status ErrorOf(const v1::GetKernelRequest& request) { return client_->GetKernel(request).status(); }
};

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

TEST_F(ErrorsTest, UnknownKernelIsNotFoundNamingTheCloseMatch) {
  const absl::Status error = ErrorOf(KernelRequest("small.fil", {{"dtype", "fp32"}}));
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MessageOf(error), "unknown kernel 'small.fil'; did you mean small.fill?");
}

TEST_F(ErrorsTest, UnknownKernelWithoutCloseMatchesPointsToTheKernelList) {
  const absl::Status error = ErrorOf(KernelRequest("zzzzzzzzzzzzzzzzzzzz"));
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(MessageOf(error), HasSubstr("jitctl kernels"));
}

TEST_F(ErrorsTest, ParamValueOutsideTheManifestIsInvalidArgumentListingTheAllowedOnes) {
  const absl::Status error = ErrorOf(KernelRequest("small.fill", {{"dtype", "bf16"}}));
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MessageOf(error), "dtype=bf16 is not allowed for kernel small.fill; dtype (fp32|fp64)");
}

TEST_F(ErrorsTest, MissingParamIsInvalidArgumentNamingIt) {
  const absl::Status error = ErrorOf(KernelRequest("small.fill"));
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MessageOf(error), "kernel small.fill needs parameter dtype (fp32|fp64)");
}

TEST_F(ErrorsTest, UnknownParamIsInvalidArgumentListingTheKernelsParams) {
  const absl::Status error = ErrorOf(KernelRequest("small.scale", {{"factor", "2"}}));
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MessageOf(error),
            "kernel small.scale has no parameter 'factor'; its parameters: clamp (off|on, default off)");
}

TEST_F(ErrorsTest, OptionOutsideTheAllowListIsInvalidArgumentSayingWhy) {
  v1::GetKernelRequest request = KernelRequest("small.fill", {{"dtype", "fp32"}});
  request.add_options("-I/etc");
  const absl::Status error = ErrorOf(request);
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(error), AllOf(HasSubstr("option '-I/etc' is not allowed"),
                                      HasSubstr("include paths and forced includes come from the daemon")));
  EXPECT_EQ(daemon_->Stats().compiles(), 0u);
}

TEST_F(ErrorsTest, UnknownArchIsInvalidArgumentListingTheSupportedOnes) {
  v1::GetKernelRequest request = KernelRequest("small.fill", {{"dtype", "fp32"}});
  request.set_arch("sm_91");
  const absl::Status error = ErrorOf(request);
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(error), AllOf(HasSubstr("arch 'sm_91' is not supported"), HasSubstr("NVRTC 13.0 supports"),
                                      HasSubstr("sm_90"), HasSubstr("sm_100")));
}

TEST_F(ErrorsTest, NvrtcRejectionIsFailedPreconditionCarryingTheLog) {
  const absl::Status error = ErrorOf(KernelRequest("small.broken"));
  EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(MessageOf(error),
              AllOf(HasSubstr("NVRTC failed for broken.cu"),
                    HasSubstr("broken.cu(3): error: identifier \"undeclared_in_broken_kernel\" "
                              "is undefined"),
                    // NVRTC's file names, shown as the user's file
                    // (KERNELS/broken.cu), not the include name.
                    HasSubstr("/broken.cu(3): error"), HasSubstr("1 error detected in the compilation of \"/"),
                    HasSubstr("/broken.cu\"")));
}

TEST_F(ErrorsTest, FullCompileQueueIsResourceExhaustedAndNotRemembered) {
  Start({"--workers", "1", "--max-queue", "1"});
  // Four distinct second-long compiles at once: one runs, one waits, the
  // rest find the queue full.
  const std::vector<std::string> threads = {"128", "256", "512", "1024"};
  std::vector<absl::Status> errors(threads.size());
  std::latch start(static_cast<std::ptrdiff_t>(threads.size()));
  std::vector<std::thread> callers;
  for (size_t i = 0; i < threads.size(); ++i) {
    callers.emplace_back([&, i] {
      auto client = daemon_->Connect("", kCompileCallTimeout);
      start.arrive_and_wait();
      errors[i] = client->GetKernel(KernelRequest("small.block_sum", {{"threads", threads[i]}})).status();
    });
  }
  for (std::thread& caller : callers) caller.join();

  size_t exhausted = 0;
  std::string rejected;
  for (size_t i = 0; i < threads.size(); ++i) {
    if (errors[i].ok()) continue;
    EXPECT_EQ(errors[i].code(), absl::StatusCode::kResourceExhausted) << errors[i];
    EXPECT_THAT(MessageOf(errors[i]), HasSubstr("compile queue is full (1 jobs waiting); not compiling block_sum.cu"));
    ++exhausted;
    rejected = threads[i];
  }
  EXPECT_GE(exhausted, 2u);  // at most one running plus one waiting were accepted
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.max_queue(), 1u);
  EXPECT_EQ(stats.compile_errors(), exhausted);
  EXPECT_EQ(stats.compile_failures(), 0u);
  // A full queue is not the kernel's fault: asked again, it compiles.
  ASSERT_FALSE(rejected.empty());
  EXPECT_TRUE(ErrorOf(KernelRequest("small.block_sum", {{"threads", rejected}})).ok());
}

TEST_F(ErrorsTest, CallerDeadlineIsDeadlineExceededAndTheUnwantedCompileIsCancelled) {
  std::unique_ptr<Client> impatient = daemon_->Connect("", std::chrono::milliseconds(300));
  // Connected first: on a loaded machine the connection alone can take
  // most of 300 ms, and a call that never reached the daemon abandons no
  // compile.
  ASSERT_TRUE(impatient->WaitUntilServing(kProcessTimeout).ok());
  const absl::Status error = impatient->GetKernel(KernelRequest("small.block_sum", {{"threads", "1024"}})).status();
  EXPECT_EQ(error.code(), absl::StatusCode::kDeadlineExceeded) << error;
  // The daemon notices the caller left, and nobody else wants the compile.
  ASSERT_TRUE(PollUntil(
      [&] {
        const v1::StatsResponse stats = daemon_->Stats();
        return stats.abandoned() == 1 && stats.compiles_in_flight() == 0;
      },
      kProcessTimeout));
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compile_errors(), 1u);  // cancelled, not a cubin nobody asked for
  EXPECT_EQ(stats.entries(), 0u);
}

TEST_F(ErrorsTest, OversizedRequestIsRefusedBeforeItIsRead) {
  // 1 MiB is the daemon's limit on what a request may be.
  const absl::Status error = ErrorOf(KernelRequest(std::string(2 << 20, 'k')));
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted) << error;
  EXPECT_EQ(daemon_->Stats().requests(), 0u);
}

TEST_F(ErrorsTest, AdminCallWithoutTheTokenIsPermissionDeniedSayingWhatToSend) {
  std::ofstream(dir_ / "token") << "s3cret\n";
  Start({"--admin-token-file", (dir_ / "token").string()});
  v1::EvictRequest request;
  request.set_kernel_glob("*");
  absl::StatusOr<v1::EvictResponse> denied = client_->Evict(request);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(MessageOf(denied.status()),
            "Evict needs the admin token: jitctl --admin-token-file FILE; other clients send it as "
            "'authorization: Bearer <token>'");
  EXPECT_TRUE(daemon_->Connect("s3cret")->Evict(request).ok());
}

TEST_F(ErrorsTest, APeerPastItsCallBoundIsResourceExhaustedAndTheOthersFinish) {
  Start({"--workers", "1", "--max-calls-per-peer", "2"});
  // Two slow compiles (CUB, ~1 s each, one worker) hold the peer's two places.
  std::vector<std::thread> slow;
  std::vector<absl::Status> results(2);
  const std::vector<std::string> threads = {"128", "256"};
  for (int i = 0; i < 2; ++i) {
    slow.emplace_back([&, i] {
      results[i] = daemon_->Connect("", kCompileCallTimeout)
                       ->GetKernel(KernelRequest("small.block_sum", {{"threads", threads[i]}}))
                       .status();
    });
  }
  ASSERT_TRUE(PollUntil([&] { return daemon_->Stats().compiles_in_flight() == 2; }, kProcessTimeout));
  const absl::Status refused = ErrorOf(KernelRequest("small.fill", {{"dtype", "fp32"}}));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--max-calls-per-peer 2"));
  for (std::thread& t : slow) t.join();
  for (const absl::Status& r : results) EXPECT_TRUE(r.ok()) << r;
  // With the places free again, the peer is served.
  EXPECT_TRUE(ErrorOf(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());
}

}  // namespace
}  // namespace jitd
