// The CacheAdmin and Compiler services of a real jitd process, called over
// its Unix socket through the client library.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache_seed.h"
#include "poll_until.h"
#include "reflection_probe.h"
#include "test_daemon.h"

namespace jitd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SeedCache;
using testing::TempDir;
using testing::TestDaemon;
using testing::ThreeEntries;

std::vector<std::string> Keys(const v1::ListEntriesResponse& response) {
  std::vector<std::string> keys;
  for (const auto& entry : response.entries()) keys.push_back(entry.key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

// A daemon on an empty cache.
class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(dir_);
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->WaitUntilServing();
    client_ = daemon_->Connect();
  }
  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

// A daemon on a cache seeded with three entries before it started. The
// seeded entries match no kernel served, so a start would rewarm one of
// them beside the test (a fourth entry): these tests turn the rewarm off.
class SeededServeTest : public ServeTest {
 protected:
  void SetUp() override {
    SeedCache(dir_ / "cache", ThreeEntries());
    daemon_ = std::make_unique<TestDaemon>(dir_, std::vector<std::string>{"--rewarm-count", "0"});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->WaitUntilServing();
    client_ = daemon_->Connect();
  }
};

TEST_F(ServeTest, StatsOnAnEmptyCacheReportsZeroEntriesTheDirAndTheBudget) {
  absl::StatusOr<v1::StatsResponse> stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->entries(), 0u);
  EXPECT_EQ(stats->bytes(), 0u);
  EXPECT_EQ(stats->cache_dir(), (dir_ / "cache").string());
  EXPECT_EQ(stats->max_bytes(), uint64_t{10} << 30);  // the default budget
  EXPECT_GT(stats->high_watermark_bytes(), stats->low_watermark_bytes());
  EXPECT_GE(stats->uptime_s(), 0.0);
}

TEST_F(SeededServeTest, ListEntriesShowsEntriesPublishedBeforeStartWithTheirFields) {
  absl::StatusOr<v1::ListEntriesResponse> listed = client_->ListEntries({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->total(), 3u);
  EXPECT_THAT(Keys(*listed), ElementsAre(std::string(32, 'a'), std::string(32, 'b'), std::string(32, 'c')));
  for (const v1::EntryInfo& entry : listed->entries()) {
    if (entry.key() != std::string(32, 'a')) continue;
    EXPECT_EQ(entry.kernel(), "moe.topk_sum");
    EXPECT_EQ(entry.params(), "dtype=bf16");
    EXPECT_EQ(entry.arch(), "sm_90");
    EXPECT_GT(entry.size_bytes(), 4096u);  // the cubin plus metadata
    EXPECT_GT(entry.created_unix_ms(), 0);
    EXPECT_EQ(entry.nvrtc_version(), "13.0");
    EXPECT_DOUBLE_EQ(entry.compile_ms(), 12.5);
  }
}

TEST_F(SeededServeTest, ListEntriesFiltersByGlobAndArchAndLimitKeepsTheTotal) {
  v1::ListEntriesRequest by_glob;
  by_glob.set_kernel_glob("moe.*");
  EXPECT_EQ(client_->ListEntries(by_glob)->total(), 2u);
  v1::ListEntriesRequest by_arch;
  by_arch.set_arch("sm_100a");
  EXPECT_THAT(Keys(*client_->ListEntries(by_arch)), ElementsAre(std::string(32, 'c')));
  v1::ListEntriesRequest limited;
  limited.set_limit(1);
  absl::StatusOr<v1::ListEntriesResponse> one = client_->ListEntries(limited);
  EXPECT_EQ(one->entries_size(), 1);
  EXPECT_EQ(one->total(), 3u);
}

TEST_F(SeededServeTest, EvictDryRunReportsWithoutRemoving) {
  v1::EvictRequest request;
  request.set_kernel_glob("moe.*");
  request.set_dry_run(true);
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_TRUE(evicted->dry_run());
  EXPECT_EQ(evicted->evicted_entries(), 2u);
  EXPECT_EQ(evicted->evicted_size(), 2);
  EXPECT_GT(evicted->evicted_bytes(), 0u);
  EXPECT_EQ(client_->ListEntries({})->total(), 3u);
}

TEST_F(SeededServeTest, EvictRemovesTheSelectedEntriesAndReportsWhatRemains) {
  v1::EvictRequest request;
  request.set_kernel_glob("moe.*");
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_FALSE(evicted->dry_run());
  EXPECT_EQ(evicted->evicted_entries(), 2u);
  EXPECT_EQ(evicted->remaining_entries(), 1u);
  EXPECT_THAT(Keys(*client_->ListEntries({})), ElementsAre(std::string(32, 'c')));
}

TEST_F(SeededServeTest, EvictByKeyAndByBudgetReachTheCache) {
  v1::EvictRequest by_key;
  by_key.add_keys(std::string(32, 'b'));
  EXPECT_EQ(client_->Evict(by_key)->evicted_entries(), 1u);
  v1::EvictRequest to_zero;
  to_zero.set_max_bytes(0);  // present-but-zero: evict everything unpinned
  EXPECT_EQ(client_->Evict(to_zero)->remaining_entries(), 0u);
}

TEST_F(ServeTest, EvictWithoutAnyFilterIsInvalidArgument) {
  absl::StatusOr<v1::EvictResponse> evicted = client_->Evict({});
  EXPECT_EQ(evicted.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SeededServeTest, VerifyFindsAByteFlippedInABlob) {
  absl::StatusOr<v1::VerifyResponse> clean = client_->Verify({});
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ(clean->checked(), 3u);
  EXPECT_EQ(clean->ok(), 3u);
  EXPECT_EQ(clean->corrupt(), 0u);
  EXPECT_EQ(clean->index_integrity(), "ok");

  testing::FlipByte(testing::BlobPathOf(dir_ / "cache", std::string(32, 'b')));
  absl::StatusOr<v1::VerifyResponse> found = client_->Verify({});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->corrupt(), 1u);
  EXPECT_EQ(found->ok(), 2u);
  EXPECT_EQ(found->repaired(), 0u);
  ASSERT_EQ(found->problems_size(), 1);
  EXPECT_THAT(found->problems(0), HasSubstr(std::string(32, 'b')));
}

TEST_F(SeededServeTest, VerifyRepairDropsTheCorruptEntry) {
  testing::FlipByte(testing::BlobPathOf(dir_ / "cache", std::string(32, 'a')));
  v1::VerifyRequest repair;
  repair.set_repair(true);
  absl::StatusOr<v1::VerifyResponse> repaired = client_->Verify(repair);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(repaired->corrupt(), 1u);
  EXPECT_EQ(repaired->repaired(), 1u);
  EXPECT_THAT(Keys(*client_->ListEntries({})), ElementsAre(std::string(32, 'b'), std::string(32, 'c')));
}

TEST_F(ServeTest, CompilerServesTheShippedKernelsByDefault) {
  v1::GetKernelRequest request;
  request.set_kernel("diffusion.modulate_scale_shift");
  (*request.mutable_params())["dtype"] = "bf16";
  absl::StatusOr<v1::GetKernelResponse> kernel = client_->GetKernel(request);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->source(), v1::GetKernelResponse::COMPILED);
  ASSERT_EQ(kernel->symbols_size(), 1);
  EXPECT_EQ(kernel->symbols(0).name_expression(),
            "sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16>");
  absl::StatusOr<v1::ListKernelsResponse> listed = client_->ListKernels({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->kernels_size(), 7);
}

// A kernel tree of `kernels` kernels of one instantiation each (no
// params), or, with `params` > 0, one kernel of 64^params instantiations;
// one source for all, in namespace sglang.
void WriteGeneratedTree(const std::filesystem::path& dir, int kernels, int params = 0, int values = 64) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "k.cu") << "namespace sglang { template <int... N> __global__ void k() {} }\n";
  std::ofstream toml(dir / "kernels.toml");
  toml << "schema = 1\n";
  for (int k = 0; k < kernels; ++k) {
    std::string expression = "sglang::k<" + std::to_string(k);
    for (int p = 0; p < params; ++p) expression += ", {p" + std::to_string(p) + "}";
    toml << "[[kernel]]\nname = \"gen.k" << k << "\"\nsource = \"k.cu\"\nname_expressions = [\"" << expression
         << ">\"]\n";
    for (int p = 0; p < params; ++p) {
      toml << "  [[kernel.params]]\n  name = \"p" << p << "\"\n  type = \"int\"\n  values = { ";
      for (int v = 0; v < values; ++v) toml << (v > 0 ? ", \"" : "\"") << v << "\" = \"" << v << "\"";
      toml << " }\n";
    }
  }
}

size_t ResidentKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

// Six int params of ten values: a manifest of a few lines and 10^6
// instantiations, which `jitctl kernels` and `warm --all` once listed whole
// (0.8 GB and seconds a call). Refused when the daemon loads it.
TEST(KernelsBound, ATreeOfAMillionInstantiationsIsRefusedAtStartNamingTheKernelAndTheBound) {
  TempDir dir;
  WriteGeneratedTree(dir / "million", 1, 6, 10);
  TestDaemon daemon(dir, {"--kernels", (dir / "million").string()});
  const std::optional<int> exit_code = daemon.process().WaitForExit(testing::kProcessTimeout);
  ASSERT_TRUE(exit_code.has_value()) << "it started: " << daemon.process().Output();
  EXPECT_NE(*exit_code, 0);
  EXPECT_THAT(daemon.process().Output(),
              HasSubstr("kernel gen.k0 has 1000000 instantiations (10 p0 x 10 p1 x 10 p2 x 10 p3 x 10 p4 x 10 p5), "
                        "more than the 4096 instantiations a kernel tree may have"));
}

// Three trees: 2100 + 2100 kernels, and one kernel of 4096 instantiations
// (64 x 64, the most a tree may have): more kernels than one page holds.
class KernelPages : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteGeneratedTree(dir_ / "a", 2100);
    WriteGeneratedTree(dir_ / "b", 2100);
    WriteGeneratedTree(dir_ / "c", 1, 2);
    daemon_ = std::make_unique<TestDaemon>(
        dir_, std::vector<std::string>{"--kernels", "a=" + (dir_ / "a").string(), "--kernels",
                                       "b=" + (dir_ / "b").string(), "--kernels", "c=" + (dir_ / "c").string()});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->process().Output();
    client_ = daemon_->Connect();
  }
  TempDir dir_;
  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(KernelPages, ListKernelsPagesThroughThousandsOfKernelsWithBoundedMemory) {
  // The client library follows the pages: the whole list, once each.
  absl::StatusOr<v1::ListKernelsResponse> all = client_->ListKernels(v1::ListKernelsRequest());
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->kernels_size(), 4201);
  EXPECT_TRUE(all->next_page_token().empty());
  std::set<std::string> names;
  for (const v1::KernelInfo& kernel : all->kernels()) names.insert(kernel.name());
  EXPECT_EQ(names.size(), 4201u);
  EXPECT_EQ(all->kernels(4200).name(), "c/gen.k0");
  EXPECT_EQ(all->kernels(4200).instantiations(), 4096u) << "counted, not listed";

  // Page by page: in order, each page at most what was asked.
  std::vector<std::string> paged;
  v1::ListKernelsRequest request;
  request.set_page_size(1000);
  std::vector<int> sizes;
  do {
    absl::StatusOr<v1::ListKernelsResponse> page = client_->ListKernels(request);
    ASSERT_TRUE(page.ok()) << page.status();
    sizes.push_back(page->kernels_size());
    for (const v1::KernelInfo& kernel : page->kernels()) paged.push_back(kernel.name());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty() && sizes.size() < 10);
  EXPECT_THAT(sizes, ElementsAre(1000, 1000, 1000, 1000, 201));
  std::vector<std::string> whole;
  for (const v1::KernelInfo& kernel : all->kernels()) whole.push_back(kernel.name());
  EXPECT_EQ(paged, whole);

  // A page is never more than 4096, whatever is asked; the default is that.
  request.Clear();
  request.set_page_size(1'000'000);
  absl::StatusOr<v1::ListKernelsResponse> capped = client_->ListKernels(request);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(capped->kernels_size(), 4096);
  EXPECT_FALSE(capped->next_page_token().empty());

  // A glob pages over what it matches.
  request.Clear();
  request.set_glob("b/*");
  request.set_page_size(2000);
  absl::StatusOr<v1::ListKernelsResponse> globbed = client_->ListKernels(request);
  ASSERT_TRUE(globbed.ok()) << globbed.status();
  EXPECT_EQ(globbed->kernels_size(), 2000);
  EXPECT_EQ(globbed->kernels(0).name(), "b/gen.k0");
  request.set_page_token(globbed->next_page_token());
  globbed = client_->ListKernels(request);
  ASSERT_TRUE(globbed.ok()) << globbed.status();
  EXPECT_EQ(globbed->kernels_size(), 100);
  EXPECT_TRUE(globbed->next_page_token().empty()) << "the last page of b/* says so";

  // A token the daemon did not give is refused.
  request.set_page_token("garbage");
  EXPECT_EQ(client_->ListKernels(request).status().code(), absl::StatusCode::kInvalidArgument);

  // jitctl kernels shows every page.
  const testing::ProcessResult listed = daemon_->Jitctl({"kernels"});
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr("4201 kernels (a 2100, b 2100, c 1)"));

  // Listing again and again holds nothing: the daemon's memory stays put.
  const size_t before = ResidentKiB(daemon_->process().pid());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(client_->ListKernels(v1::ListKernelsRequest()).ok());
  const size_t after = ResidentKiB(daemon_->process().pid());
  EXPECT_LT(after, before + 64 * 1024) << "VmRSS " << before << " KiB -> " << after << " KiB";

  // A reload between two pages: the rest of the old listing is refused, not
  // answered with kernels skipped or repeated.
  request.Clear();
  request.set_page_size(1000);
  absl::StatusOr<v1::ListKernelsResponse> first = client_->ListKernels(request);
  ASSERT_TRUE(first.ok()) << first.status();
  WriteGeneratedTree(dir_ / "a", 2101);
  daemon_->process().Signal(SIGHUP);
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        absl::StatusOr<v1::ListKernelsResponse> now = client_->ListKernels(v1::ListKernelsRequest());
        return now.ok() && now->kernels_size() == 4202;
      },
      std::chrono::seconds(20)))
      << daemon_->process().Output();
  request.set_page_token(first->next_page_token());
  const absl::Status stale = client_->ListKernels(request).status();
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_THAT(std::string(stale.message()), HasSubstr("list again from the first page"));
}

// Warm(all) counts what it would warm before it lists anything: three
// trees of 4200 + 4096 instantiations for a dozen archs or more is over
// the 100,000 items one call warms.
TEST_F(KernelPages, AWarmOfAllIsCountedBeforeItIsListed) {
  v1::WarmRequest request;
  request.set_all(true);
  absl::StatusOr<v1::ListKernelsResponse> kernels = client_->ListKernels(v1::ListKernelsRequest());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  // Each arch as a cubin and as PTX (compute_N): two items per instantiation.
  for (int i = 0; i < kernels->supported_archs_size() && request.archs_size() < 64; ++i) {
    const std::string& arch = kernels->supported_archs(i);
    request.add_archs(arch);
    request.add_archs("compute_" + arch.substr(3));
  }
  ASSERT_GE(request.archs_size(), 13) << "enough archs to pass 100,000 items";
  absl::StatusOr<v1::WarmProgress> refused = client_->Warm(request, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("would be up to"));
}

TEST_F(ServeTest, HealthAnswersServing) {
  absl::StatusOr<bool> serving = client_->IsServing();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);
}

TEST_F(ServeTest, ReflectionListsEveryService) {
  absl::StatusOr<std::string> services = testing::ListServicesByReflection(daemon_->endpoint());
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, HasSubstr("jitd.v1.CacheAdmin"));
  EXPECT_THAT(*services, HasSubstr("jitd.v1.Compiler"));
  EXPECT_THAT(*services, HasSubstr("grpc.health.v1.Health"));
}

// A daemon started with --admin-token-file.
class AdminTokenTest : public ServeTest {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "token") << "s3cret-token\n";
    SeedCache(dir_ / "cache", ThreeEntries());
    daemon_ = std::make_unique<TestDaemon>(
        dir_, std::vector<std::string>{"--admin-token-file", (dir_ / "token").string(), "--rewarm-count", "0"});
    ASSERT_TRUE(daemon_->WaitUntilServing().ok()) << daemon_->WaitUntilServing();
    client_ = daemon_->Connect();
  }
};

TEST_F(AdminTokenTest, EvictIsDeniedWithoutTheTokenAndWithAWrongOne) {
  v1::EvictRequest request;
  request.add_keys(std::string(32, 'a'));
  EXPECT_EQ(client_->Evict(request).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(daemon_->Connect("wrong-token")->Evict(request).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client_->ListEntries({})->total(), 3u);  // nothing was removed
}

TEST_F(AdminTokenTest, EvictSucceedsWithTheToken) {
  v1::EvictRequest request;
  request.add_keys(std::string(32, 'a'));
  absl::StatusOr<v1::EvictResponse> evicted = daemon_->Connect("s3cret-token")->Evict(request);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->evicted_entries(), 1u);
}

TEST_F(AdminTokenTest, VerifyNeedsTheTokenOnlyToRepair) {
  EXPECT_TRUE(client_->Verify({}).ok());
  v1::VerifyRequest repair;
  repair.set_repair(true);
  EXPECT_EQ(client_->Verify(repair).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(daemon_->Connect("s3cret-token")->Verify(repair).ok());
}

TEST_F(AdminTokenTest, ReadingCallsNeedNoToken) {
  EXPECT_TRUE(client_->Stats().ok());
  EXPECT_TRUE(client_->ListEntries({}).ok());
}

}  // namespace
}  // namespace jitd
