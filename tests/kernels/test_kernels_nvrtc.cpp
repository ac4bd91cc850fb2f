// Every instantiation kernels.toml declares compiles for every architecture
// jitd targets, through the production path: the daemon's Resolver turns
// (kernel, params, arch) into a CompileJob, with its real options and include
// paths, and CompileInProcess (what a compile worker runs) compiles it. Each
// name expression must lower to a mangled name in namespace sglang whose
// demangled signature is KERNELS.md's, and an ELF cubin must come out. No GPU
// is needed (NVRTC only; libcuda is never linked).
#include <cxxabi.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "compiler/nvrtc_program.h"
#include "kernel_contract.h"
#include "manifest/manifest.h"
#include "manifest/signature.h"
#include "shipped_kernels.h"

namespace jitd::kernels_test {
namespace {

// Hopper (the H200 the kernels run on) and Blackwell's arch-specific target.
const char* const kArchs[] = {"sm_90", "sm_100a"};

struct CompileCase {
  std::string kernel;                         // "norm.rmsnorm"
  std::map<std::string, std::string> params;  // name -> request value
  std::string arch;
  // "norm_rmsnorm_dtype_bf16_threads_256_sm_90": a test name.
  std::string Label() const {
    std::string label = kernel;
    for (char& ch : label) ch = ch == '.' ? '_' : ch;
    for (const auto& [name, value] : params) label += "_" + name + "_" + value;
    return label + "_" + arch;
  }
};

// From the manifest alone (no toolchain), so listing the tests stays cheap.
std::vector<CompileCase> AllCases() {
  const auto tree = LoadShippedKernels();
  if (!tree.ok()) {
    std::fprintf(stderr, "kernels: %s\n", tree.status().ToString().c_str());
    return {};  // gtest then fails the uninstantiated suite
  }
  std::vector<CompileCase> cases;
  for (const manifest::KernelDef& k : (*tree)->manifest().kernels) {
    for (const auto& params : manifest::Manifest::Instantiations(k)) {
      for (const char* arch : kArchs) cases.push_back({k.name, params, arch});
    }
  }
  return cases;
}

// One PCH directory per test process, as a compile worker has (a PCH file is
// only usable by the process that made it), removed when the process ends.
// Running the whole binary, rmsnorm's CUB front end is parsed once per arch
// and 22 of its 24 compiles reuse it: build-kernels/tests/kernels/test_kernels_nvrtc
// took 19.5 s of NVRTC time with a PchState, 61.7 s with none (2 shared cores).
class PchDirectory : public ::testing::Environment {
 public:
  compiler::PchState* state() { return state_.dir.empty() ? nullptr : &state_; }
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "jitd-test-kernels-pch-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) state_.dir = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    if (!state_.dir.empty()) std::filesystem::remove_all(state_.dir, ec);
  }

 private:
  compiler::PchState state_;
};
auto* const g_pch = static_cast<PchDirectory*>(::testing::AddGlobalTestEnvironment(new PchDirectory));

// Summed over the compiles of this process: NVRTC serialises compiles inside
// a process, so this is what one worker would spend compiling them.
double g_nvrtc_ms = 0;
int g_nvrtc_compiles = 0;
int g_nvrtc_pch_used = 0;

class NvrtcTimeReport : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_nvrtc_compiles > 0) {
      std::printf("[ nvrtc ] %d compiles (%d with a precompiled header), %.2f s total\n", g_nvrtc_compiles,
                  g_nvrtc_pch_used, g_nvrtc_ms / 1000);
    }
  }
};
const auto* const g_report = ::testing::AddGlobalTestEnvironment(new NvrtcTimeReport);

std::string Demangle(const std::string& mangled) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                    std::free);
  return status == 0 && text ? std::string(text.get()) : std::string();
}

// "<name expression>(<KERNELS.md's parameters>)", with the "void " that the
// Itanium ABI encodes for function templates only; T is KERNELS.md's type for
// the requested dtype.
std::string ContractSignature(const CompileCase& c, const std::string& name_expression) {
  for (const ContractKernel& k : contract_kernels()) {
    if (k.name != c.kernel) continue;
    std::string params = k.signature;
    const auto dtype = c.params.find("dtype");
    const std::string t = dtype != c.params.end() ? contract_dtypes().at(dtype->second) : "?";
    for (size_t at = params.find("{T}"); at != std::string::npos; at = params.find("{T}")) params.replace(at, 3, t);
    const bool is_template = name_expression.find('<') != std::string::npos;
    return (is_template ? "void " : "") + name_expression + params;
  }
  return "(kernel not in KERNELS.md)";
}

// gtest prints a failing parameter; bytes would say nothing.
void PrintTo(const CompileCase& c, std::ostream* os) { *os << c.Label(); }

class KernelInstantiation : public ::testing::TestWithParam<CompileCase> {};

TEST_P(KernelInstantiation, CompilesAndLowersToTheContractSignature) {
  const CompileCase& c = GetParam();
  const auto resolver = ShippedResolver();
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  const auto resolved = (*resolver)->Resolve({.kernel = c.kernel, .params = c.params, .arch = c.arch, .options = {}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->arch, c.arch);

  const auto compiled = compiler::CompileInProcess(resolved->job, g_pch->state(), /*cancel=*/nullptr);
  ASSERT_TRUE(compiled.ok()) << compiled.status();  // the message carries NVRTC's log
  g_nvrtc_ms += compiled->compile_ms;
  ++g_nvrtc_compiles;
  g_nvrtc_pch_used += compiled->used_pch ? 1 : 0;

  EXPECT_TRUE(compiled->cubin.starts_with("\177ELF")) << compiled->cubin.size() << " bytes, not an ELF cubin";
  ASSERT_EQ(compiled->lowered_names.size(), resolved->job.name_expressions.size());
  for (const auto& [expression, lowered] : compiled->lowered_names) {
    ASSERT_FALSE(lowered.empty()) << expression << " did not lower";
    EXPECT_TRUE(lowered.starts_with("_ZN6sglang")) << expression << " -> " << lowered;
    EXPECT_EQ(Demangle(lowered), ContractSignature(c, expression)) << lowered;
    // The manifest's signature (what `jitctl kernels -l` shows) passes what
    // the entry point takes.
    const manifest::KernelDef* def = (*resolver)->tree().manifest().Find(c.kernel);
    ASSERT_NE(def, nullptr);
    const auto declared = manifest::DeclaredArgs(def->signature);
    ASSERT_TRUE(declared.ok()) << declared.status();
    const auto takes = manifest::CompiledArgs(lowered);
    ASSERT_TRUE(takes.ok()) << takes.status();
    EXPECT_EQ(*declared, *takes) << def->signature << " vs " << Demangle(lowered);
  }
}

INSTANTIATE_TEST_SUITE_P(KernelsToml, KernelInstantiation, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<CompileCase>& case_info) {
                           return case_info.param.Label();
                         });

}  // namespace
}  // namespace jitd::kernels_test
