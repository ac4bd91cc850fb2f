// The request path with real parts: a kernels tree on disk, NVRTC in worker
// processes, a cache directory with its SQLite index.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "jitd/base/status.h"
#include "manifest/lock.h"
#include "serving/kernel_service.h"
#include "testing.h"

namespace jitd::serving {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using cache::testing::TempDir;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A small kernels tree: a fast kernel, a broken one, and a CUB kernel slow
// enough (about a second) to hold a compile open while callers come and go.
void WriteKernels(const fs::path& dir, const std::string& fast_body = "out[0] = T(1);") {
  Write(dir / "kernels.toml", R"toml(
schema = 1
[defaults]
options = ["-std=c++17"]
[[kernel]]
name = "t.fast"
source = "fast.cu"
name_expressions = ["sglang::t::fast<{dtype}>"]
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { fp32 = "float", fp64 = "double" }
[[kernel]]
name = "t.broken"
source = "broken.cu"
name_expressions = ["sglang::t::broken"]
[[kernel]]
name = "t.slow"
source = "slow.cu"
name_expressions = ["sglang::t::slow<{threads}>"]
  [[kernel.params]]
  name = "threads"
  type = "int"
  values = { "128" = "128", "256" = "256" }
)toml");
  Write(dir / "fast.cu",
        "namespace sglang::t {\ntemplate <typename T> __global__ void fast(T* out) { " + fast_body + " }\n}\n");
  Write(dir / "broken.cu",
        "namespace sglang::t {\n__global__ void broken(float* out) { out[0] = undefined_name; }\n}\n");
  Write(dir / "slow.cu", R"(#include <cub/block/block_reduce.cuh>
namespace sglang::t {
template <int kThreads> __global__ void slow(const float* in, float* out) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  float v = Reduce(tmp).Sum(in[threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
}
)");
}

const manifest::Toolchain& Tools() {
  static const manifest::Toolchain t = *manifest::Toolchain::Detect();
  return t;
}

class KernelServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteKernels(dir_.path() / "kernels");
    auto c = cache::Cache::Open(cache::testing::Options(dir_.path() / "cache"));
    ASSERT_TRUE(c.ok()) << c.status();
    cache_ = std::move(*c);
    compiler::WorkerPool::Options po;
    po.worker_argv = {JITD_WORKER_EXE};
    po.workers = 2;
    po.scratch_dir = dir_.path() / "scratch";
    auto pool = compiler::WorkerPool::Start(po);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(*pool);
    service_ = std::make_unique<KernelService>(Resolver(), cache_.get(), pool_.get(), Options());
  }
  void TearDown() override {
    service_.reset();
    pool_.reset();
  }
  virtual KernelService::Options Options() { return {}; }
  std::shared_ptr<const manifest::Resolver> Resolver() {
    auto tree = manifest::KernelTree::Load(dir_.path() / "kernels");
    EXPECT_TRUE(tree.ok()) << tree.status();
    auto r = manifest::Resolver::Create(*tree, Tools(), "sm_90");
    EXPECT_TRUE(r.ok()) << r.status();
    return std::shared_ptr<const manifest::Resolver>(std::move(*r));
  }
  absl::StatusOr<KernelAnswer> Get(const manifest::KernelRequest& r, Mode mode = Mode::kCompile, CallContext ctx = {}) {
    return service_->Get(r, mode, ctx);
  }

  TempDir dir_;
  std::unique_ptr<cache::Cache> cache_;
  std::unique_ptr<compiler::WorkerPool> pool_;
  std::unique_ptr<KernelService> service_;
};

const manifest::KernelRequest kFast{"t.fast", {{"dtype", "fp32"}}, "", {}};
const manifest::KernelRequest kSlow{"t.slow", {{"threads", "128"}}, "", {}};

TEST_F(KernelServiceTest, CompilesThenServesFromMemoryThenFromDisk) {
  auto first = Get(kFast);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->origin, Origin::kCompiled);
  EXPECT_EQ(first->entry->cubin.substr(0, 4),
            "\x7f"
            "ELF");
  ASSERT_EQ(first->entry->meta.symbols.size(), 1u);
  EXPECT_EQ(first->entry->meta.symbols[0].name_expression, "sglang::t::fast<float>");
  EXPECT_FALSE(first->entry->meta.symbols[0].lowered_name.empty());
  EXPECT_FALSE(first->entry->blob_path.empty()) << "stored, with a path for PATH delivery";
  auto second = Get(kFast);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->origin, Origin::kMemory);
  EXPECT_EQ(second->entry->cubin, first->entry->cubin);
  // A fresh service on the same cache (a restart) finds it on disk.
  service_ = std::make_unique<KernelService>(Resolver(), cache_.get(), pool_.get(), Options());
  auto third = Get(kFast);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->origin, Origin::kDisk);
  EXPECT_EQ(third->key, first->key);
  EXPECT_EQ(service_->stats().compiles, 0u);
}

TEST_F(KernelServiceTest, ARecompileOfAKeyGivesTheSameBytes) {
  auto first = Get(kSlow);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(cache_->Evict({.keys = {first->key}}).ok());
  service_ = std::make_unique<KernelService>(Resolver(), cache_.get(), pool_.get(), Options());
  auto again = Get(kSlow);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->origin, Origin::kCompiled);
  EXPECT_EQ(again->entry->cubin, first->entry->cubin);
}

TEST_F(KernelServiceTest, SixtyFourConcurrentIdenticalRequestsCompileOnce) {
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<KernelAnswer>> answers(64, absl::UnknownError("not run"));
  for (int i = 0; i < 64; ++i) threads.emplace_back([&, i] { answers[i] = Get(kSlow); });
  for (auto& t : threads) t.join();
  for (const auto& a : answers) {
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->entry->cubin, answers[0]->entry->cubin);
  }
  auto s = service_->stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(pool_->Stats().compiles, 1u) << "the worker pool saw one compile";
  EXPECT_EQ(s.joined + s.memory_hits + s.disk_hits + s.compiles, 64u);
}

TEST_F(KernelServiceTest, CachedOnlyMissIsNotFoundAndCompilesNothing) {
  auto r = Get(kFast, Mode::kCachedOnly);
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("CACHED_ONLY never compiles"), std::string_view::npos) << r.status();
  EXPECT_EQ(pool_->Stats().compiles, 0u);
  ASSERT_TRUE(Get(kFast).ok());
  auto hit = Get(kFast, Mode::kCachedOnly);
  ASSERT_TRUE(hit.ok()) << hit.status();
}

TEST_F(KernelServiceTest, PrefetchAnswersAtOnceAndCompilesInTheBackground) {
  auto r = Get(kSlow, Mode::kPrefetch);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->origin, Origin::kNone);
  EXPECT_EQ(r->entry, nullptr);
  EXPECT_FALSE(r->key.empty());
  // A compile is running or done; a COMPILE request joins or hits it.
  auto later = Get(kSlow);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(service_->stats().compiles, 1u);
}

// Submit's answers, collected from whichever thread gives them.
struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::StatusOr<KernelAnswer>> got;
  std::function<void(absl::StatusOr<KernelAnswer>)> Sink() {
    return [this](absl::StatusOr<KernelAnswer> answer) {
      std::lock_guard lock(mu);
      got.push_back(std::move(answer));
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(120), [&] { return got.size() >= n; });
  }
};

TEST_F(KernelServiceTest, SubmitAnswersLikeGetWithoutAWaitingThread) {
  Answers answers;
  std::shared_ptr<Flight> flight = service_->Submit(kSlow, {}, answers.Sink());
  ASSERT_NE(flight, nullptr) << "a miss: answered when its flight finishes";
  // A second submit of the same key joins the flight.
  EXPECT_EQ(service_->Submit(kSlow, {}, answers.Sink()), flight);
  ASSERT_TRUE(answers.WaitFor(2));
  for (const auto& answer : answers.got) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->origin, Origin::kCompiled);
    EXPECT_EQ(answer->entry->cubin.substr(1, 3), "ELF");
  }
  EXPECT_EQ(service_->stats().compiles, 1u);
  // Known now (a hit, a bad request): answered on this thread, no flight.
  EXPECT_EQ(service_->Submit(kSlow, {}, answers.Sink()), nullptr);
  EXPECT_EQ(service_->Submit({"t.none", {}, "", {}}, {}, answers.Sink()), nullptr);
  ASSERT_EQ(answers.got.size(), 4u);
  EXPECT_EQ(answers.got[2]->origin, Origin::kMemory);
  EXPECT_EQ(answers.got[3].status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KernelServiceTest, AWithdrawnSubmitCancelsItsLoneCompile) {
  Answers answers;
  std::shared_ptr<Flight> flight = service_->Submit(kSlow, {}, answers.Sink());
  ASSERT_NE(flight, nullptr);
  service_->Withdraw(*flight);
  EXPECT_TRUE(flight->cancelled());
  ASSERT_TRUE(answers.WaitFor(1));
  EXPECT_EQ(answers.got[0].status().code(), absl::StatusCode::kCancelled) << answers.got[0].status();
  EXPECT_EQ(service_->stats().abandoned, 1u);
}

TEST_F(KernelServiceTest, CompileFailureIsRememberedWithItsLog) {
  auto first = Get({"t.broken", {}, "", {}});
  ASSERT_TRUE(absl::IsFailedPrecondition(first.status())) << first.status();
  EXPECT_NE(first.status().message().find("undefined_name"), std::string_view::npos) << first.status();
  auto second = Get({"t.broken", {}, "", {}});
  ASSERT_TRUE(absl::IsFailedPrecondition(second.status()));
  EXPECT_NE(second.status().message().find("undefined_name"), std::string_view::npos) << "the log, every time";
  EXPECT_NE(second.status().message().find("remembered"), std::string_view::npos);
  EXPECT_EQ(pool_->Stats().failures, 1u) << "not recompiled";
  EXPECT_EQ(service_->stats().negative_hits, 1u);
}

class ShortNegativeTtl : public KernelServiceTest {
  KernelService::Options Options() override {
    KernelService::Options o;
    o.negative_ttl = 0s;
    return o;
  }
};

TEST_F(ShortNegativeTtl, FailureIsRetriedOnceItsTimeIsUp) {
  ASSERT_FALSE(Get({"t.broken", {}, "", {}}).ok());
  ASSERT_FALSE(Get({"t.broken", {}, "", {}}).ok());
  EXPECT_EQ(pool_->Stats().failures, 2u);
}

TEST_F(KernelServiceTest, ACallerPastItsDeadlineGivesUpAndItsLoneCompileIsCancelled) {
  CallContext ctx;
  ctx.deadline = std::chrono::steady_clock::now() + 100ms;
  auto r = Get(kSlow, Mode::kCompile, ctx);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("was cancelled"), std::string_view::npos) << r.status();
  // Bounded wait for the cancelled flight to end.
  auto until = std::chrono::steady_clock::now() + 30s;
  while (service_->stats().in_flight > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(service_->stats().in_flight, 0u);
  EXPECT_EQ(pool_->Stats().compiles, 0u) << "nobody wanted it: no cubin was produced";
  EXPECT_FALSE(*cache_->Contains(service_->Resolve(kSlow)->key));
}

TEST_F(KernelServiceTest, ACallerGivingUpLeavesTheCompileToOthersWhoWait) {
  CallContext impatient;
  impatient.deadline = std::chrono::steady_clock::now() + 100ms;
  absl::StatusOr<KernelAnswer> patient = absl::UnknownError("not run");
  std::thread t([&] { patient = Get(kSlow); });
  // Wait (bounded) until the patient caller's compile is in flight.
  auto until = std::chrono::steady_clock::now() + 30s;
  while (service_->stats().in_flight == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  auto r = Get(kSlow, Mode::kCompile, impatient);
  t.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  ASSERT_TRUE(patient.ok()) << patient.status();
  EXPECT_EQ(pool_->Stats().compiles, 1u);
}

TEST_F(KernelServiceTest, ReloadedKernelsGiveNewKeysForWhatChangedOnly) {
  auto fast = Get(kFast);
  auto slow_key = service_->Resolve(kSlow)->key;
  ASSERT_TRUE(fast.ok());
  WriteKernels(dir_.path() / "kernels", "out[0] = T(2);");
  service_->SwapResolver(Resolver());
  auto again = Get(kFast);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->key, fast->key);
  EXPECT_EQ(again->origin, Origin::kCompiled);
  EXPECT_EQ(service_->Resolve(kSlow)->key, slow_key);
  EXPECT_TRUE(*cache_->Contains(fast->key)) << "nothing lost: the old entry stays";
}

// A toolkit change rebuilds the trees served now under its toolchain; a
// reload (SIGHUP) reads new trees and their locks. Each reads the resolver,
// builds, then swaps: the second to swap must build on the first's result,
// or it silently reverts it (a reloaded tree, and its lock, gone again).
// Both orders, the first update held open while the second is asked for.
TEST_F(KernelServiceTest, AToolkitRebuildAndAReloadNeverUndoEachOther) {
  manifest::Toolchain upgraded = Tools();
  upgraded.identity = std::string(64, 'e');
  upgraded.nvrtc_library_fingerprint = std::string(64, 'e');
  const std::string original_tree = service_->resolver()->tree().fingerprint();
  auto lock = std::make_shared<manifest::KernelLock>();
  lock->origin = "reloaded.lock";
  const auto toolkit_change = [&](const std::shared_ptr<const manifest::Resolver>& current)
      -> absl::StatusOr<std::shared_ptr<const manifest::Resolver>> {
    JITD_ASSIGN_OR_RETURN(std::unique_ptr<manifest::Resolver> rebuilt, current->WithToolchain(upgraded));
    return std::shared_ptr<const manifest::Resolver>(std::move(rebuilt));
  };
  const auto reload = [&](const std::shared_ptr<const manifest::Resolver>& current)
      -> absl::StatusOr<std::shared_ptr<const manifest::Resolver>> {
    auto tree = manifest::KernelTree::Load(dir_.path() / "kernels");
    JITD_RETURN_IF_ERROR(tree.status());
    JITD_ASSIGN_OR_RETURN(std::unique_ptr<manifest::Resolver> made,
                          manifest::Resolver::Create({manifest::ServedTree{"", *tree, lock}}, current->toolchain(),
                                                     current->default_arch()));
    return std::shared_ptr<const manifest::Resolver>(std::move(made));
  };
  for (const bool toolkit_first : {true, false}) {
    SCOPED_TRACE(toolkit_first ? "toolkit change first" : "reload first");
    WriteKernels(dir_.path() / "kernels");
    service_->SwapResolver(Resolver());
    ASSERT_EQ(service_->resolver()->tree().fingerprint(), original_tree);
    WriteKernels(dir_.path() / "kernels", "out[0] = T(3);");  // what the reload reads
    std::mutex mu;
    std::condition_variable cv;
    bool first_entered = false, release = false;
    std::shared_ptr<const manifest::Resolver> second_saw;
    const auto held = [&](const KernelService::ResolverUpdate& update) {
      return [&, update](const std::shared_ptr<const manifest::Resolver>& current) {
        std::unique_lock l(mu);
        first_entered = true;
        cv.notify_all();
        cv.wait(l, [&] { return release; });
        return update(current);
      };
    };
    const auto seen = [&](const KernelService::ResolverUpdate& update) {
      return [&, update](const std::shared_ptr<const manifest::Resolver>& current) {
        second_saw = current;
        return update(current);
      };
    };
    const KernelService::ResolverUpdate first = toolkit_first ? held(toolkit_change) : held(reload);
    const KernelService::ResolverUpdate second = toolkit_first ? seen(reload) : seen(toolkit_change);
    absl::Status first_done, second_done;
    std::thread one([&] { first_done = service_->UpdateResolver(first).status(); });
    {
      std::unique_lock l(mu);
      cv.wait(l, [&] { return first_entered; });
    }
    // The first has read the resolver and is building; the second asks now.
    std::thread two([&] { second_done = service_->UpdateResolver(second).status(); });
    {
      std::lock_guard l(mu);
      release = true;
    }
    cv.notify_all();
    one.join();
    two.join();
    ASSERT_TRUE(first_done.ok()) << first_done;
    ASSERT_TRUE(second_done.ok()) << second_done;
    // The second built on the first's result, and the end has both.
    ASSERT_NE(second_saw, nullptr);
    EXPECT_EQ(second_saw->toolchain().identity, toolkit_first ? upgraded.identity : Tools().identity);
    EXPECT_EQ(second_saw->trees().front().lock != nullptr, !toolkit_first);
    const std::shared_ptr<const manifest::Resolver> now = service_->resolver();
    EXPECT_EQ(now->toolchain().identity, upgraded.identity) << "the toolkit change was undone";
    EXPECT_NE(now->tree().fingerprint(), original_tree) << "the reloaded tree was undone";
    ASSERT_NE(now->trees().front().lock, nullptr) << "the reloaded lock was undone";
    EXPECT_EQ(now->trees().front().lock->origin, "reloaded.lock");
  }
}

class OneCompilePerPeer : public KernelServiceTest {
  KernelService::Options Options() override {
    KernelService::Options o;
    o.max_compiles_per_peer = 1;
    return o;
  }
};

// A caller that names no peer is not uncounted: every such caller shares
// one identity, held to one client's share.
TEST_F(OneCompilePerPeer, ACallerWithoutAPeerNameIsCountedNotWaivedThrough) {
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  const auto done = [&](absl::StatusOr<KernelAnswer>) {
    std::lock_guard l(mu);
    ++answered;
    cv.notify_all();
  };
  std::shared_ptr<Flight> first = service_->Submit(kSlow, CallContext{}, done);
  ASSERT_NE(first, nullptr) << "the first compile starts";
  absl::Status refused;
  std::shared_ptr<Flight> second = service_->Submit({"t.slow", {{"threads", "256"}}, "", {}}, CallContext{},
                                                    [&](absl::StatusOr<KernelAnswer> a) { refused = a.status(); });
  EXPECT_EQ(second, nullptr) << "answered at once";
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_NE(refused.message().find(kUnnamedPeer), std::string_view::npos) << refused;
  // A named caller has a share of its own.
  CallContext named;
  named.peer = "uid:1000";
  std::shared_ptr<Flight> third = service_->Submit({"t.slow", {{"threads", "256"}}, "", {}}, named, done);
  EXPECT_NE(third, nullptr) << "another peer's compile starts";
  EXPECT_EQ(service_->stats().peer_compiles_refused, 1u);
  std::unique_lock l(mu);
  ASSERT_TRUE(cv.wait_for(l, 120s, [&] { return answered == 2; }));
}

TEST_F(KernelServiceTest, ResolverErrorsPassThrough) {
  EXPECT_TRUE(absl::IsNotFound(Get({"t.nope", {}, "", {}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Get({"t.fast", {{"dtype", "int8"}}, "", {}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Get({"t.fast", {{"dtype", "fp32"}}, "sm_1", {}}).status()));
}

}  // namespace
}  // namespace jitd::serving
