// Module kernels (kind = "module"): the manifest form, nvcc's option
// allow-list, the files a build may read, the generated unit and the arch
// options. The build itself is tests/compiler's; serving is tests/daemon's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "manifest/manifest.h"
#include "manifest/module_kernel.h"

namespace jitd::manifest {
namespace {

using ::testing::HasSubstr;

constexpr const char* kModule = R"toml(
schema = 1
namespace = "team"
[defaults]
options = ["--fmad=true"]
arch_macro = "TEAM_CUDA_ARCH"

[[kernel]]
name = "ew.scale"
kind = "module"
sources = ["csrc/ew/scale.cuh", "csrc/ew/extra.cuh"]
include_dirs = ["csrc"]
exports = { scale = "ew::scale<{dtype}>", scale_inplace = "ew::scale_inplace<{dtype}>" }
signature = "scale(out: T[n], x: T[n])"
options = ["-std=c++20", "-O3", "--expt-relaxed-constexpr", "-DTEAM_FAST=1"]
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { bf16 = "bf16_t", fp32 = "float" }
)toml";

std::string WithKernelLine(const std::string& line) {
  std::string text = kModule;
  const std::string anchor = "options = [\"-std=c++20\"";
  text.insert(text.find(anchor), line + "\n");
  return text;
}

TEST(ModuleManifest, TheModuleFormParsesIntoSourcesIncludeDirsAndExportsInOrder) {
  auto m = Manifest::Parse(kModule, "k.toml");
  ASSERT_TRUE(m.ok()) << m.status();
  const KernelDef& k = m->kernels.front();
  EXPECT_TRUE(k.is_module());
  EXPECT_EQ(k.sources, (std::vector<std::string>{"csrc/ew/scale.cuh", "csrc/ew/extra.cuh"}));
  EXPECT_EQ(k.source, "csrc/ew/scale.cuh");  // the first source names the kernel's file
  EXPECT_EQ(k.include_dirs, std::vector<std::string>{"csrc"});
  ASSERT_EQ(k.exports.size(), 2u);
  EXPECT_EQ(k.exports[0], (std::pair<std::string, std::string>{"scale", "ew::scale<{dtype}>"}));
  EXPECT_TRUE(k.name_expressions.empty());
  EXPECT_EQ(m->arch_macro, "TEAM_CUDA_ARCH");
  EXPECT_EQ(Manifest::Instantiations(k).size(), 2u);
}

TEST(ModuleManifest, TheProjectsModuleTreeParses) {
  auto tree = KernelTree::Load(JITD_MODULE_TREE_DIR);
  ASSERT_TRUE(tree.ok()) << tree.status();
  size_t modules = 0;
  for (const KernelDef& k : (*tree)->manifest().kernels) modules += k.is_module() ? 1 : 0;
  EXPECT_EQ(modules, (*tree)->manifest().kernels.size());
  EXPECT_GE(modules, 4u);
}

TEST(ModuleManifest, EachMistakeOfTheModuleFormIsRefusedNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"source = \"a.cu\"", "'source' is for NVRTC kernels"},
      {"name_expressions = [\"k\"]", "'name_expressions' is for NVRTC kernels"},
      {"pch = true", "'pch' is for NVRTC kernels"},
      {"kind = \"cubin\"", "kind must be \"nvrtc\""},
  };
  for (const auto& [line, expected] : cases) {
    std::string text = WithKernelLine(line);
    if (line.starts_with("kind")) text.replace(text.find("kind = \"module\"\n"), 16, "");
    auto m = Manifest::Parse(text, "k.toml");
    ASSERT_FALSE(m.ok()) << line;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(expected)) << line;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("k.toml:")) << line;
  }
  std::string no_exports = kModule;
  no_exports.erase(no_exports.find("exports = "),
                   no_exports.find('\n', no_exports.find("exports = ")) - no_exports.find("exports = ") + 1);
  EXPECT_THAT(std::string(Manifest::Parse(no_exports, "k.toml").status().message()), HasSubstr("needs `exports`"));
  std::string bad_name = kModule;
  bad_name.replace(bad_name.find("scale_inplace ="), 13, "2scale");
  EXPECT_THAT(std::string(Manifest::Parse(bad_name, "k.toml").status().message()), HasSubstr("not a C identifier"));
  std::string escape = kModule;
  escape.replace(escape.find("\"csrc\"]"), 6, "\"../x\"");
  EXPECT_THAT(std::string(Manifest::Parse(escape, "k.toml").status().message()),
              HasSubstr("must be a path inside the kernels directory"));
  std::string unused = kModule;
  unused.replace(unused.find("ew::scale<{dtype}>"), 18, "ew::scale<float>");
  unused.replace(unused.find("ew::scale_inplace<{dtype}>"), 26, "ew::scale_inplace<float>");
  EXPECT_THAT(std::string(Manifest::Parse(unused, "k.toml").status().message()),
              HasSubstr("not used by any export expression"));
  std::string nvrtc_with_exports = kModule;
  nvrtc_with_exports.replace(nvrtc_with_exports.find("kind = \"module\""), 15, "source = \"a.cu\"");
  EXPECT_THAT(std::string(Manifest::Parse(nvrtc_with_exports, "k.toml").status().message()),
              HasSubstr("is for kind = \"module\""));
}

TEST(ModuleManifest, NvccOptionsAreAnAllowListAndDefaultsObeyItInATreeWithModules) {
  auto file_option = Manifest::Parse(WithKernelLine(""), "k.toml");
  ASSERT_TRUE(file_option.ok());
  std::string text = kModule;
  text.replace(text.find("\"-DTEAM_FAST=1\""), 15, "\"-Xcompiler=-include/etc/passwd\"");
  auto refused = Manifest::Parse(text, "k.toml");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("allow-list of nvcc options"));
  std::string defaults = kModule;
  defaults.replace(defaults.find("\"--fmad=true\""), 13, "\"-default-device\"");
  EXPECT_THAT(std::string(Manifest::Parse(defaults, "k.toml").status().message()),
              HasSubstr("[defaults] (this tree has module kernels)"));

  for (const char* ok : {"-std=c++20", "-O3", "--expt-relaxed-constexpr", "--use_fast_math", "--ftz=false", "-DX",
                         "-DX=1", "-UX", "--diag-suppress=177,550", "-lineinfo"}) {
    EXPECT_EQ(ModuleOptionProblem(ok), "") << ok;
  }
  for (const char* bad : {"-I/usr/include", "-include", "-o", "-Xcompiler", "-Xlinker=-rpath", "--ftz=maybe", "-D1X",
                          "-UX=1", "--options-file", "-ccbin", "-MF", "-L/tmp", "-lfoo", "--diag-suppress=a"}) {
    EXPECT_NE(ModuleOptionProblem(bad), "") << bad;
  }
}

TEST(ModuleClosure, SourcesAndEveryFileTheirIncludesCanMeanThroughIncludeDirsButNotOthers) {
  auto m = Manifest::Parse(kModule, "k.toml");
  ASSERT_TRUE(m.ok()) << m.status();
  const std::map<std::string, std::string> files = {
      {"kernels.toml", ""},
      {"csrc/ew/scale.cuh", "#include \"common/dtype.cuh\"\n#include <tvm/ffi/function.h>\n#include \"near.cuh\"\n"},
      {"csrc/ew/near.cuh", "// beside scale.cuh\n"},
      {"csrc/ew/extra.cuh", "#include <common/vec.cuh>\n"},
      {"csrc/common/dtype.cuh", "#pragma once\n"},
      {"csrc/common/vec.cuh", "#include \"dtype.cuh\"\n"},
      {"csrc/other/unused.cuh", "// no one includes it\n"},
  };
  auto closure = ModuleClosure(files, m->kernels.front());
  ASSERT_TRUE(closure.ok()) << closure.status();
  EXPECT_EQ(*closure, (std::vector<std::string>{"csrc/common/dtype.cuh", "csrc/common/vec.cuh", "csrc/ew/extra.cuh",
                                                "csrc/ew/near.cuh", "csrc/ew/scale.cuh"}));
  std::map<std::string, std::string> missing = files;
  missing.erase("csrc/ew/extra.cuh");
  EXPECT_EQ(ModuleClosure(missing, m->kernels.front()).status().code(), absl::StatusCode::kNotFound);
  std::map<std::string, std::string> clash = files;
  clash[kModuleUnitName] = "";
  EXPECT_THAT(std::string(ModuleClosure(clash, m->kernels.front()).status().message()), HasSubstr("rename it"));
}

TEST(ModuleUnit, IncludesTheSourcesThenExportsEachExpressionInTheTreesNamespace) {
  auto m = Manifest::Parse(kModule, "k.toml");
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string unit = ModuleUnit(*m, m->kernels.front(), {{"dtype", "bf16_t"}});
  EXPECT_EQ(unit,
            "// generated by jitd: the module's sources, then its exports\n"
            "#include \"csrc/ew/scale.cuh\"\n"
            "#include \"csrc/ew/extra.cuh\"\n"
            "#include <tvm/ffi/function.h>\n"
            "\n"
            "namespace team {\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, (ew::scale<bf16_t>));\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale_inplace, (ew::scale_inplace<bf16_t>));\n"
            "}  // namespace team\n");
}

TEST(ModuleArchOptions, EachArchGetsItsGencodeAndArchDefines) {
  EXPECT_EQ(ModuleArchOptions("sm_90a", ""),
            (std::vector<std::string>{"-gencode=arch=compute_90a,code=sm_90a", "-DJITD_CUDA_ARCH=900"}));
  EXPECT_EQ(ModuleArchOptions("sm_100", "SGL_CUDA_ARCH"),
            (std::vector<std::string>{"-gencode=arch=compute_100,code=sm_100", "-DJITD_CUDA_ARCH=1000",
                                      "-DSGL_CUDA_ARCH=1000"}));
  EXPECT_EQ(ModuleArchOptions("compute_90", ""),
            (std::vector<std::string>{"-gencode=arch=compute_90,code=compute_90", "-DJITD_CUDA_ARCH=900"}));
}

// A resolver of one module tree under a module toolchain given outright.
class ModuleResolverTest : public ::testing::Test {
 protected:
  static const Toolchain& Nvrtc() {
    static const Toolchain t = *Toolchain::Detect();
    return t;
  }
  static ModuleToolchain Tools(const std::string& fingerprint) {
    ModuleToolchain tools;
    tools.nvcc = "/usr/local/cuda/bin/nvcc";
    tools.nvcc_version = "V13.0.88";
    tools.host_cxx = "/usr/bin/g++";
    tools.tvm_ffi_version = "0.1.15.post2";
    tools.ffi_include = {"/opt/tvm_ffi/include"};
    tools.ffi_lib_dir = "/opt/tvm_ffi/lib";
    tools.read_roots = {"/usr/include"};
    tools.fingerprint = fingerprint;
    return tools;
  }
  absl::StatusOr<ResolvedKernel> Resolve(const std::string& manifest, const std::map<std::string, std::string>& files,
                                         const std::string& fingerprint = "tools-1", const std::string& arch = "") {
    auto tree = KernelTree::Load(Write(manifest, files));
    if (!tree.ok()) return tree.status();
    Toolchain toolchain = Nvrtc();
    if (!fingerprint.empty()) toolchain.modules = std::make_shared<const ModuleToolchainSource>(Tools(fingerprint));
    auto resolver = Resolver::Create(*tree, toolchain, "sm_90a");
    if (!resolver.ok()) return resolver.status();
    return (*resolver)->Resolve({"ew.scale", {{"dtype", "bf16"}}, arch, {}});
  }
  std::filesystem::path Write(const std::string& manifest, const std::map<std::string, std::string>& files) {
    const std::filesystem::path dir = dir_ / std::to_string(++trees_);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "kernels.toml") << manifest;
    for (const auto& [path, content] : files) {
      std::filesystem::create_directories((dir / path).parent_path());
      std::ofstream(dir / path) << content;
    }
    return dir;
  }
  void SetUp() override {
    char pattern[] = "/tmp/jitd-module-resolver-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  const std::map<std::string, std::string> files_ = {
      {"csrc/ew/scale.cuh", "#include \"common/dtype.cuh\"\nnamespace team::ew {}\n"},
      {"csrc/ew/extra.cuh", "namespace team::ew {}\n"},
      {"csrc/common/dtype.cuh", "#pragma once\n"},
  };
  std::filesystem::path dir_;
  int trees_ = 0;
};

TEST_F(ModuleResolverTest, AModuleResolvesIntoAnNvccJobOverItsStagedFiles) {
  auto r = Resolve(kModule, files_);
  ASSERT_TRUE(r.ok()) << r.status();
  const compiler::CompileJob& job = r->job;
  EXPECT_EQ(job.kind, compiler::ArtifactKind::kSharedObject);
  EXPECT_EQ(job.program_name, kModuleUnitName);
  EXPECT_THAT(job.source, HasSubstr("TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, (ew::scale<bf16_t>));"));
  std::vector<std::string> staged;
  for (const auto& file : job.headers) staged.push_back(file.path);
  EXPECT_EQ(staged, (std::vector<std::string>{"csrc/common/dtype.cuh", "csrc/ew/extra.cuh", "csrc/ew/scale.cuh"}));
  EXPECT_EQ(job.name_expressions, (std::vector<std::string>{"scale", "scale_inplace"}));
  EXPECT_EQ(job.module.nvcc, "/usr/local/cuda/bin/nvcc");
  EXPECT_EQ(
      job.module.compile_options,
      (std::vector<std::string>{"--fmad=true", "-std=c++20", "-O3", "--expt-relaxed-constexpr", "-DTEAM_FAST=1",
                                "-gencode=arch=compute_90a,code=sm_90a", "-DJITD_CUDA_ARCH=900", "-DTEAM_CUDA_ARCH=900",
                                "-Xcompiler=-fPIC", "--no-compress", "-Icsrc", "-I/opt/tvm_ffi/include"}));
  EXPECT_EQ(job.module.link_options, (std::vector<std::string>{"-L/opt/tvm_ffi/lib", "-ltvm_ffi", "-lcudart"}));
  EXPECT_EQ(job.digest, compiler::JobDigest(job));
  EXPECT_EQ(r->compiler, "nvcc V13.0.88; tvm-ffi 0.1.15.post2; toolchain tools-1");
}

TEST_F(ModuleResolverTest, TheKeyFollowsEveryStagedByteIncludeDirTheToolchainAndTheArch) {
  const std::string key = Resolve(kModule, files_)->key;
  std::map<std::string, std::string> edited = files_;
  edited["csrc/common/dtype.cuh"] += "// edited\n";
  EXPECT_NE(Resolve(kModule, edited)->key, key);
  edited = files_;
  edited["csrc/other.cuh"] = "// no module includes it\n";
  EXPECT_EQ(Resolve(kModule, edited)->key, key) << "a file outside the closure is not staged or keyed";
  std::string two_dirs = kModule;
  two_dirs.replace(two_dirs.find("include_dirs = [\"csrc\"]"), 23, "include_dirs = [\"csrc\", \"csrc/ew\"]");
  EXPECT_NE(Resolve(two_dirs, files_)->key, key);
  EXPECT_NE(Resolve(kModule, files_, "tools-2")->key, key);
  EXPECT_NE(Resolve(kModule, files_, "tools-1", "sm_100a")->key, key);
  EXPECT_EQ(Resolve(kModule, files_)->key, key) << "the same inputs give the same key";
}

TEST(ModuleBuilder, NamesTheToolchainSoThatAServeOnlyDaemonKeysAsItDid) {
  ModuleToolchain tools;
  tools.nvcc_version = "V13.0.88";
  tools.tvm_ffi_version = "0.1.15.post2";
  tools.fingerprint = std::string(64, 'a');
  const std::string builder = ModuleBuilder(tools);
  EXPECT_EQ(builder, "nvcc V13.0.88; tvm-ffi 0.1.15.post2; toolchain " + std::string(64, 'a'));
  std::optional<ModuleToolchain> serve_only = ServeOnlyToolchain(builder);
  ASSERT_TRUE(serve_only.has_value());
  EXPECT_EQ(serve_only->fingerprint, tools.fingerprint);
  EXPECT_EQ(serve_only->nvcc_version, "V13.0.88");
  EXPECT_EQ(serve_only->tvm_ffi_version, "0.1.15.post2");
  EXPECT_TRUE(serve_only->nvcc.empty()) << "a serve-only toolchain builds nothing";
  for (const char* not_one : {"13.0", "nvcc V13; tvm-ffi 1", "nvcc V13; tvm-ffi 1; toolchain short", ""}) {
    EXPECT_FALSE(ServeOnlyToolchain(not_one).has_value()) << not_one;
  }
}

TEST_F(ModuleResolverTest, WithoutAModuleToolchainAModuleIsRefusedSayingSo) {
  auto r = Resolve(kModule, files_, /*fingerprint=*/"");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("is a module"));
}

}  // namespace
}  // namespace jitd::manifest
