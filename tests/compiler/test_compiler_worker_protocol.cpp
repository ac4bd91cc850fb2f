// The worker wire format (detail/worker_protocol.h) and RunCompileWorker
// driven directly over a socketpair.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <future>
#include <thread>

#include "compiler/compile_worker.h"
#include "compiler/detail/worker_protocol.h"
#include "compiler/nvrtc_program.h"
#include "test_programs.h"

namespace jitd::compiler::detail {
namespace {

CompileResponse SampleResponse() {
  CompileResponse response;
  response.job_id = 42;
  response.result.cubin = std::string(
      "\x7f"
      "ELF\0\1\2",
      7);
  response.result.lowered_names = {{"sglang::f<1>", "_Z1fILi1EEvv"}, {"sglang::f<2>", "_Z1fILi2EEvv"}};
  response.result.log = "warning: something";
  response.result.compile_ms = 12.5;
  response.result.used_pch = true;
  return response;
}

TEST(WorkerProtocol, CompileRequestRoundTrips) {
  CompileRequest request;
  request.job_id = 7;
  request.job = testing::CubJob(128, /*use_pch=*/true);
  request.job.timeout = std::chrono::milliseconds(1234);
  absl::StatusOr<CompileRequest> decoded = DecodeCompileRequest(Encode(request));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->job_id, 7u);
  EXPECT_EQ(decoded->job.program_name, request.job.program_name);
  EXPECT_EQ(decoded->job.source, request.job.source);
  EXPECT_EQ(decoded->job.options, request.job.options);
  EXPECT_EQ(decoded->job.name_expressions, request.job.name_expressions);
  EXPECT_TRUE(decoded->job.use_pch);
  EXPECT_EQ(decoded->job.timeout, std::chrono::milliseconds(1234));
}

TEST(WorkerProtocol, HeadersDigestAndLogRootTravel) {
  CompileRequest request;
  request.job_id = 9;
  request.job = testing::HeaderJob();
  request.job.log_root = "/home/user/kernels";
  request.job = testing::Sealed(request.job);
  absl::StatusOr<CompileRequest> decoded = DecodeCompileRequest(Encode(request));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->job.headers, request.job.headers);
  EXPECT_EQ(decoded->job.digest, request.job.digest);
  EXPECT_EQ(decoded->job.log_root, "/home/user/kernels");
  EXPECT_EQ(JobDigest(decoded->job), decoded->job.digest);
}

TEST(WorkerProtocol, AModuleBuildTravelsWithItsKindToolsOptionsAndRoots) {
  CompileRequest request;
  request.job_id = 11;
  request.job = testing::HeaderJob();
  request.job.kind = ArtifactKind::kSharedObject;
  request.job.module = ModuleBuild{.nvcc = "/usr/local/cuda/bin/nvcc",
                                   .host_cxx = "/usr/bin/g++",
                                   .compile_options = {"-std=c++20", "-Icsrc"},
                                   .link_options = {"-L/opt/tvm_ffi/lib", "-ltvm_ffi"},
                                   .read_roots = {"/usr/include", "/opt/tvm_ffi/include"},
                                   .unavailable = "",
                                   .toolchain_fingerprint = ""};
  request.job = testing::Sealed(request.job);
  absl::StatusOr<CompileRequest> decoded = DecodeCompileRequest(Encode(request));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->job.kind, ArtifactKind::kSharedObject);
  EXPECT_EQ(decoded->job.module, request.job.module);
  EXPECT_EQ(JobDigest(decoded->job), request.job.digest);
}

TEST(JobDigest, AModuleJobsDigestCoversItsKindAndBuild) {
  CompileJob base = testing::HeaderJob();
  const std::string cubin_digest = JobDigest(base);
  base.kind = ArtifactKind::kSharedObject;
  base.module.nvcc = "/usr/local/cuda/bin/nvcc";
  const std::string digest = JobDigest(base);
  EXPECT_NE(digest, cubin_digest);
  auto differs = [&](auto mutate) {
    CompileJob job = base;
    mutate(job);
    return JobDigest(job) != digest;
  };
  EXPECT_TRUE(differs([](CompileJob& j) { j.module.nvcc = "/opt/cuda/bin/nvcc"; }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.module.host_cxx = "/usr/bin/clang++"; }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.module.compile_options.push_back("-O3"); }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.module.link_options.push_back("-lcudart"); }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.module.read_roots.push_back("/usr/include"); }));
}

TEST(JobDigest, CoversEveryByteNvrtcCompiles) {
  const CompileJob base = testing::HeaderJob();
  const std::string digest = JobDigest(base);
  auto differs = [&](auto mutate) {
    CompileJob job = base;
    mutate(job);
    return JobDigest(job) != digest;
  };
  EXPECT_TRUE(differs([](CompileJob& j) { j.source += " "; }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.program_name = "other.cu"; }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.headers[1].content += " "; }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.headers[1].name = "common/twice.cuh"; }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.headers.pop_back(); }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.options.push_back("-lineinfo"); }));
  EXPECT_TRUE(differs([](CompileJob& j) { j.name_expressions.push_back("sglang::x"); }));
  EXPECT_FALSE(differs([](CompileJob& j) { j.use_pch = true; }));
  EXPECT_FALSE(differs([](CompileJob& j) { j.timeout = std::chrono::milliseconds(1); }));
}

TEST(WorkerProtocol, SuccessfulResponseRoundTrips) {
  const CompileResponse response = SampleResponse();
  absl::StatusOr<CompileResponse> decoded = DecodeCompileResponse(Encode(response));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->status.ok());
  EXPECT_EQ(decoded->result.cubin, response.result.cubin);
  EXPECT_EQ(decoded->result.lowered_names, response.result.lowered_names);
  EXPECT_EQ(decoded->result.log, response.result.log);
  EXPECT_EQ(decoded->result.compile_ms, 12.5);
  EXPECT_TRUE(decoded->result.used_pch);
}

TEST(WorkerProtocol, ErrorResponseKeepsCodeMessageAndLog) {
  CompileResponse response;
  response.job_id = 3;
  response.status = WithNvrtcLog(absl::FailedPreconditionError("NVRTC failed"), "x.cu(1): error: boom");
  absl::StatusOr<CompileResponse> decoded = DecodeCompileResponse(Encode(response));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(decoded->status.message(), "NVRTC failed");
  EXPECT_EQ(NvrtcLogOf(decoded->status).value_or(""), "x.cu(1): error: boom");
}

TEST(WorkerProtocol, EveryTruncationIsRejected) {
  const std::string payload = Encode(SampleResponse());
  for (size_t size = 0; size < payload.size(); ++size) {
    EXPECT_FALSE(DecodeCompileResponse(payload.substr(0, size)).ok()) << "accepted a prefix of " << size << " bytes";
  }
}

TEST(WorkerProtocol, TrailingBytesAndWrongTypeAreRejected) {
  EXPECT_FALSE(DecodeCompileResponse(Encode(SampleResponse()) + "x").ok());
  EXPECT_FALSE(DecodeCompileResponse(Encode(CancelRequest{1})).ok());
  EXPECT_FALSE(TypeOf("").ok());
  EXPECT_FALSE(TypeOf("\x63").ok());
}

TEST(WorkerProtocol, HugeCountsAndLengthsAreRejectedWithoutAllocating) {
  // A compile request claiming 2^32-1 headers in a 20-byte payload.
  std::string payload = Encode(CompileRequest{});
  const size_t options_count_at = 1 + 8 + 4 + 4;  // type, id, empty name, empty source
  for (size_t i = 0; i < 4; ++i) payload[options_count_at + i] = '\xff';
  absl::StatusOr<CompileRequest> decoded = DecodeCompileRequest(payload);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  // A string length past the end.
  std::string name_too_long = Encode(CompileRequest{});
  name_too_long[1 + 8 + 1] = '\x01';  // 256 bytes
  EXPECT_FALSE(DecodeCompileRequest(name_too_long).ok());
}

TEST(WorkerProtocol, HelloWithBadMagicIsRejected) {
  std::string hello = Encode(Hello{});
  hello[1] ^= 1;
  EXPECT_FALSE(DecodeHello(hello).ok());
  EXPECT_TRUE(DecodeHello(Encode(Hello{})).ok());
}

TEST(WorkerProtocol, FrameParserReassemblesByteByByte) {
  const std::string a = Encode(CancelRequest{1});
  const std::string b = Encode(SampleResponse());
  const std::string stream = Framed(a) + Framed(b);
  FrameParser parser;
  std::vector<std::string> frames;
  for (char c : stream) {
    parser.Append(&c, 1);
    absl::StatusOr<std::optional<std::string>> next = parser.Next();
    ASSERT_TRUE(next.ok());
    if (next->has_value()) frames.push_back(**next);
  }
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0], a);
  EXPECT_EQ(frames[1], b);
  EXPECT_EQ(parser.pending_bytes(), 0u);
}

TEST(WorkerProtocol, FrameParserRejectsOversizedLength) {
  FrameParser parser;
  parser.Append("\xff\xff\xff\xff", 4);
  EXPECT_EQ(parser.Next().status().code(), absl::StatusCode::kInvalidArgument);
}

// RunCompileWorker on a thread of this process, spoken to directly.
class WorkerLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    std::array<int, 2> fds{};
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds.data()), 0);
    pool_fd_ = fds[0];
    pch_dir_ =
        std::filesystem::path(::testing::TempDir()) / ("jitd-worker-loop-" + std::to_string(getpid()) + "-" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    worker_ = std::async(std::launch::async, [fd = fds[1], dir = pch_dir_] { return RunCompileWorker(fd, dir); });
  }
  void TearDown() override {
    if (pool_fd_ >= 0) close(pool_fd_);
    if (worker_.valid()) worker_.wait();
    std::filesystem::remove_all(pch_dir_);
  }
  void Send(const std::string& payload) { ASSERT_TRUE(WriteFrame(pool_fd_, payload).ok()); }
  std::string Read() {
    absl::StatusOr<std::optional<std::string>> frame = ReadFrame(pool_fd_);
    EXPECT_TRUE(frame.ok() && frame->has_value());
    return frame.ok() && frame->has_value() ? **frame : std::string();
  }
  // Closes the pool's end and returns the worker's exit code.
  int Finish() {
    close(pool_fd_);
    pool_fd_ = -1;
    return worker_.get();
  }

  int pool_fd_ = -1;
  std::filesystem::path pch_dir_;
  std::future<int> worker_;
};

TEST_F(WorkerLoop, AnswersHelloThenCompilesAndExitsCleanlyOnEof) {
  Send(Encode(Hello{}));
  absl::StatusOr<HelloAck> ack = DecodeHelloAck(Read());
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->version, kProtocolVersion);
  EXPECT_EQ(ack->pid, static_cast<std::uint32_t>(getpid()));

  Send(Encode(CancelRequest{99}));  // a cancel for no job is ignored
  Send(Encode(CompileRequest{5, testing::Sealed(testing::TrivialJob())}));
  absl::StatusOr<CompileResponse> response = DecodeCompileResponse(Read());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->job_id, 5u);
  ASSERT_TRUE(response->status.ok()) << response->status;
  EXPECT_TRUE(testing::HasElfMagic(response->result.cubin));
  EXPECT_EQ(Finish(), 0);
}

TEST_F(WorkerLoop, CompileErrorTravelsAsStatusWithLog) {
  Send(Encode(Hello{}));
  Read();
  CompileJob job = testing::TrivialJob();
  job.source = "this is not C++";
  Send(Encode(CompileRequest{6, testing::Sealed(job)}));
  absl::StatusOr<CompileResponse> response = DecodeCompileResponse(Read());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(NvrtcLogOf(response->status).has_value());
  EXPECT_EQ(Finish(), 0);
}

TEST_F(WorkerLoop, ATamperedJobIsRefusedWithDataLossAndNotCompiled) {
  Send(Encode(Hello{}));
  Read();
  CompileJob job = testing::Sealed(testing::HeaderJob());
  job.headers[0].content.replace(job.headers[0].content.find("21"), 2, "22");  // changed after it was sealed
  Send(Encode(CompileRequest{7, job}));
  absl::StatusOr<CompileResponse> response = DecodeCompileResponse(Read());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status.code(), absl::StatusCode::kDataLoss) << response->status;
  EXPECT_NE(response->status.message().find("not compiled"), std::string_view::npos) << response->status;
  EXPECT_NE(response->status.message().find(job.digest), std::string_view::npos) << response->status;
  EXPECT_TRUE(response->result.cubin.empty());
  // An unsealed job is refused the same way.
  Send(Encode(CompileRequest{8, testing::HeaderJob()}));
  response = DecodeCompileResponse(Read());
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status.code(), absl::StatusCode::kDataLoss) << response->status;
  // And the worker goes on serving.
  Send(Encode(CompileRequest{9, testing::Sealed(testing::HeaderJob())}));
  response = DecodeCompileResponse(Read());
  ASSERT_TRUE(response.ok());
  EXPECT_TRUE(response->status.ok()) << response->status;
  EXPECT_EQ(Finish(), 0);
}

// CPU seconds this process (and so the worker thread) has used.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

TEST_F(WorkerLoop, CancelFrameStopsTheCompileInsideNvrtc) {
  Send(Encode(Hello{}));
  Read();
  const double cpu_before = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  Send(Encode(CompileRequest{8, testing::Sealed(testing::CubJob(128))}));
  // Wait until NVRTC is busy parsing (CPU burnt), so the cancel reaches
  // the flow callback rather than a job still in the worker's queue.
  while (ProcessCpuSeconds() < cpu_before + 0.2) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling interval
  }
  const auto cancelled_at = std::chrono::steady_clock::now();
  Send(Encode(CancelRequest{8}));
  absl::StatusOr<CompileResponse> response = DecodeCompileResponse(Read());
  std::printf("NVRTC stopped %.2f s after the cancel, %.2f s into the compile\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->job_id, 8u);
  EXPECT_EQ(response->status.code(), absl::StatusCode::kCancelled) << response->status;
  EXPECT_EQ(Finish(), 0);
}

TEST_F(WorkerLoop, GarbageFrameEndsTheWorkerWithFailure) {
  Send(Encode(Hello{}));
  Read();
  Send("\x63garbage");
  EXPECT_EQ(worker_.get(), 1);
}

TEST_F(WorkerLoop, WrongHelloEndsTheWorkerWithFailure) {
  Send(Encode(CancelRequest{1}));
  EXPECT_EQ(worker_.get(), 1);
}

}  // namespace
}  // namespace jitd::compiler::detail
