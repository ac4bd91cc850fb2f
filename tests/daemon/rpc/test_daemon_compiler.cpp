// jitd.v1.Compiler of a real jitd process: the request path (memory, disk,
// compile), single flight, the modes, the negative cache, Warm and
// ListKernels, driven through the client library over a Unix socket.
#include <gmock/gmock.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <set>
#include <thread>

#include "jitd/cache.h"
#include "jitd/v1/compiler.grpc.pb.h"
#include "kernel_fixtures.h"
#include "poll_until.h"
#include "small_daemon_test.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kCompileCallTimeout;
using testing::KernelRequest;
using testing::kProcessTimeout;
using testing::PollUntil;
using ::testing::SizeIs;

v1::GetKernelResponse::Source SourceOf(const absl::StatusOr<v1::GetKernelResponse>& response) {
  return response.ok() ? response->source() : v1::GetKernelResponse::SOURCE_UNSPECIFIED;
}

// A daemon serving the small fixture kernels with two workers.
class CompilerTest : public testing::SmallDaemonTest {
 protected:
  void SetUp() override { Start(); }
};

TEST_F(CompilerTest, CompilesThenServesFromMemoryThenAfterARestartFromDisk) {
  const v1::GetKernelRequest request = KernelRequest("small.fill", {{"dtype", "fp32"}});
  absl::StatusOr<v1::GetKernelResponse> compiled = client_->GetKernel(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(compiled->cubin().substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(compiled->cubin_size(), compiled->cubin().size());
  EXPECT_THAT(compiled->key(), ::testing::MatchesRegex("[0-9a-f]{64}"));
  EXPECT_EQ(compiled->arch(), "sm_90");  // the daemon's default
  EXPECT_EQ(compiled->nvrtc_version(), "13.0");
  EXPECT_GT(compiled->compile_ms(), 0);
  EXPECT_GT(compiled->served_us(), 0u);
  ASSERT_THAT(compiled->symbols(), SizeIs(1));
  EXPECT_EQ(compiled->symbols(0).name_expression(), "sglang::small::fill_kernel<float>");
  EXPECT_THAT(compiled->symbols(0).lowered_name(), HasSubstr("fill_kernel"));

  absl::StatusOr<v1::GetKernelResponse> from_memory = client_->GetKernel(request);
  ASSERT_TRUE(from_memory.ok()) << from_memory.status();
  EXPECT_EQ(from_memory->source(), v1::GetKernelResponse::MEMORY);
  EXPECT_EQ(from_memory->key(), compiled->key());
  EXPECT_EQ(from_memory->cubin(), compiled->cubin());
  EXPECT_EQ(from_memory->compile_ms(), compiled->compile_ms());  // of the compile, not of this answer

  Stop();
  Start({});
  absl::StatusOr<v1::GetKernelResponse> from_disk = client_->GetKernel(request);
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_EQ(from_disk->source(), v1::GetKernelResponse::DISK);
  EXPECT_EQ(from_disk->key(), compiled->key());
  EXPECT_EQ(from_disk->cubin(), compiled->cubin());
  EXPECT_EQ(from_disk->symbols(0).lowered_name(), compiled->symbols(0).lowered_name());
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compiles(), 0u);
  EXPECT_EQ(stats.disk_hits(), 1u);
}

TEST_F(CompilerTest, PathDeliveryNamesTheVerifiedBlobFileInsteadOfSendingTheBytes) {
  v1::GetKernelRequest by_bytes = KernelRequest("small.scale", {{"clamp", "on"}});
  absl::StatusOr<v1::GetKernelResponse> bytes = client_->GetKernel(by_bytes);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  v1::GetKernelRequest by_path = by_bytes;
  by_path.set_delivery(v1::GetKernelRequest::PATH);
  absl::StatusOr<v1::GetKernelResponse> path = client_->GetKernel(by_path);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(path->cubin().empty());
  EXPECT_EQ(path->cubin_size(), bytes->cubin().size());
  ASSERT_TRUE(std::filesystem::path(path->blob_path()).is_absolute()) << path->blob_path();
  EXPECT_EQ(std::filesystem::path(path->blob_path()).parent_path().parent_path().parent_path(), dir_ / "cache");

  std::ifstream file(path->blob_path(), std::ios::binary);
  const std::string blob((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  cache::EntryMeta meta;
  std::string cubin;
  ASSERT_TRUE(cache::DecodeBlob(blob, &meta, &cubin).ok());
  EXPECT_EQ(cubin, bytes->cubin());
  EXPECT_EQ(meta.key, bytes->key());
}

TEST_F(CompilerTest, PathDeliveryOfAnEntryWhoseBlobVanishedSendsTheBytesFromMemory) {
  v1::GetKernelRequest request = KernelRequest("small.fill", {{"dtype", "fp32"}});
  request.set_delivery(v1::GetKernelRequest::PATH);
  absl::StatusOr<v1::GetKernelResponse> compiled = client_->GetKernel(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_FALSE(compiled->blob_path().empty());
  std::filesystem::remove(compiled->blob_path());  // gone behind the daemon's back

  absl::StatusOr<v1::GetKernelResponse> from_memory = client_->GetKernel(request);
  ASSERT_TRUE(from_memory.ok()) << from_memory.status();
  EXPECT_EQ(from_memory->source(), v1::GetKernelResponse::MEMORY);
  EXPECT_TRUE(from_memory->blob_path().empty());  // no file to name any more
  EXPECT_EQ(from_memory->cubin().substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(from_memory->cubin_size(), from_memory->cubin().size());
}

TEST_F(CompilerTest, AnEvictedEntryIsNotServedFromMemoryEither) {
  const v1::GetKernelRequest request = KernelRequest("small.fill", {{"dtype", "fp32"}});
  absl::StatusOr<v1::GetKernelResponse> compiled = client_->GetKernel(request);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  v1::EvictRequest evict;
  evict.add_keys(compiled->key());
  ASSERT_EQ(client_->Evict(evict)->evicted_entries(), 1u);
  absl::StatusOr<v1::GetKernelResponse> again = client_->GetKernel(request);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source(), v1::GetKernelResponse::COMPILED);
  EXPECT_EQ(again->cubin(), compiled->cubin()) << "a seeded compile gives the same bytes";
}

TEST_F(CompilerTest, SixtyFourConcurrentIdenticalColdRequestsCompileOnce) {
  constexpr int kCallers = 64;
  const v1::GetKernelRequest request = KernelRequest("small.block_sum", {{"threads", "256"}});
  std::vector<std::unique_ptr<Client>> clients;  // one channel per caller, as separate processes would have
  for (int i = 0; i < kCallers; ++i) clients.push_back(daemon_->Connect("", kCompileCallTimeout));
  std::vector<absl::StatusOr<v1::GetKernelResponse>> answers(kCallers, absl::UnknownError("not run"));
  std::latch start(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = clients[i]->GetKernel(request);
    });
  }
  for (std::thread& caller : callers) caller.join();

  int compiled = 0;
  for (const auto& answer : answers) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->key(), answers[0]->key());
    EXPECT_EQ(answer->cubin(), answers[0]->cubin());
    compiled += answer->source() == v1::GetKernelResponse::COMPILED;
  }
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compiles(), 1u);  // the daemon's own count: one NVRTC compile
  EXPECT_EQ(stats.requests(), static_cast<uint64_t>(kCallers));
  // Every other caller either waited on that compile or came after it: from
  // memory, or from disk if it came between the cubin's publish and its
  // fill into memory.
  EXPECT_EQ(stats.joined() + stats.memory_hits() + stats.disk_hits() + 1, static_cast<uint64_t>(kCallers));
  EXPECT_EQ(static_cast<uint64_t>(compiled), stats.joined() + 1);
  EXPECT_GT(stats.joined(), 0u);  // a second-long compile: some callers must have joined it
  EXPECT_EQ(client_->ListEntries({})->total(), 1u);
}

TEST_F(CompilerTest, CachedOnlyMissIsNotFoundAndCompilesNothing) {
  const v1::GetKernelRequest cached_only =
      KernelRequest("small.fill", {{"dtype", "fp64"}}, v1::GetKernelRequest::CACHED_ONLY);
  absl::StatusOr<v1::GetKernelResponse> miss = client_->GetKernel(cached_only);
  EXPECT_EQ(miss.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(miss.status().message()), HasSubstr("small.fill{dtype=fp64}@sm_90 is not in the cache"));
  EXPECT_THAT(std::string(miss.status().message()), HasSubstr("CACHED_ONLY never compiles"));
  v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compiles(), 0u);
  EXPECT_EQ(stats.cached_only_misses(), 1u);
  EXPECT_EQ(stats.entries(), 0u);

  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp64"}})).ok());
  EXPECT_EQ(SourceOf(client_->GetKernel(cached_only)), v1::GetKernelResponse::MEMORY);
}

TEST_F(CompilerTest, PrefetchAnswersNoneAtOnceAndALaterRequestGetsThatCompile) {
  const v1::GetKernelRequest prefetch =
      KernelRequest("small.block_sum", {{"threads", "512"}}, v1::GetKernelRequest::PREFETCH);
  absl::StatusOr<v1::GetKernelResponse> queued = client_->GetKernel(prefetch);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->source(), v1::GetKernelResponse::NONE);
  EXPECT_TRUE(queued->cubin().empty());
  EXPECT_FALSE(queued->key().empty());
  EXPECT_EQ(daemon_->Stats().prefetches(), 1u);

  absl::StatusOr<v1::GetKernelResponse> later =
      client_->GetKernel(KernelRequest("small.block_sum", {{"threads", "512"}}));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->key(), queued->key());
  // It joined the prefetched compile, or came after it: either way no second one.
  EXPECT_THAT(later->source(), ::testing::AnyOf(v1::GetKernelResponse::COMPILED, v1::GetKernelResponse::MEMORY));
  EXPECT_EQ(daemon_->Stats().compiles(), 1u);
  // "At once": the prefetch was answered in less time than the compile took.
  EXPECT_LT(static_cast<double>(queued->served_us()) / 1000, later->compile_ms());
}

TEST_F(CompilerTest, PrefetchOfACachedKernelAnswersWithIt) {
  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());
  absl::StatusOr<v1::GetKernelResponse> hit =
      client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}}, v1::GetKernelRequest::PREFETCH));
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->source(), v1::GetKernelResponse::MEMORY);
  EXPECT_FALSE(hit->cubin().empty());
}

TEST_F(CompilerTest, CompileFailureIsRememberedAndAnsweredAgainWithoutARecompile) {
  const v1::GetKernelRequest broken = KernelRequest("small.broken");
  absl::StatusOr<v1::GetKernelResponse> first = client_->GetKernel(broken);
  absl::StatusOr<v1::GetKernelResponse> second = client_->GetKernel(broken);
  for (const auto* answer : {&first, &second}) {
    EXPECT_EQ(answer->status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(answer->status().message()),
                HasSubstr("identifier \"undeclared_in_broken_kernel\" is undefined"));
  }
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("compile failure remembered for up to 30 s"));
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compiles(), 1u);
  EXPECT_EQ(stats.compile_failures(), 1u);
  EXPECT_EQ(stats.negative_hits(), 1u);
}

TEST_F(CompilerTest, NegativeTtlZeroRecompilesAFailureEveryTime) {
  Start({"--negative-ttl", "0"});
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(client_->GetKernel(KernelRequest("small.broken")).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.compiles(), 2u);
  EXPECT_EQ(stats.negative_hits(), 0u);
}

TEST_F(CompilerTest, HotCacheBudgetBoundsTheEntriesKeptInMemory) {
  Start({"--hot-cache-bytes", "6K"});  // one ~4 KiB cubin fits, two do not
  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());
  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp64"}})).ok());
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_EQ(stats.hot_max_bytes(), 6u << 10);
  EXPECT_EQ(stats.hot_entries(), 1u);
  EXPECT_LE(stats.hot_bytes(), 6u << 10);
  EXPECT_EQ(stats.hot_evictions(), 1u);
  // The evicted one is still on disk.
  EXPECT_EQ(SourceOf(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}}))),
            v1::GetKernelResponse::DISK);
}

TEST_F(CompilerTest, ListKernelsDescribesEveryManifestKernelAndTheArchs) {
  absl::StatusOr<v1::ListKernelsResponse> listed = client_->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> names;
  for (const v1::KernelInfo& kernel : listed->kernels()) names.push_back(kernel.name());
  EXPECT_THAT(names, ElementsAre("small.fill", "small.scale", "small.broken", "small.block_sum"));
  const v1::KernelInfo& scale = listed->kernels(1);
  EXPECT_EQ(scale.source(), "scale.cu");
  EXPECT_EQ(scale.name_expression(), "sglang::small::scale_kernel<{clamp}>");
  EXPECT_THAT(scale.description(), HasSubstr("clamped"));
  EXPECT_THAT(scale.default_options(), ElementsAre("-std=c++17"));
  EXPECT_EQ(scale.instantiations(), 2u);
  ASSERT_THAT(scale.params(), SizeIs(1));
  EXPECT_EQ(scale.params(0).name(), "clamp");
  EXPECT_EQ(scale.params(0).type(), "enum");
  EXPECT_THAT(scale.params(0).allowed(), ElementsAre("off", "on"));
  EXPECT_EQ(scale.params(0).default_value(), "off");
  EXPECT_EQ(listed->kernels(3).instantiations(), 4u);
  EXPECT_EQ(listed->kernels(3).params(0).default_value(), "");  // required
  EXPECT_EQ(listed->default_arch(), "sm_90");
  EXPECT_THAT(listed->supported_archs(), ::testing::IsSupersetOf({"sm_75", "sm_90", "sm_100", "sm_120"}));

  v1::ListKernelsRequest glob;
  glob.set_glob("small.b*");
  names.clear();
  absl::StatusOr<v1::ListKernelsResponse> globbed = client_->ListKernels(glob);
  ASSERT_TRUE(globbed.ok()) << globbed.status();
  for (const v1::KernelInfo& kernel : globbed->kernels()) names.push_back(kernel.name());
  EXPECT_THAT(names, ElementsAre("small.broken", "small.block_sum"));
}

TEST_F(CompilerTest, WarmStreamsOneProgressPerItemWithRunningCountsAndASpecsOwnArchWins) {
  ASSERT_TRUE(client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}})).ok());  // CACHED below
  v1::WarmRequest request;
  v1::KernelSpec* fill = request.add_specs();  // for each requested arch
  fill->set_kernel("small.fill");
  (*fill->mutable_params())["dtype"] = "fp32";
  v1::KernelSpec* own_arch = request.add_specs();  // its own arch only
  own_arch->set_kernel("small.scale");
  own_arch->set_arch("sm_89");
  request.add_specs()->set_kernel("small.broken");
  request.add_archs("sm_90");
  request.add_archs("sm_100");

  std::vector<v1::WarmProgress> messages;
  absl::StatusOr<v1::WarmProgress> last =
      client_->Warm(request, [&](const v1::WarmProgress& progress) { messages.push_back(progress); });
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_THAT(messages, SizeIs(5));  // fill x2 archs, scale x1 (own arch), broken x2 archs
  std::map<std::string, int> outcomes;
  std::set<std::string> items;
  for (size_t i = 0; i < messages.size(); ++i) {
    const v1::WarmProgress& m = messages[i];
    EXPECT_EQ(m.done(), i + 1);
    EXPECT_EQ(m.total(), 5u);
    EXPECT_EQ(m.compiled() + m.cached() + m.failed(), m.done());
    EXPECT_FALSE(m.key().empty()) << m.spec().kernel();  // failures too: the key that failed
    outcomes[v1::WarmProgress::Outcome_Name(m.outcome())]++;
    items.insert(m.spec().kernel() + "@" + m.spec().arch());
    if (m.outcome() == v1::WarmProgress::FAILED) {
      EXPECT_THAT(m.error(), HasSubstr("FAILED_PRECONDITION"));
      EXPECT_THAT(m.error(), HasSubstr("undeclared_in_broken_kernel"));
    }
    if (m.outcome() == v1::WarmProgress::COMPILED) {
      EXPECT_GT(m.compile_ms(), 0);
    }
    if (m.outcome() == v1::WarmProgress::CACHED) {
      EXPECT_EQ(m.compile_ms(), 0);
    }
  }
  EXPECT_EQ(outcomes["COMPILED"], 2);  // fill sm_100, scale sm_89
  EXPECT_EQ(outcomes["CACHED"], 1);    // fill sm_90
  EXPECT_EQ(outcomes["FAILED"], 2);
  EXPECT_THAT(items, ElementsAre("small.broken@sm_100", "small.broken@sm_90", "small.fill@sm_100", "small.fill@sm_90",
                                 "small.scale@sm_89"));
  EXPECT_EQ(last->compiled(), 2u);
  EXPECT_EQ(last->cached(), 1u);
  EXPECT_EQ(last->failed(), 2u);
}

TEST_F(CompilerTest, WarmAllCoversEveryInstantiationForTheDefaultArch) {
  v1::WarmRequest request;
  request.set_all(true);
  absl::StatusOr<v1::WarmProgress> last = client_->Warm(request, nullptr);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->total(), 9u);  // fill 2 + scale 2 + broken 1 + block_sum 4
  EXPECT_EQ(last->compiled(), 8u);
  EXPECT_EQ(last->failed(), 1u);
  EXPECT_EQ(daemon_->Stats().entries(), 8u);
}

TEST_F(CompilerTest, WarmWithAnUnknownArchIsInvalidArgumentBeforeAnyCompile) {
  v1::WarmRequest request;
  request.set_all(true);
  request.add_archs("sm_91");
  absl::StatusOr<v1::WarmProgress> last = client_->Warm(request, nullptr);
  EXPECT_EQ(last.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(last.status().message()), HasSubstr("arch 'sm_91' is not supported"));
  EXPECT_EQ(daemon_->Stats().compiles(), 0u);
}

TEST_F(CompilerTest, WarmWithNothingToWarmIsInvalidArgument) {
  EXPECT_EQ(client_->Warm({}, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

v1::WarmRequest AllBlockSums() {
  v1::WarmRequest request;
  for (const char* threads : {"128", "256", "512", "1024"}) {
    v1::KernelSpec* spec = request.add_specs();
    spec->set_kernel("small.block_sum");
    (*spec->mutable_params())["threads"] = threads;
  }
  return request;
}

TEST_F(CompilerTest, LiveRequestsOvertakeQueuedWarmWork) {
  Start({"--workers", "1"});
  v1::WarmRequest warm = AllBlockSums();
  warm.set_concurrency(4);  // all four queued at once behind one worker
  std::atomic<uint32_t> warmed{0};
  std::thread warming([&] {
    auto client = daemon_->Connect();
    EXPECT_TRUE(client->Warm(warm, [&](const v1::WarmProgress& p) { warmed = p.done(); }).ok());
  });
  // One warm compile running, three waiting for the worker.
  ASSERT_TRUE(PollUntil(
      [&] {
        const v1::StatsResponse stats = daemon_->Stats();
        return stats.busy_workers() == 1 && stats.queue_depth() == 3;
      },
      kProcessTimeout));
  absl::StatusOr<v1::GetKernelResponse> live = client_->GetKernel(KernelRequest("small.fill", {{"dtype", "fp32"}}));
  const uint32_t warmed_before_live = warmed.load();
  warming.join();
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->source(), v1::GetKernelResponse::COMPILED);
  // The live compile ran right after the warm one that held the worker,
  // ahead of the three queued before it.
  EXPECT_LE(warmed_before_live, 1u);
  EXPECT_EQ(warmed.load(), 4u);
}

TEST_F(CompilerTest, WarmStopsStartingCompilesWhenTheCallerCancels) {
  Start({"--workers", "1"});
  v1::WarmRequest warm = AllBlockSums();
  warm.set_concurrency(1);
  auto stub = v1::Compiler::NewStub(grpc::CreateChannel(daemon_->endpoint(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WarmProgress>> reader = stub->Warm(&context, warm);
  v1::WarmProgress progress;
  ASSERT_TRUE(reader->Read(&progress));
  EXPECT_EQ(progress.done(), 1u);
  context.TryCancel();
  while (reader->Read(&progress)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  ASSERT_TRUE(PollUntil([&] { return daemon_->Stats().compiles_in_flight() == 0; }, kProcessTimeout));
  const v1::StatsResponse stats = daemon_->Stats();
  EXPECT_LE(stats.compiles(), 2u);  // the first, and at most the one running at the cancel
  EXPECT_LE(stats.entries(), 2u);
  // The handler logs as it returns, which may trail the last compile.
  EXPECT_TRUE(PollUntil([&] { return daemon_->process().Output().find("stopped after") != std::string::npos; },
                        kProcessTimeout))
      << daemon_->process().Output();
}

TEST_F(CompilerTest, HitsAreLoggedOnlyWithLogHits) {
  const v1::GetKernelRequest request = KernelRequest("small.fill", {{"dtype", "fp32"}});
  ASSERT_TRUE(client_->GetKernel(request).ok());
  ASSERT_TRUE(client_->GetKernel(request).ok());
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("compile small.fill{dtype=fp32}@sm_90 key="));
  EXPECT_THAT(daemon_->process().Output(), ::testing::Not(HasSubstr("hit small.fill")));

  Start({"--log-hits"});
  ASSERT_TRUE(client_->GetKernel(request).ok());
  ASSERT_TRUE(client_->GetKernel(request).ok());
  EXPECT_THAT(daemon_->process().Output(), HasSubstr("hit small.fill dtype=fp32 sm_90 key="));
  EXPECT_THAT(daemon_->process().Output(), HasSubstr(" from disk in "));
  EXPECT_THAT(daemon_->process().Output(), HasSubstr(" from memory in "));
}

}  // namespace
}  // namespace jitd
