// The canonical form of a kernel spec the memo keys by (the params text is
// jitd_base's: tests/base/test_base_kernel_params.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "jitd/client.h"
#include "jitd/kernel_launch.h"

namespace jitd {
namespace {

TEST(CanonicalSpec, NamesKernelParamsArchAndOptions) {
  KernelSpec spec{"moe.topk_sum", {{"dtype", "bf16"}, {"block", "128"}}, "sm_90", {"-lineinfo"}};
  EXPECT_EQ(CanonicalSpec(spec), "moe.topk_sum{block=128,dtype=bf16}@sm_90[-lineinfo]");
  spec.options.clear();
  EXPECT_EQ(CanonicalSpec(spec), "moe.topk_sum{block=128,dtype=bf16}@sm_90");
  EXPECT_EQ(CanonicalSpec({"norm.rms", {}, "", {}}), "norm.rms{}@");
}

TEST(CanonicalSpec, OptionOrderAndDuplicatesDoNotMatter) {
  // The daemon sorts and de-duplicates request options, so these are one
  // instantiation and must be one memo entry.
  const KernelSpec a{"k", {}, "sm_90", {"-lineinfo", "--use_fast_math"}};
  const KernelSpec b{"k", {}, "sm_90", {"--use_fast_math", "-lineinfo", "-lineinfo"}};
  EXPECT_EQ(CanonicalSpec(a), CanonicalSpec(b));
}

TEST(CanonicalSpec, EveryFieldTellsSpecsApart) {
  const KernelSpec base{"k", {{"dtype", "bf16"}}, "sm_90", {}};
  KernelSpec other_kernel = base;
  other_kernel.kernel = "k2";
  KernelSpec other_value = base;
  other_value.params["dtype"] = "fp16";
  KernelSpec other_arch = base;
  other_arch.arch = "sm_90a";
  KernelSpec with_option = base;
  with_option.options = {"-lineinfo"};
  for (const KernelSpec* other : {&other_kernel, &other_value, &other_arch, &with_option}) {
    EXPECT_NE(CanonicalSpec(base), CanonicalSpec(*other)) << CanonicalSpec(*other);
  }
}

TEST(CanonicalSpec, AFatbinOfArchsOrTheFleetSetIsNoSingleArch) {
  const KernelSpec archs{.kernel = "k", .archs = {"sm_80", "compute_80"}};
  EXPECT_EQ(CanonicalSpec(archs), "k{}@%sm_80,compute_80");
  const KernelSpec fleet{.kernel = "k", .fleet = true};
  EXPECT_EQ(CanonicalSpec(fleet), "k{}@%%fleet");
  // Neither is what any single arch, escaped, can spell.
  const KernelSpec lookalike{.kernel = "k", .arch = "%fleet"};
  EXPECT_EQ(CanonicalSpec(lookalike), "k{}@%25fleet");
  const KernelSpec one{.kernel = "k", .archs = {"sm_80"}};
  EXPECT_NE(CanonicalSpec(one), CanonicalSpec({.kernel = "k", .arch = "sm_80"}));
  const KernelSpec reordered{.kernel = "k", .archs = {"compute_80", "sm_80"}};
  EXPECT_NE(CanonicalSpec(archs), CanonicalSpec(reordered)) << "the fatbin's order is the request's";
}

TEST(CanonicalSpec, PunctuationInsideValuesCannotForgeAnotherSpec) {
  // Without escaping, both would read "k{a=1,b=2}@sm_90".
  const KernelSpec one_param{"k", {{"a", "1,b=2"}}, "sm_90", {}};
  const KernelSpec two_params{"k", {{"a", "1"}, {"b", "2"}}, "sm_90", {}};
  EXPECT_NE(CanonicalSpec(one_param), CanonicalSpec(two_params));
  EXPECT_EQ(CanonicalSpec(one_param), "k{a=1%2Cb%3D2}@sm_90");
  const KernelSpec arch_with_options{"k", {}, "sm_90[x]", {}};
  const KernelSpec options{"k", {}, "sm_90", {"x"}};
  EXPECT_NE(CanonicalSpec(arch_with_options), CanonicalSpec(options));
}

// tests/vectors/canonical_specs.tsv: the cases the Python client's
// KernelSpec.canonical() is held to as well (tests/python/test_spec_vectors.py).
TEST(CanonicalSpec, GivesEveryCanonicalTextOfTheSharedVectors) {
  std::ifstream in(JITD_VECTORS_DIR "/canonical_specs.tsv");
  ASSERT_TRUE(in) << "cannot read " JITD_VECTORS_DIR "/canonical_specs.tsv";
  int cases = 0;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> cols = absl::StrSplit(line, '\t');
    ASSERT_GE(cols.size(), 4u) << "canonical_specs.tsv:" << n << ": fewer than 4 columns";
    ASSERT_EQ(cols.size() % 2, 0u) << "canonical_specs.tsv:" << n << ": a param name without a value";
    KernelSpec spec{cols[1], {}, cols[2], {}};
    const std::vector<std::string> options = absl::StrSplit(cols[3], ' ', absl::SkipEmpty());
    spec.options = options;
    for (size_t i = 4; i + 1 < cols.size(); i += 2) spec.params[cols[i]] = cols[i + 1];
    EXPECT_EQ(CanonicalSpec(spec), cols[0]) << "canonical_specs.tsv:" << n;
    ++cases;
  }
  EXPECT_GE(cases, 15);
}

TEST(KernelBinary, FindsASymbolByItsNameExpression) {
  KernelBinary binary;
  binary.symbols = {{"sglang::a<float>", "_Z1aIfEvv"}, {"sglang::b", "_Z1bv"}};
  ASSERT_NE(binary.FindSymbol("sglang::b"), nullptr);
  EXPECT_EQ(binary.FindSymbol("sglang::b")->lowered_name, "_Z1bv");
  EXPECT_EQ(binary.FindSymbol("sglang::a<double>"), nullptr);
}

// The same rule as the Python client's jitd.rmsnorm_threads.
static_assert(RmsnormThreads(1) == 128 && RmsnormThreads(2048) == 128);
static_assert(RmsnormThreads(2049) == 256 && RmsnormThreads(4096) == 256 && RmsnormThreads(8192) == 256);
static_assert(RmsnormThreads(16384) == 512 && RmsnormThreads(16385) == 1024);

TEST(RmsnormThreads, FollowsTheMeasuredBandsFrom128To1024) {
  for (int64_t dim : {1, 1024, 2048}) EXPECT_EQ(RmsnormThreads(dim), 128) << dim;
  for (int64_t dim : {2049, 4096, 5120, 8192}) EXPECT_EQ(RmsnormThreads(dim), 256) << dim;
  EXPECT_EQ(RmsnormThreads(int64_t{1} << 40), 1024);
}

// SGLANG_ALIGN_ENTRIES_PER_THREAD of the source the daemon compiles
// (kernels/moe/align_block_size.cu): what the one-block path holds a
// thread. 0 when the source no longer defines it.
int64_t KernelEntriesPerThread() {
  std::ifstream in(std::string(JITD_KERNELS_DIR) + "/moe/align_block_size.cu");
  std::stringstream source;
  source << in.rdbuf();
  const std::string define = "#define SGLANG_ALIGN_ENTRIES_PER_THREAD ";
  const std::string text = source.str();
  const size_t at = text.find(define);
  return at == std::string::npos ? 0 : std::stoll(text.substr(at + define.size(), 8));
}

// The same rule as the Python client's jitd.align_block_size_grid.
static_assert(AlignBlockSizeGrid(0) == 1 && AlignBlockSizeGrid(128) == 1 && AlignBlockSizeGrid(129) == 8 &&
              AlignBlockSizeGrid(4096) == 8 && AlignBlockSizeGrid(4097) == 32);

TEST(AlignBlockSizeGrid, GivesOneBlockThen8Then32) {
  for (int64_t numel : {-1, 0, 1, 128}) EXPECT_EQ(AlignBlockSizeGrid(numel), 1) << numel;
  for (int64_t numel : {129, 2048, 4096}) EXPECT_EQ(AlignBlockSizeGrid(numel), 8) << numel;
  for (int64_t numel : {int64_t{4097}, int64_t{8192}, int64_t{32768}, (int64_t{1} << 24) - 1})
    EXPECT_EQ(AlignBlockSizeGrid(numel), 32) << numel;
}

// 8 blocks exactly while one block of the thread rule's widest (at 256
// experts) holds the input at the kernel's entries a thread.
TEST(AlignBlockSizeGrid, Gives8BlocksWhileOneBlockOfTheRulesThreadsHoldsTheInput) {
  const int64_t per_thread = KernelEntriesPerThread();
  ASSERT_GT(per_thread, 0) << "kernels/moe/align_block_size.cu no longer defines SGLANG_ALIGN_ENTRIES_PER_THREAD";
  const int64_t holds = int64_t{AlignBlockSizeThreads(256, int64_t{1} << 20)} * per_thread;
  EXPECT_EQ(AlignBlockSizeGrid(holds), 8);
  EXPECT_EQ(AlignBlockSizeGrid(holds + 1), 32);
}

// The same rule as the Python client's jitd.align_block_size_threads.
static_assert(AlignBlockSizeThreads(0, 0) == 32 && AlignBlockSizeThreads(256, 8) == 256 &&
              AlignBlockSizeThreads(256, 2048) == 256 && AlignBlockSizeThreads(256, 2049) == 512 &&
              AlignBlockSizeThreads(513, 8) == 1024);

TEST(AlignBlockSizeThreads, GivesTheOneBlockPathsThreadsUpTo512Then512Or1024) {
  EXPECT_EQ(AlignBlockSizeThreads(8, 1), 32);
  EXPECT_EQ(AlignBlockSizeThreads(8, 256), 32);
  EXPECT_EQ(AlignBlockSizeThreads(8, 257), 64);
  EXPECT_EQ(AlignBlockSizeThreads(33, 1), 64);
  for (int64_t numel : {1, 128, 2048}) EXPECT_EQ(AlignBlockSizeThreads(256, numel), 256) << numel;
  for (int64_t numel : {int64_t{2049}, int64_t{4096}, int64_t{4097}, int64_t{1} << 20})
    EXPECT_EQ(AlignBlockSizeThreads(256, numel), 512) << numel;
  EXPECT_EQ(AlignBlockSizeThreads(512, 8), 512);
  for (int64_t experts : {513, 1000, 1024}) EXPECT_EQ(AlignBlockSizeThreads(experts, 8), 1024) << experts;
}

// The rule's entries per thread are the kernel's: read from the source the
// daemon compiles (kernels/moe/align_block_size.cu), not copied.
TEST(AlignBlockSizeThreads, TakesTheKernelsEntriesPerThread) {
  const int64_t per_thread = KernelEntriesPerThread();
  ASSERT_GT(per_thread, 0) << "kernels/moe/align_block_size.cu no longer defines SGLANG_ALIGN_ENTRIES_PER_THREAD";
  for (int64_t threads : {32, 64, 128, 256}) {
    EXPECT_EQ(AlignBlockSizeThreads(1, threads * per_thread), threads) << threads;
    EXPECT_EQ(AlignBlockSizeThreads(1, threads * per_thread + 1), threads * 2) << threads;
  }
}

}  // namespace
}  // namespace jitd
