// Request resolution: names, params, arch and options validated with precise
// errors; canonical forms share a key; a header edit changes exactly the
// keys of the kernels that include it; compiles take the tree from memory
// (headers under every name an #include spells), and the key covers exactly
// those bytes and names and the NVRTC library identity.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "jitd/cache.h"
#include "jitd/keys/content_key.h"
#include "manifest/manifest.h"
#include "testing.h"

namespace jitd::manifest {
namespace {

namespace fs = std::filesystem;
using cache::testing::TempDir;

const Toolchain& Tools() {
  static const Toolchain t = [] {
    auto d = Toolchain::Detect();
    if (!d.ok()) {
      ADD_FAILURE() << d.status();
      std::abort();
    }
    return *d;
  }();
  return t;
}

std::unique_ptr<Resolver> Make(const fs::path& dir) {
  auto tree = KernelTree::Load(dir);
  EXPECT_TRUE(tree.ok()) << tree.status();
  auto r = Resolver::Create(*tree, Tools(), "sm_90");
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(*r);
}

const Resolver& Shipped() {
  static auto r = Make(JITD_KERNELS_DIR);
  return *r;
}

TEST(Toolchain, ReportsNvrtcAndItsArchitectures) {
  EXPECT_FALSE(Tools().nvrtc_version.empty());
  EXPECT_NE(std::find(Tools().archs.begin(), Tools().archs.end(), 90), Tools().archs.end());
  EXPECT_EQ(Tools().fingerprint.size(), 64u);
}

TEST(Toolchain, NamesTheNvrtcLibraryFilesByContentNotJustTheVersion) {
  EXPECT_EQ(Tools().nvrtc_library_fingerprint.size(), 64u);
  EXPECT_EQ(Tools().identity.size(), 64u);
  ASSERT_EQ(Tools().nvrtc_libraries.size(), 3u);
  EXPECT_TRUE(Tools().nvrtc_libraries[0].filename().string().starts_with("libnvrtc"));
  EXPECT_TRUE(Tools().nvrtc_libraries[1].filename().string().starts_with("libnvrtc-builtins"));
  EXPECT_TRUE(Tools().nvrtc_libraries[2].filename().string() == "ptxas");
  auto again = keys::FilesFingerprint(Tools().nvrtc_libraries);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, Tools().nvrtc_library_fingerprint) << "the fingerprint is of the files' contents";
}

TEST(Resolver, TheKeyNamesTheNvrtcLibrary) {
  auto tree = KernelTree::Load(JITD_KERNELS_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  Toolchain patched = Tools();
  patched.nvrtc_library_fingerprint = std::string(64, 'f');  // same "13.0", other libnvrtc bytes
  auto a = Resolver::Create(*tree, Tools(), "sm_90");
  auto b = Resolver::Create(*tree, patched, "sm_90");
  ASSERT_TRUE(a.ok() && b.ok());
  auto ka = (*a)->Resolve({"activation.silu_and_mul", {{"dtype", "fp16"}}, "", {}});
  auto kb = (*b)->Resolve({"activation.silu_and_mul", {{"dtype", "fp16"}}, "", {}});
  ASSERT_TRUE(ka.ok() && kb.ok());
  EXPECT_NE(ka->key, kb->key);
}

TEST(Resolver, ResolvesARequestIntoAProgramAndAKey) {
  auto r = Shipped().Resolve({"diffusion.modulate_scale_shift", {{"dtype", "bf16"}}, "", {}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arch, "sm_90") << "empty arch takes the default";
  EXPECT_EQ(r->params, "dtype=bf16");
  ASSERT_EQ(r->job.name_expressions.size(), 1u);
  EXPECT_EQ(r->job.name_expressions[0], "sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16>");
  EXPECT_EQ(r->job.program_name, "diffusion/modulate_scale_shift.cu");
  EXPECT_NE(std::find(r->job.options.begin(), r->job.options.end(), "-arch=sm_90"), r->job.options.end());
  EXPECT_NE(std::find(r->job.options.begin(), r->job.options.end(), "-frandom-seed=jitd"), r->job.options.end())
      << "every compile is seeded, so it is reproducible byte for byte";
  EXPECT_TRUE(cache::IsValidKey(r->key));
  EXPECT_EQ(r->key.size(), 64u);
}

TEST(Resolver, EveryParamCombinationHasItsOwnKey) {
  std::set<std::string> keys;
  size_t n = 0;
  for (const auto& k : Shipped().tree().manifest().kernels) {
    for (const auto& params : Manifest::Instantiations(k)) {
      for (const char* arch : {"sm_90", "sm_100a"}) {
        auto r = Shipped().Resolve({k.name, params, arch, {}});
        ASSERT_TRUE(r.ok()) << k.name << ": " << r.status();
        keys.insert(r->key);
        ++n;
      }
    }
  }
  EXPECT_EQ(keys.size(), n);
}

TEST(Resolver, EquivalentRequestsShareAKey) {
  auto a = Shipped().Resolve({"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {"-lineinfo", "-DFOO=1"}});
  auto b = Shipped().Resolve(
      {"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {"-DFOO=1", "--generate-line-info", "-lineinfo"}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->key, b->key);
  auto c = Shipped().Resolve({"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {"-DFOO=2"}});
  EXPECT_NE(a->key, c->key);
  auto d = Shipped().Resolve({"norm.rmsnorm", {{"dtype", "bf16"}, {"threads", "256"}}, "sm_90", {}});
  auto e = Shipped().Resolve({"norm.rmsnorm", {{"threads", "256"}, {"dtype", "bf16"}}, "sm_90", {}});
  EXPECT_EQ(d->key, e->key);
  EXPECT_EQ(d->params, "dtype=bf16,threads=256");
}

// The memo of resolved requests is keyed by the request's fields; a field
// whose bytes spell the separators of another request's key must not be
// answered with that request's resolution.
TEST(Resolver, ARequestThatSpellsAnotherRequestsMemoKeyIsStillRefused) {
  auto resolver = Make(JITD_KERNELS_DIR);
  auto valid = resolver->Resolve({"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {}});
  ASSERT_TRUE(valid.ok()) << valid.status();
  const std::vector<KernelRequest> forged = {
      {"moe.topk_sum", {}, std::string("sm_90\x1f") + "dtype=fp32", {}},
      {"moe.topk_sum\x1fsm_90", {{"dtype", "fp32"}}, "", {}},
      {"moe.topk_sum", {{"dtype", "fp32\x1e"}}, "sm_90", {}},
      {"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90\x1e", {}},
  };
  for (const KernelRequest& request : forged) {
    for (int again = 0; again < 2; ++again) {  // neither alone nor after itself
      auto r = resolver->Resolve(request);
      EXPECT_FALSE(r.ok()) << "arch '" << request.arch << "' kernel '" << request.kernel << "' answered with key "
                           << (r.ok() ? r->key : "");
    }
  }
  // The valid request is still answered, from memory, with the same key.
  auto again = resolver->Resolve({"moe.topk_sum", {{"dtype", "fp32"}}, "sm_90", {}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->key, valid->key);
}

struct BadRequest {
  const char* name;
  KernelRequest request;
  absl::StatusCode code;
  const char* message;
};

class Rejected : public ::testing::TestWithParam<BadRequest> {};

TEST_P(Rejected, WithTheRightCodeAndAnActionableMessage) {
  auto r = Shipped().Resolve(GetParam().request);
  ASSERT_FALSE(r.ok()) << GetParam().name;
  EXPECT_EQ(r.status().code(), GetParam().code) << r.status();
  EXPECT_NE(r.status().message().find(GetParam().message), std::string_view::npos) << r.status();
}

const std::map<std::string, std::string> kBf16 = {{"dtype", "bf16"}};
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

INSTANTIATE_TEST_SUITE_P(
    Cases, Rejected,
    ::testing::Values(
        BadRequest{"unknown kernel",
                   {"diffusion.modulate", kBf16, "", {}},
                   absl::StatusCode::kNotFound,
                   "did you mean diffusion.modulate_scale_shift"},
        BadRequest{
            "unknown kernel far", {"zzz.qqq.xxx.yyy.www", {}, "", {}}, absl::StatusCode::kNotFound, "jitctl kernels"},
        BadRequest{"empty kernel", {"", {}, "", {}}, kInvalid, "no kernel named"},
        BadRequest{"huge kernel", {std::string(10000, 'a'), {}, "", {}}, kInvalid, "is not a kernel name"},
        BadRequest{"traversal kernel", {"../../etc/passwd", {}, "", {}}, absl::StatusCode::kNotFound, "unknown kernel"},
        BadRequest{"unknown param",
                   {"moe.topk_sum", {{"dtype", "bf16"}, {"dtyp", "x"}}, "", {}},
                   kInvalid,
                   "has no parameter 'dtyp'; its parameters: dtype (bf16|fp16|fp32)"},
        BadRequest{"param on paramless", {"moe.align_block_size", kBf16, "", {}}, kInvalid, "takes no parameters"},
        BadRequest{
            "missing param", {"norm.rmsnorm", kBf16, "", {}}, kInvalid, "needs parameter threads (128|256|512|1024)"},
        BadRequest{"bad value",
                   {"moe.topk_sum", {{"dtype", "fp64"}}, "", {}},
                   kInvalid,
                   "dtype=fp64 is not allowed for kernel moe.topk_sum"},
        BadRequest{"bad int",
                   {"norm.rmsnorm", {{"dtype", "bf16"}, {"threads", "100"}}, "", {}},
                   kInvalid,
                   "threads=100 is not allowed"},
        BadRequest{"unsupported arch", {"moe.topk_sum", kBf16, "sm_91", {}}, kInvalid, "arch 'sm_91' is not supported"},
        BadRequest{"a on old arch", {"moe.topk_sum", kBf16, "sm_80a", {}}, kInvalid, "no architecture-specific"},
        BadRequest{"f on old arch", {"moe.topk_sum", kBf16, "sm_90f", {}}, kInvalid, "no family-specific"},
        BadRequest{"other prefix", {"moe.topk_sum", kBf16, "ptx_90", {}}, kInvalid, "not of the form sm_XX"},
        BadRequest{"leading zero compute arch",
                   {"moe.topk_sum", kBf16, "compute_090", {}},
                   kInvalid,
                   "leading zero (write compute_90)"},
        BadRequest{"leading zero arch", {"moe.topk_sum", kBf16, "sm_090", {}}, kInvalid, "leading zero (write sm_90)"},
        BadRequest{"two leading zeros", {"moe.topk_sum", kBf16, "sm_0090a", {}}, kInvalid, "leading zero"},
        BadRequest{"absurd arch", {"moe.topk_sum", kBf16, "sm_99999999999999999", {}}, kInvalid, "is not an arch"},
        BadRequest{"include path", {"moe.topk_sum", kBf16, "", {"-I/etc"}}, kInvalid, "include paths"},
        BadRequest{
            "long include path", {"moe.topk_sum", kBf16, "", {"--include-path=/etc"}}, kInvalid, "include paths"},
        BadRequest{
            "forced include", {"moe.topk_sum", kBf16, "", {"-include", "/etc/passwd"}}, kInvalid, "forced includes"},
        BadRequest{"arch option", {"moe.topk_sum", kBf16, "", {"-arch=sm_80"}}, kInvalid, "arch field"},
        BadRequest{"std option", {"moe.topk_sum", kBf16, "", {"-std=c++20"}}, kInvalid, "C++ dialect"},
        BadRequest{"pch option", {"moe.topk_sum", kBf16, "", {"--create-pch=x"}}, kInvalid, "precompiled headers"},
        BadRequest{"path in macro", {"moe.topk_sum", kBf16, "", {"-DX=/etc/passwd"}}, kInvalid, "file paths"},
        BadRequest{"quoted macro", {"moe.topk_sum", kBf16, "", {"-DX=\"a b\""}}, kInvalid, "no quotes or spaces"},
        BadRequest{"bad macro name", {"moe.topk_sum", kBf16, "", {"-D1X"}}, kInvalid, "C identifier"},
        BadRequest{"macro twice", {"moe.topk_sum", kBf16, "", {"-DX=1", "-DX=2"}}, kInvalid, "defined twice"},
        BadRequest{"contradiction", {"moe.topk_sum", kBf16, "", {"--ftz=true", "-ftz=false"}}, kInvalid, "contradict"},
        BadRequest{"bool value", {"moe.topk_sum", kBf16, "", {"--ftz=maybe"}}, kInvalid, "true or false"},
        BadRequest{"maxrregcount", {"moe.topk_sum", kBf16, "", {"--maxrregcount=999"}}, kInvalid, "16 to 255"},
        BadRequest{"unknown option", {"moe.topk_sum", kBf16, "", {"--fancy"}}, kInvalid, "not in the allow-list"},
        BadRequest{"huge option", {"moe.topk_sum", kBf16, "", {std::string(5000, 'x')}}, kInvalid, "longer than"},
        BadRequest{"too many options",
                   {"moe.topk_sum", kBf16, "", std::vector<std::string>(40, "-lineinfo")},
                   kInvalid,
                   "at most 32"}),
    [](const ::testing::TestParamInfo<BadRequest>& param_info) {
      std::string name = param_info.param.name;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

void Append(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::app) << text; }

TEST(Resolver, AHeaderEditChangesExactlyTheKeysOfKernelsThatIncludeIt) {
  TempDir dir;
  fs::copy(JITD_KERNELS_DIR, dir.path() / "kernels", fs::copy_options::recursive);
  fs::path kernels = dir.path() / "kernels";
  auto all_keys = [&](const Resolver& r) {
    std::map<std::string, std::string> keys;
    for (const auto& k : r.tree().manifest().kernels) {
      for (const auto& params : Manifest::Instantiations(k)) {
        keys[k.name + "/" + std::to_string(keys.size())] = r.Resolve({k.name, params, "sm_90", {}})->key;
      }
    }
    return keys;
  };
  auto before_resolver = Make(kernels);
  auto before = all_keys(*before_resolver);
  // Every header under common/, one at a time.
  for (const auto& entry : fs::directory_iterator(kernels / "common")) {
    std::string header = "common/" + entry.path().filename().string();
    std::set<std::string> includers;
    for (const auto& k : before_resolver->tree().manifest().kernels) {
      auto closure = keys::IncludeClosure(kernels, k.source);
      for (const auto& f : *closure) {
        if (f.generic_string() == header) includers.insert(k.name);
      }
    }
    std::string original;
    {
      std::ifstream in(entry.path());
      original.assign(std::istreambuf_iterator<char>(in), {});
    }
    Append(entry.path(), " ");  // one byte
    auto after = all_keys(*Make(kernels));
    for (const auto& [id, key] : before) {
      std::string kernel = id.substr(0, id.find('/'));
      if (includers.count(kernel)) {
        EXPECT_NE(after[id], key) << header << " is included by " << kernel;
      } else {
        EXPECT_EQ(after[id], key) << header << " is not included by " << kernel;
      }
    }
    std::ofstream(entry.path(), std::ios::trunc) << original;
  }
  EXPECT_EQ(all_keys(*Make(kernels)), before) << "restoring the headers restores the keys";
}

TEST(KernelTree, CompilesTakeTheTreeFromMemoryAndEditsDoNotReachThem) {
  TempDir dir;
  fs::copy(JITD_KERNELS_DIR, dir.path() / "kernels", fs::copy_options::recursive);
  auto r = Make(dir.path() / "kernels");
  auto resolved = r->Resolve({"moe.topk_sum", {{"dtype", "fp16"}}, "", {}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const compiler::CompileJob& job = resolved->job;
  for (const std::string& option : job.options) {
    EXPECT_FALSE(option.starts_with("-I") && option.find(dir.path().string()) != std::string::npos)
        << "no include path into the kernels tree: " << option;
  }
  std::map<std::string, std::string> headers;
  for (const auto& h : job.headers) headers[h.name] = h.content;
  ASSERT_TRUE(headers.count("common/types.cuh")) << "a header included from a header is in memory too";
  EXPECT_EQ(headers["common/types.cuh"], *r->tree().File("common/types.cuh"));
  EXPECT_EQ(job.source, *r->tree().File("moe/topk_sum.cu"));
  EXPECT_EQ(job.log_root, fs::weakly_canonical(dir.path() / "kernels").string());
  EXPECT_EQ(job.digest, compiler::JobDigest(job));
  EXPECT_EQ(job.toolkit_fingerprint, Tools().identity);
  Append(dir.path() / "kernels/common/types.cuh", "// edited\n");
  auto again = r->Resolve({"moe.topk_sum", {{"dtype", "fp16"}}, "", {}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->job.headers, job.headers) << "the tree was read once";
}

// A manifest of `kernels` kernels, each with `params` int params of
// `values` values: values^params instantiations each.
std::string ManyInstantiations(int kernels, int params, int values) {
  std::string text = "schema = 1\n";
  for (int k = 0; k < kernels; ++k) {
    std::string expression = "sglang::k<";
    for (int p = 0; p < params; ++p) expression += (p > 0 ? ", {p" : "{p") + std::to_string(p) + "}";
    text += "[[kernel]]\nname = \"big.k" + std::to_string(k) + "\"\nsource = \"k.cu\"\nname_expressions = [\"" +
            expression + ">\"]\n";
    for (int p = 0; p < params; ++p) {
      text += "  [[kernel.params]]\n  name = \"p" + std::to_string(p) + "\"\n  type = \"int\"\n  values = { ";
      for (int v = 0; v < values; ++v) {
        const std::string value = std::to_string(v);
        text += (v > 0 ? ", \"" : "\"") + value + "\" = \"" + value + "\"";
      }
      text += " }\n";
    }
  }
  return text;
}

TEST(InstantiationBound, InstantiationsAreCountedWithoutListingThem) {
  for (const KernelDef& k : Shipped().tree().manifest().kernels) {
    EXPECT_EQ(InstantiationCount(k), Manifest::Instantiations(k).size()) << k.name;
  }
  auto twenty = Manifest::Parse(ManyInstantiations(1, 1, 20), "small.toml");
  ASSERT_TRUE(twenty.ok()) << twenty.status();
  EXPECT_EQ(InstantiationCount(twenty->kernels[0]), 20u);
}

// Six int params of ten values: a few lines, 10^6 instantiations, which
// warm --all, lint and ListKernels once listed (0.8 GB, seconds per call).
TEST(InstantiationBound, ATreeOfMoreInstantiationsThanTheBoundIsRefusedAtLoadNamingKernelCountAndBound) {
  TempDir dir;
  fs::create_directories(dir.path() / "big");
  std::ofstream(dir.path() / "big/kernels.toml") << ManyInstantiations(1, 6, 10);
  std::ofstream(dir.path() / "big/k.cu") << "namespace sglang { template <int... N> __global__ void k() {} }\n";
  auto tree = KernelTree::Load(dir.path() / "big");
  ASSERT_FALSE(tree.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(tree.status())) << tree.status();
  const std::string message(tree.status().message());
  EXPECT_NE(message.find("kernel big.k0 has 1000000 instantiations (10 p0 x 10 p1 x 10 p2 x 10 p3 x 10 p4 x 10 p5)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("more than the 4096 instantiations a kernel tree may have"), std::string::npos) << message;
  EXPECT_NE(message.find("kernels.toml:2:"), std::string::npos) << "the kernel's line: " << message;

  // A product past 2^64 saturates instead of wrapping to a small number.
  auto huge = Manifest::Parse(ManyInstantiations(1, 20, 10), "huge.toml");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("has more than 2^64 instantiations"), std::string_view::npos) << huge.status();
  // Kernels within it alone can still add up past it: the one that does is named.
  auto many = Manifest::Parse(ManyInstantiations(3, 2, 40), "many.toml");  // 1600 each
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("kernel big.k2 (1600 instantiations (40 p0 x 40 p1)) brings the tree over "
                                         "the 4096"),
            std::string_view::npos)
      << many.status();
  // At the bound exactly, it loads.
  EXPECT_TRUE(Manifest::Parse(ManyInstantiations(1, 2, 64), "at_bound.toml").ok());
  EXPECT_EQ(kMaxInstantiationsPerTree, 4096u);
}

// A tree whose kernel includes a header beside it by its short name.
void WriteTree(const fs::path& root, const std::string& kernel_source, const std::string& b_source = "") {
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  std::ofstream(root / "kernels.toml") << "schema = 1\n[defaults]\noptions = []\n"
                                       << "[[kernel]]\nname = \"a.k\"\nsource = \"a/k.cu\"\ndescription = \"k\"\n"
                                       << "name_expressions = [\"k\"]\noptions = []\n";
  std::ofstream(root / "a/k.cu") << kernel_source;
  std::ofstream(root / "a/util.cuh") << "#pragma once\n__device__ int a_util() { return 1; }\n";
  std::ofstream(root / "b/util.cuh") << "#pragma once\n__device__ int b_util() { return 2; }\n";
  std::ofstream(root / "b/y.cuh") << (b_source.empty() ? "#pragma once\n" : b_source);
}

TEST(Resolver, AHeaderBesideItsIncluderIsGivenUnderTheNameTheIncludeSpells) {
  TempDir dir;
  WriteTree(dir.path(), "#include \"util.cuh\"\n__global__ void k() {}\n");
  auto r = Make(dir.path());
  auto resolved = r->Resolve({"a.k", {}, "", {}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->job.headers.size(), 1u);
  EXPECT_EQ(resolved->job.headers[0].name, "util.cuh");
  EXPECT_EQ(resolved->job.headers[0].path, "a/util.cuh");
  EXPECT_NE(resolved->job.headers[0].content.find("a_util"), std::string::npos);
}

TEST(Resolver, OneSpellingForTwoFilesIsRefusedNamingBoth) {
  TempDir dir;
  WriteTree(dir.path(), "#include \"util.cuh\"\n#include \"b/y.cuh\"\n__global__ void k() {}\n",
            "#pragma once\n#include \"util.cuh\"\n");
  auto tree = KernelTree::Load(dir.path());
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto r = Resolver::Create(*tree, Tools(), "sm_90");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("a/util.cuh"), std::string_view::npos) << r.status();
  EXPECT_NE(r.status().message().find("b/util.cuh"), std::string_view::npos) << r.status();
  EXPECT_NE(r.status().message().find("b/y.cuh:2"), std::string_view::npos) << r.status();
}

TEST(KernelTree, MissingSourceIsReportedWithItsManifestLine) {
  TempDir dir;
  fs::copy(JITD_KERNELS_DIR, dir.path() / "kernels", fs::copy_options::recursive);
  fs::remove(dir.path() / "kernels/moe/topk_sum.cu");
  auto tree = KernelTree::Load(dir.path() / "kernels");
  EXPECT_TRUE(absl::IsInvalidArgument(tree.status())) << tree.status();
  EXPECT_NE(tree.status().message().find("moe/topk_sum.cu does not exist"), std::string_view::npos) << tree.status();
}

}  // namespace
}  // namespace jitd::manifest
