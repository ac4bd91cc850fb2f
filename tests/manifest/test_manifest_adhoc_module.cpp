// Ad-hoc modules (load_jit's form): a module spec a request sends, resolved
// over a served tree that allows it, keyed as a declared module of the same
// unit and files; every part of the spec a client controls is checked.
// Serving them is tests/python/test_adhoc_modules.py's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "manifest/adhoc_module.h"
#include "manifest/lock.h"
#include "manifest/manifest.h"

namespace jitd::manifest {
namespace {

using ::testing::HasSubstr;

constexpr const char* kTree = R"toml(
schema = 1
namespace = "team"
adhoc_modules = true
[defaults]
options = ["--fmad=true"]

[[kernel]]
name = "ew.scale"
kind = "module"
sources = ["csrc/ew/scale.cuh"]
include_dirs = ["csrc"]
exports = { scale = "ew::scale<{dtype}>" }
options = ["-std=c++20", "-O3"]
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { bf16 = "bf16_t", fp32 = "float" }
)toml";

class AdhocModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/jitd-adhoc-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

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
  static Toolchain Tools() {
    static const Toolchain nvrtc = *Toolchain::Detect();
    ModuleToolchain tools;
    tools.nvcc = "/usr/local/cuda/bin/nvcc";
    tools.nvcc_version = "V13.0.88";
    tools.host_cxx = "/usr/bin/g++";
    tools.ffi_include = {"/opt/tvm_ffi/include"};
    tools.ffi_lib_dir = "/opt/tvm_ffi/lib";
    tools.fingerprint = "tools-1";
    Toolchain toolchain = nvrtc;
    toolchain.modules = std::make_shared<const ModuleToolchainSource>(tools);
    return toolchain;
  }
  // A resolver of one tree, written from `manifest` and files_.
  std::unique_ptr<Resolver> Serve(const std::string& manifest, std::shared_ptr<const KernelLock> lock = nullptr) {
    auto tree = KernelTree::Load(Write(manifest, files_));
    EXPECT_TRUE(tree.ok()) << tree.status();
    tree_ = *tree;
    auto resolver = Resolver::Create({ServedTree{"team", *tree, std::move(lock)}}, Tools(), "sm_90a");
    EXPECT_TRUE(resolver.ok()) << resolver.status();
    return std::move(*resolver);
  }
  // The spec of ew.scale for dtype=bf16, sent for the served tree.
  AdhocModule Spec() const {
    AdhocModule spec;
    spec.sources = {"csrc/ew/scale.cuh"};
    spec.include_dirs = {"csrc"};
    spec.exports = {{"scale", "ew::scale<bf16_t>"}};
    spec.options = {"-std=c++20", "-O3"};
    spec.tree_fingerprint = tree_ != nullptr ? tree_->adhoc_fingerprint() : "";
    return spec;
  }
  static KernelRequest Adhoc(const std::string& name, AdhocModule spec) {
    KernelRequest request;
    request.kernel = name;
    request.module = std::make_shared<const AdhocModule>(std::move(spec));
    return request;
  }
  absl::Status Refusal(Resolver& r, AdhocModule spec, const std::string& name = "team/jit.scale") {
    return r.Resolve(Adhoc(name, std::move(spec))).status();
  }

  std::map<std::string, std::string> files_ = {
      {"csrc/ew/scale.cuh", "#include \"common/dtype.cuh\"\nnamespace team::ew {}\n"},
      {"csrc/common/dtype.cuh", "#pragma once\n"},
      {"csrc/ew/other.cpp", "// no declared kernel includes it\n"},
  };
  std::shared_ptr<const KernelTree> tree_;
  std::filesystem::path dir_;
  int trees_ = 0;
};

TEST_F(AdhocModuleTest, ASpecIsKeyedExactlyAsTheDeclaredModuleOfTheSameUnitAndFiles) {
  auto r = Serve(kTree);
  auto declared = r->Resolve({"team/ew.scale", {{"dtype", "bf16"}}, "", {}});
  ASSERT_TRUE(declared.ok()) << declared.status();
  auto adhoc = r->Resolve(Adhoc("team/jit.scale", Spec()));
  ASSERT_TRUE(adhoc.ok()) << adhoc.status();
  EXPECT_EQ(adhoc->key, declared->key);
  EXPECT_EQ(adhoc->kernel, "team/jit.scale");
  EXPECT_EQ(adhoc->job.kind, compiler::ArtifactKind::kSharedObject);
  EXPECT_EQ(adhoc->job.source, declared->job.source);
  EXPECT_EQ(adhoc->job.module.compile_options, declared->job.module.compile_options);
  // A bare name means the only tree.
  EXPECT_EQ(r->Resolve(Adhoc("jit.scale", Spec()))->key, declared->key);
  // Another expression, file list or option is another key (and the memo
  // does not answer one spec with another's).
  AdhocModule fp32 = Spec();
  fp32.exports = {{"scale", "ew::scale<float>"}};
  EXPECT_EQ(r->Resolve(Adhoc("team/jit.scale", fp32))->key,
            r->Resolve({"team/ew.scale", {{"dtype", "fp32"}}, "", {}})->key);
  AdhocModule fast = Spec();
  fast.options.push_back("-DTEAM_FAST=1");
  EXPECT_NE(r->Resolve(Adhoc("team/jit.scale", fast))->key, declared->key);
}

TEST_F(AdhocModuleTest, ATreeThatAllowsThemReadsEverySourceAndMayDeclareNoKernel) {
  Serve("schema = 1\nnamespace = \"team\"\nadhoc_modules = true\n");
  EXPECT_NE(tree_->File("csrc/ew/other.cpp"), nullptr) << "a .cpp no kernel includes is read for ad-hoc specs";
  EXPECT_TRUE(tree_->manifest().kernels.empty());
  EXPECT_FALSE(Manifest::Parse("schema = 1\n", "k.toml").ok()) << "without adhoc_modules a tree needs kernels";
  auto bad = Manifest::Parse("schema = 1\nadhoc_modules = \"yes\"\n", "k.toml");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("adhoc_modules must be true or false"));
}

TEST_F(AdhocModuleTest, TheFingerprintCoversTheSourcesOnlyAndAnotherCopyIsRefused) {
  std::map<std::string, std::string> files = {{"a.cuh", "x"}, {"kernels.toml", "schema = 1"}, {"b.py", "y"}};
  const std::string base = AdhocFingerprint(files);
  files["kernels.toml"] = "schema = 1\nadhoc_modules = true\n";
  files["c.pyc"] = "z";
  EXPECT_EQ(AdhocFingerprint(files), base) << "kernels.toml and other files are not the client's to match";
  files["a.cuh"] = "x2";
  EXPECT_NE(AdhocFingerprint(files), base);
  files["a.cuh"] = "x";
  files["d/e.inl"] = "";
  EXPECT_NE(AdhocFingerprint(files), base);

  auto r = Serve(kTree);
  AdhocModule other = Spec();
  other.tree_fingerprint = std::string(64, 'e');
  absl::Status s = Refusal(*r, other);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("the client's copy of kernel tree team differs from the daemon's"));
  other.tree_fingerprint.clear();
  EXPECT_THAT(std::string(Refusal(*r, other).message()), HasSubstr("fingerprint names none"));
}

TEST_F(AdhocModuleTest, ATreeWithoutTheSettingOrWithALockRefusesThem) {
  std::string plain = kTree;
  plain.replace(plain.find("adhoc_modules = true\n"), 21, "");
  auto r = Serve(plain);
  absl::Status s = Refusal(*r, Spec());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("must say `adhoc_modules = true`"));

  auto lock = KernelLock::Parse("schema = 1\n", "team.lock");
  ASSERT_TRUE(lock.ok()) << lock.status();
  auto locked = Serve(kTree, std::make_shared<const KernelLock>(*lock));
  s = Refusal(*locked, Spec());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("is locked (team.lock)"));
}

TEST_F(AdhocModuleTest, EachPartOfASpecAClientControlsIsChecked) {
  auto r = Serve(kTree);
  const std::vector<std::pair<std::function<void(AdhocModule&)>, std::string>> cases = {
      {[](AdhocModule& m) {
         m.exports = {{"scale", "f(\"/etc/passwd\")"}};
       },
       "holds '('"},
      {[](AdhocModule& m) {
         m.exports = {{"scale", "x>\n#include <y>"}};
       },
       "holds byte 10"},
      {[](AdhocModule& m) {
         m.exports = {{"scale", "a; asm"}};
       },
       "holds ';'"},
      {[](AdhocModule& m) {
         m.exports = {{"scale", ""}};
       },
       "is empty"},
      {[](AdhocModule& m) {
         m.exports = {{"scale", std::string(2000, 'a')}};
       },
       "longer than 1024"},
      {[](AdhocModule& m) {
         m.exports = {{"1scale", "s"}};
       },
       "is not a C identifier"},
      {[](AdhocModule& m) {
         m.exports = {{"s", "a"}, {"s", "b"}};
       },
       "export s is named twice"},
      {[](AdhocModule& m) { m.exports.clear(); }, "no exports"},
      {[](AdhocModule& m) { m.sources.clear(); }, "no sources"},
      {[](AdhocModule& m) { m.sources = {"../outside.cuh"}; }, "'..' part"},
      {[](AdhocModule& m) { m.sources = {"/etc/passwd"}; }, "is absolute"},
      {[](AdhocModule& m) { m.include_dirs = {"csrc/./x"}; }, "'.' or '..' part"},
      {[](AdhocModule& m) { m.sources.assign(65, "csrc/ew/scale.cuh"); }, "65 sources, more than the 64"},
      {[](AdhocModule& m) { m.options = {"-I/etc"}; }, "option '-I/etc' is not allowed"},
      {[](AdhocModule& m) { m.options = {"-Xcompiler=-fplugin=x.so"}; }, "is not allowed"},
      {[](AdhocModule& m) { m.options = {"-DX=\"a\""}; }, "its value holds '\"'"},
      {[](AdhocModule& m) { m.sources = {"csrc/none.cuh"}; }, "csrc/none.cuh"},
  };
  for (const auto& [edit, expected] : cases) {
    AdhocModule spec = Spec();
    edit(spec);
    absl::Status s = Refusal(*r, spec);
    EXPECT_FALSE(s.ok()) << expected;
    EXPECT_THAT(std::string(s.message()), HasSubstr(expected)) << s;
  }
  EXPECT_THAT(std::string(Refusal(*r, Spec(), "team/ew.scale").message()), HasSubstr("is a declared kernel"));
  EXPECT_THAT(std::string(Refusal(*r, Spec(), "team/../x").message()), HasSubstr("is not a name"));
  EXPECT_THAT(std::string(Refusal(*r, Spec(), "other/jit.x").message()), HasSubstr("no kernel tree 'other'"));
  KernelRequest with_params = Adhoc("team/jit.scale", Spec());
  with_params.params = {{"dtype", "bf16"}};
  EXPECT_THAT(std::string(r->Resolve(with_params).status().message()), HasSubstr("takes no params"));
}

}  // namespace
}  // namespace jitd::manifest
