// The module check: real NVRTC cubins and PTX read by the guard's ELF and
// PTX readers; the shipped kernels' modules define only their own symbols;
// every way a module defines one outside the namespace is named (extern
// "C", a global kernel, a static kernel, a -rdc global, a weak template);
// the four trees whose text misled the source check are caught by their
// modules; the ELF reader survives truncated and mutated files.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "compiler/nvrtc_program.h"
#include "guard/module_symbols.h"
#include "guard/namespace_guard.h"
#include "manifest/manifest.h"

namespace jitd::guard {
namespace {

using detail::ModuleSymbol;
using B = ModuleSymbol::Binding;
using K = ModuleSymbol::Kind;

const std::string kFixtures = JITD_GUARD_FIXTURES;

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

bool Mentions(const std::vector<std::string>& lines, const std::string& piece) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(piece) != std::string::npos; });
}

const ModuleSymbol* Find(const std::vector<ModuleSymbol>& symbols, const std::string& name) {
  for (const auto& s : symbols) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const manifest::Toolchain& Toolchain() {
  static const manifest::Toolchain toolchain = [] {
    auto t = manifest::Toolchain::Detect(JITD_CUDA_INCLUDE_DIR);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : manifest::Toolchain{};
  }();
  return toolchain;
}

// A program of one source, compiled in this process as a worker would.
absl::StatusOr<compiler::CompileResult> CompileSource(const std::string& source, const std::string& arch,
                                                      std::vector<std::string> extra = {}) {
  compiler::CompileJob job;
  job.program_name = "probe.cu";
  job.source = source;
  job.options = {"-std=c++17", "-arch=" + arch, "-frandom-seed=1", "-I" JITD_CUDA_INCLUDE_DIR "/cccl",
                 "-I" JITD_CUDA_INCLUDE_DIR};
  job.options.insert(job.options.end(), extra.begin(), extra.end());
  job.name_expressions = {"sglang::k"};
  return compiler::CompileInProcess(job, nullptr, nullptr);
}

// Every way a module can define a name outside the namespace, and one
// kernel inside it (the name expression).
constexpr char kOutside[] = R"(
extern "C" __global__ void c_kernel(float* x) { x[0] = 1; }
__global__ void global_kernel(float* x) { x[0] = 2; }
static __global__ void static_kernel(float* x) { x[0] = 3; }
namespace sglang {
extern "C" __global__ void c_kernel_in_ns(float* x) { x[0] = 4; }
__global__ void k(float* x) { x[0] = 5; }
}
)";

TEST(ModuleSymbols, CubinOfRealNvrtcListsEntriesWithTheirBinding) {
  auto compiled = CompileSource(kOutside, "sm_90");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto symbols = detail::ElfExternalSymbols(compiled->cubin);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  const ModuleSymbol* k = Find(*symbols, "_ZN6sglang1kEPf");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->kind, K::kEntry);
  EXPECT_EQ(k->binding, B::kGlobal);
  ASSERT_NE(Find(*symbols, "c_kernel"), nullptr);
  ASSERT_NE(Find(*symbols, "c_kernel_in_ns"), nullptr);
  ASSERT_NE(Find(*symbols, "_Z13global_kernelPf"), nullptr);
  const ModuleSymbol* local = Find(*symbols, "_Z13static_kernelPf");
  ASSERT_NE(local, nullptr) << "a static kernel is launchable by name: listed though local";
  EXPECT_EQ(local->binding, B::kLocal);
  EXPECT_EQ(local->kind, K::kEntry);

  const std::vector<std::string> outside = ModuleSymbolsOutside(compiled->cubin, "sglang");
  EXPECT_EQ(outside.size(), 4u) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`c_kernel` with a C name (extern \"C\")")) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`c_kernel_in_ns` with a C name")) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`global_kernel(float*)` (_Z13global_kernelPf) outside namespace sglang"))
      << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`static_kernel(float*)`")) << Joined(outside);
  EXPECT_FALSE(Mentions(outside, "sglang::k")) << Joined(outside);
}

TEST(ModuleSymbols, PtxOfAVirtualArchIsCheckedTheSameWay) {
  auto compiled = CompileSource(kOutside, "compute_90");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_FALSE(
      compiled->cubin.starts_with("\x7f"
                                  "ELF"));
  auto symbols = detail::ModuleExternalSymbols(compiled->cubin);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  ASSERT_NE(Find(*symbols, "_ZN6sglang1kEPf"), nullptr);
  EXPECT_EQ(Find(*symbols, "_ZN6sglang1kEPf")->kind, K::kEntry);
  ASSERT_NE(Find(*symbols, "_Z13static_kernelPf"), nullptr);
  EXPECT_EQ(Find(*symbols, "_Z13static_kernelPf")->binding, B::kLocal);
  const std::vector<std::string> outside = ModuleSymbolsOutside(compiled->cubin, "sglang");
  EXPECT_EQ(outside.size(), 4u) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`c_kernel` with a C name")) << Joined(outside);
}

TEST(ModuleSymbols, RelocatableGlobalsAndWeakTemplatesAreChecked) {
  // With -rdc a __device__ variable and a non-inlined function are global,
  // and a function template's instance weak.
  auto compiled = CompileSource(R"(
extern "C" __device__ int c_global;
__device__ int c_global = 4;
template <typename T> __device__ __noinline__ T twice(T x) { return x * 2; }
namespace sglang {
__device__ int in_ns;
__global__ void k(int* p) { p[0] = twice(p[1]) + c_global + in_ns; }
}
)",
                                "sm_90", {"-rdc=true"});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto symbols = detail::ElfExternalSymbols(compiled->cubin);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  ASSERT_NE(Find(*symbols, "c_global"), nullptr);
  EXPECT_EQ(Find(*symbols, "c_global")->kind, K::kVariable);
  ASSERT_NE(Find(*symbols, "_Z5twiceIiET_S0_"), nullptr);
  EXPECT_EQ(Find(*symbols, "_Z5twiceIiET_S0_")->binding, B::kWeak);
  const std::vector<std::string> outside = ModuleSymbolsOutside(compiled->cubin, "sglang");
  EXPECT_EQ(outside.size(), 2u) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`c_global` with a C name")) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`int twice<int>(int)` (_Z5twiceIiET_S0_)")) << Joined(outside);
}

// Each shipped kernel's first instantiation, as a cubin and as PTX: nothing
// outside namespace sglang, and each lowered name is an entry the module
// defines. The ptxas routines every cubin carries ($__internal_..., the
// reserved shared memory alias) are the rule's only exemptions; `jitd lint`
// on kernels/ (tests/guard/CMakeLists.txt) checks every instantiation.
TEST(ModuleSymbols, ShippedKernelsDefineOnlyTheirOwnSymbols) {
  auto tree = manifest::KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto resolver = manifest::Resolver::Create(*tree, Toolchain(), "sm_90");
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  double parse_us = 0;
  size_t parsed = 0;
  for (const auto& k : (*tree)->manifest().kernels) {
    for (const std::string arch : {"sm_90", "compute_90"}) {
      auto resolved = (*resolver)->Resolve({k.name, manifest::Manifest::Instantiations(k).front(), arch, {}});
      ASSERT_TRUE(resolved.ok()) << resolved.status();
      auto compiled = compiler::CompileInProcess(resolved->job, nullptr, nullptr);
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      EXPECT_EQ(Joined(ModuleSymbolsOutside(compiled->cubin, "sglang")), "") << k.name << " " << arch;
      auto symbols = detail::ModuleExternalSymbols(compiled->cubin);
      ASSERT_TRUE(symbols.ok()) << symbols.status();
      for (const auto& [expr, lowered] : compiled->lowered_names) {
        const ModuleSymbol* entry = Find(*symbols, lowered);
        ASSERT_NE(entry, nullptr) << k.name << " " << arch << ": " << lowered;
        EXPECT_EQ(entry->kind, K::kEntry) << lowered;
      }
      if (arch == "sm_90") {
        constexpr int kRounds = 200;
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kRounds; ++i) ASSERT_TRUE(ModuleSymbolsOutside(compiled->cubin, "sglang").empty());
        parse_us +=
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kRounds;
        ++parsed;
      }
    }
  }
  // What the check costs a compile (reported, not asserted: machines differ).
  std::printf("module check: %.1f us per cubin on average over %zu shipped kernels\n", parse_us / parsed, parsed);
}

// The four trees whose text once passed the source check: each now has a
// source finding, and each module, compiled for real, names `leak`.
TEST(ModuleSymbols, TreesThatMisledTheSourceCheckAreCaughtByTheirModules) {
  for (const std::string name :
       {"bypass_if0", "bypass_cuda_extension", "bypass_digraphs", "bypass_comment_splice", "module_check"}) {
    SCOPED_TRACE(name);
    auto tree = manifest::KernelTree::Load(kFixtures + "/" + name);
    ASSERT_TRUE(tree.ok()) << tree.status();
    if (name != "module_check") {
      EXPECT_FALSE(CheckSources(**tree).empty()) << name << ": the source check finds it too";
    }
    auto resolver = manifest::Resolver::Create(*tree, Toolchain(), "sm_90");
    ASSERT_TRUE(resolver.ok()) << resolver.status();
    auto resolved = (*resolver)->Resolve({"bypass.fill", {}, "sm_90", {}});
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    auto compiled = compiler::CompileInProcess(resolved->job, nullptr, nullptr);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const std::vector<std::string> outside = ModuleSymbolsOutside(compiled->cubin, "sglang");
    ASSERT_EQ(outside.size(), 1u) << Joined(outside);
    EXPECT_TRUE(Mentions(outside, name == "module_check" ? "`leak(float*)` (_Z4leakPf)" : "`leak` with a C name"))
        << Joined(outside);
    const absl::Status refused = CheckModuleNamespace(compiled->cubin, "sglang", "bypass.fill");
    EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
    EXPECT_NE(refused.message().find("kernel bypass.fill: the namespace guard refuses its compiled module"),
              std::string::npos)
        << refused;
  }
}

TEST(ModuleSymbols, ANestedRuleIsReadFromTheMangling) {
  const std::vector<std::string> team_ops = {"team", "ops"};
  EXPECT_TRUE(detail::MangledInNamespace("_ZN4team3ops4gelu6kernelEPf", team_ops));
  EXPECT_TRUE(detail::MangledInNamespace("_ZN4team3ops1kIfEEvPT_", team_ops));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN4team1kEPf", team_ops));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN4team4opsx1kEPf", team_ops));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN6sglang3ops1kEPf", team_ops));
  const std::vector<std::string> sglang = {"sglang"};
  EXPECT_TRUE(detail::MangledInNamespace("_ZN6sglang1kEPi", sglang));
  EXPECT_TRUE(detail::MangledInNamespace("_ZNK6sglang1A1fEv", sglang));   // a const member function
  EXPECT_TRUE(detail::MangledInNamespace("_ZZN6sglang1fEvE1x", sglang));  // a static local of sglang::f
  EXPECT_TRUE(detail::MangledInNamespace("_ZZZN6sglang1fEvENKUlvE_clEvE1y", sglang));
  EXPECT_TRUE(detail::MangledInNamespace("_ZGVZN6sglang1fEvE1x", sglang));      // its guard variable
  EXPECT_TRUE(detail::MangledInNamespace("_ZTVN6sglang4BaseE", sglang));        // a vtable
  EXPECT_TRUE(detail::MangledInNamespace("_ZThn8_N6sglang1B1fEv", sglang));     // a thunk
  EXPECT_TRUE(detail::MangledInNamespace("_ZTv0_n24_N6sglang1B1fEv", sglang));  // a virtual thunk
  EXPECT_FALSE(detail::MangledInNamespace("_ZN7sglangx1kEPi", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN5sglan1kEPi", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_Z5plainPi", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_ZZ1fvE1x", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_ZSt4swapIiEvRT_S1_", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN3cub6detail1kEv", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("leak", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN99999999999999999999999sglang", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_ZN", sglang));
  EXPECT_FALSE(detail::MangledInNamespace("_Z", sglang));
  EXPECT_EQ(detail::Demangle("_ZN6sglang1kIfEEvPT_"), "void sglang::k<float>(float*)");
  EXPECT_EQ(detail::Demangle("leak"), "leak");
}

TEST(ModuleSymbols, PtxLinkageDirectivesDecide) {
  const auto symbols = detail::PtxExternalSymbols(R"(//
// Generated by NVIDIA NVVM Compiler
.version 9.0
.target sm_90
.address_size 64
	// .globl	_ZN6sglang1kEPf
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);
.global .align 4 .u32 local_global;
.visible .global .align 4 .b8 visible_global[16];
.common .global .align 8 .u64 common_global;
.visible .const .align 4 .f32 visible_const;
.weak .entry _ZN6sglang1kIfEEvPT_(
	.param .u64 p
)
{ ret; }
.visible .func  (.param .b32 func_retval0) c_helper(
	.param .b32 x
)
{ ret; }
.func local_helper() { ret; }
.entry static_entry() { ret; }
/* .visible .entry in_a_comment() */
)");
  std::vector<std::string> names;
  for (const auto& s : symbols) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"visible_global", "common_global", "visible_const", "_ZN6sglang1kIfEEvPT_",
                                             "c_helper", "static_entry"}));
  EXPECT_EQ(symbols[3].kind, K::kEntry);
  EXPECT_EQ(symbols[3].binding, B::kWeak);
  EXPECT_EQ(symbols[4].kind, K::kFunction);
  EXPECT_EQ(symbols[5].binding, B::kLocal);
}

// A host shared object (a module kernel's) built by g++ from `source`,
// or, `nvcc` set, by nvcc as jitd builds modules (device code embedded).
std::string SharedObject(const std::string& source, bool nvcc = false) {
  char dir[] = "/tmp/jitd-guard-so-XXXXXX";
  if (mkdtemp(dir) == nullptr) return "";
  const std::string cc = std::string(dir) + (nvcc ? "/m.cu" : "/m.cc"), so = std::string(dir) + "/m.so";
  if (FILE* f = std::fopen(cc.c_str(), "w")) {
    std::fputs(source.c_str(), f);
    std::fclose(f);
  }
  const std::string command =
      nvcc ? "/usr/local/cuda/bin/nvcc -shared -Xcompiler=-fPIC --no-compress -gencode=arch=compute_90a,code=sm_90a "
             "-gencode=arch=compute_90,code=compute_90 -o " +
                 so + " " + cc
           : "g++ -shared -fPIC -O1 -o " + so + " " + cc;
  std::string bytes;
  if (std::system(command.c_str()) == 0) {
    if (FILE* f = std::fopen(so.c_str(), "rb")) {
      char buffer[65536];
      for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) bytes.append(buffer, n);
      std::fclose(f);
    }
  }
  std::filesystem::remove_all(dir);
  return bytes;
}

TEST(ModuleSymbols, ASharedObjectIsHeldToTheRuleForItsOwnStrongSymbols) {
  const std::string clean = SharedObject(
      "#include <string>\n"
      "namespace sglang { int helper(int x) { return x + 1; } }\n"
      "inline int shared_inline(int x) { return x * 2; }\n"  // weak: a header's inline function
      "inline int shared_counter = 1;\n"                     // unique: a header's inline variable
      "extern \"C\" int __tvm_ffi_run(void*, const void*, int, void*) { return "
      "sglang::helper(shared_inline(shared_counter)); }\n");
  ASSERT_FALSE(clean.empty()) << "g++ could not build the test's shared object";
  EXPECT_EQ(Joined(ModuleSymbolsOutside(clean, "sglang")), "");

  const std::string stray = SharedObject(
      "int global_helper(int x) { return x + 1; }\n"
      "extern \"C\" int plain_c(int x) { return x; }\n"
      "extern \"C\" int __tvm_ffi_run(void*, const void*, int, void*) { return global_helper(plain_c(1)); }\n");
  ASSERT_FALSE(stray.empty());
  const std::vector<std::string> outside = ModuleSymbolsOutside(stray, "sglang");
  EXPECT_TRUE(Mentions(outside, "global_helper(int)")) << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "`plain_c` with a C name")) << Joined(outside);
  EXPECT_EQ(outside.size(), 2u) << "each symbol once, though .symtab and .dynsym both list it: " << Joined(outside);
}

// The incident's shape in a module: the launcher in the namespace, the
// kernel in an anonymous one. The host side keeps the kernel's stub local
// (nothing to see there); the device code nvcc embeds shows it, for the
// SASS and the PTX alike.
TEST(ModuleSymbols, ASharedObjectsDeviceCodeIsHeldToTheRuleToo) {
  const std::string clean = SharedObject(
      "namespace sglang { __global__ void k(float* x) { x[0] = 1; }\n"
      "void launch(float* x) { k<<<1, 1>>>(x); } }\n",
      /*nvcc=*/true);
  ASSERT_FALSE(clean.empty()) << "nvcc could not build the test's shared object";
  EXPECT_EQ(Joined(ModuleSymbolsOutside(clean, "sglang")), "");

  const std::string stray = SharedObject(
      "namespace { __global__ void k(float* x) { x[0] = 1; } }\n"
      "namespace sglang { void launch(float* x) { k<<<1, 1>>>(x); } }\n",
      /*nvcc=*/true);
  ASSERT_FALSE(stray.empty());
  const std::vector<std::string> outside = ModuleSymbolsOutside(stray, "sglang");
  EXPECT_TRUE(Mentions(outside, "its device code for sm_90a: it defines kernel `(anonymous namespace)::k(float*)`"))
      << Joined(outside);
  EXPECT_TRUE(Mentions(outside, "its device code for compute_90: it defines kernel")) << Joined(outside);
}

TEST(ModuleSymbols, WhatIsNeitherCubinNorPtxIsAFinding) {
  EXPECT_TRUE(Mentions(ModuleSymbolsOutside("", "sglang"), "it cannot be read"));
  EXPECT_TRUE(Mentions(ModuleSymbolsOutside("\x50\xed\x55\xba garbage", "sglang"), "neither a cubin"));
  EXPECT_TRUE(Mentions(ModuleSymbolsOutside("\x7f"
                                            "ELF",
                                            "sglang"),
                       "no ELF header"));
}

// A real cubin cut at every length, and with bytes changed at random: the
// reader answers (symbols or INVALID_ARGUMENT), never crashes or reads
// past the end (the ASan build runs this too).
TEST(ModuleSymbols, TruncatedAndMutatedCubinsNeverCrashTheReader) {
  auto compiled = CompileSource(kOutside, "sm_90");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string cubin = compiled->cubin;
  size_t refused = 0;
  for (size_t n = 0; n < cubin.size(); n += std::max<size_t>(1, n / 64)) {
    const std::string cut = cubin.substr(0, n);  // its own allocation: ASan sees any overread
    auto symbols = detail::ElfExternalSymbols(cut);
    if (!symbols.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(symbols.status())) << symbols.status();
      ++refused;
    }
    (void)ModuleSymbolsOutside(cut, "sglang");
  }
  EXPECT_GT(refused, 0u);
  std::mt19937 random(42);
  for (int round = 0; round < 3000; ++round) {
    std::string mutated = cubin;
    const int changes = 1 + static_cast<int>(random() % 8);
    for (int c = 0; c < changes; ++c) {
      // Mostly the header and section headers, where offsets and sizes live.
      const size_t at = random() % 2 ? random() % 64 : random() % mutated.size();
      mutated[at] = static_cast<char>(random());
    }
    auto symbols = detail::ElfExternalSymbols(mutated);
    if (!symbols.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(symbols.status())) << symbols.status();
    }
    (void)ModuleSymbolsOutside(mutated, "sglang");
  }
  // Fields set to their worst values, one at a time.
  auto with = [&](size_t at, uint64_t value, size_t width) {
    std::string m = cubin;
    for (size_t i = 0; i < width; ++i) m[at + i] = static_cast<char>(value >> (8 * i));
    return m;
  };
  for (const std::string& m :
       {with(40, ~0ull, 8), with(58, 0, 2), with(60, 0xffff, 2), with(60, 0, 2), with(40, cubin.size() - 8, 8)}) {
    EXPECT_FALSE(detail::ElfExternalSymbols(m).ok());
  }
}

}  // namespace
}  // namespace jitd::guard
