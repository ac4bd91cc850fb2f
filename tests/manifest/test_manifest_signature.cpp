// Kernel signatures: a declared argument list and a compiled entry point's
// lowered name reduce to the same argument kinds when they agree, and the
// compile-all guard's comparison names what differs when they do not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "manifest/manifest.h"
#include "manifest/signature.h"

namespace jitd::manifest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// As NVRTC lowers sglang::moe::topk_sum_kernel<__nv_bfloat16>(T*, const T*,
// int64_t, int32_t, int64_t) and rmsnorm_kernel<float, 256>, with int64_t
// as `long long`, and a non-template function (no return type encoded).
constexpr const char* kTopkSum = "_ZN6sglang3moe15topk_sum_kernelI13__nv_bfloat16EEvPT_PKS3_xix";
constexpr const char* kRmsnorm = "_ZN6sglang4norm14rmsnorm_kernelIfLi256EEEvPT_PKS2_S5_xxf";
constexpr const char* kAlign = "_ZN6sglang3moe5alignEPKixiiPiS3_S3_";
// sglang::ew::axpy_kernel<float>(const __grid_constant__ Params<float>) and
// sglang::ew::plain_kernel(const Plain, int, float*): structs by value.
constexpr const char* kAxpyParams = "_ZN6sglang2ew11axpy_kernelIfEEvNS0_6ParamsIT_EE";
constexpr const char* kPlainStruct = "_ZN6sglang2ew12plain_kernelENS0_5PlainEiPf";

TEST(Signature, ADeclaredListReducesToPointersAndScalarWidths) {
  auto args = DeclaredArgs("(T* out, const T* in, int64_t rows, int32_t topk, int64_t dim)");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ElementsAre("pointer", "const pointer", "int64", "int32", "int64"));
  auto spaced = DeclaredArgs(" ( T const *  __restrict__ x ,\n unsigned int n, float eps, bool flag, double d ) ");
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_THAT(*spaced, ElementsAre("const pointer", "uint32", "float32", "bool", "float64"));
  EXPECT_THAT(*DeclaredArgs("()"), ElementsAre());
}

TEST(Signature, ACompiledEntryPointReducesToTheSameKinds) {
  auto topk = CompiledArgs(kTopkSum);
  ASSERT_TRUE(topk.ok()) << topk.status();
  EXPECT_EQ(*topk, *DeclaredArgs("(T* out, const T* in, int64_t rows, int32_t topk, int64_t dim)"));
  auto rms = CompiledArgs(kRmsnorm);
  ASSERT_TRUE(rms.ok()) << rms.status();
  EXPECT_THAT(*rms, ElementsAre("pointer", "const pointer", "const pointer", "int64", "int64", "float32"));
  auto align = CompiledArgs(kAlign);
  ASSERT_TRUE(align.ok()) << align.status();
  EXPECT_THAT(*align, ElementsAre("const pointer", "int64", "int32", "int32", "pointer", "pointer", "pointer"));
}

TEST(Signature, AStructPassedByValueIsNamedOnBothSides) {
  auto declared = DeclaredArgs("(const __grid_constant__ Params<T> p)");
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_THAT(*declared, ElementsAre("struct Params"));
  auto compiled = CompiledArgs(kAxpyParams);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(*compiled, *declared);
  auto plain = CompiledArgs(kPlainStruct);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, *DeclaredArgs("(struct Plain p, int n, float* y)"));
  EXPECT_NE(*plain, *DeclaredArgs("(const __grid_constant__ Other p, int n, float* y)"));
  // Undeclared as a struct, an unknown type is still a mistake.
  EXPECT_THAT(DeclaredArgs("(Params p)").status().message(), HasSubstr("`const __grid_constant__ NAME`"));
}

TEST(Signature, WhatCannotBeReadIsSaid) {
  EXPECT_THAT(DeclaredArgs("T* out, int n").status().message(), HasSubstr("not an argument list in parentheses"));
  EXPECT_THAT(DeclaredArgs("(T* out, int)").status().message(), HasSubstr("'int' needs a type and a name"));
  EXPECT_THAT(DeclaredArgs("(T* out, half h)").status().message(),
              HasSubstr("has type 'half', which is neither a pointer nor a fixed-width scalar"));
  EXPECT_THAT(CompiledArgs("not_mangled").status().message(), HasSubstr("does not demangle"));
}

TEST(Signature, TheManifestRefusesASignatureItCannotRead) {
  auto m = Manifest::Parse(R"toml(
schema = 1
[[kernel]]
name = "k.one"
source = "one.cu"
name_expressions = ["sglang::one"]
signature = "(T* out, half h)"
)toml",
                           "kernels.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("kernels.toml:7: kernel k.one: signature argument 'half h'"));
}

// Entry points of different signatures: one list per name expression.
absl::StatusOr<Manifest> WithSignatures(const std::string& lines) {
  return Manifest::Parse(R"toml(
schema = 1
[[kernel]]
name = "ew.pair"
source = "pair.cu"
name_expressions = ["sglang::ew::axpy<{dtype}>", "sglang::ew::scale<{dtype}>"]
)toml" + lines + R"toml(
  [[kernel.params]]
  name = "dtype"
  type = "dtype"
  values = { fp32 = "float" }
)toml",
                         "kernels.toml");
}

TEST(Signature, EachEntryPointMayDeclareItsOwn) {
  auto m = WithSignatures(R"toml(
  [kernel.signatures]
  "sglang::ew::scale<{dtype}>" = "(T* out, const T* x, float a, int64_t n)"
  "sglang::ew::axpy<{dtype}>" = "(const __grid_constant__ Params<T> p)"
)toml");
  ASSERT_TRUE(m.ok()) << m.status();
  const KernelDef& k = m->kernels.at(0);
  EXPECT_EQ(k.SignatureOf(0), "(const __grid_constant__ Params<T> p)");
  EXPECT_EQ(k.SignatureOf(1), "(T* out, const T* x, float a, int64_t n)");
  EXPECT_EQ(k.SignatureText(),
            "sglang::ew::axpy<{dtype}> (const __grid_constant__ Params<T> p); "
            "sglang::ew::scale<{dtype}> (T* out, const T* x, float a, int64_t n)");
}

TEST(Signature, PerEntrySignaturesMustNameEveryEntryAndNothingElse) {
  EXPECT_THAT(WithSignatures(R"toml(
  [kernel.signatures]
  "sglang::ew::axpy<{dtype}>" = "(const __grid_constant__ Params<T> p)"
)toml")
                  .status()
                  .message(),
              HasSubstr("gives no argument list for 'sglang::ew::scale<{dtype}>'"));
  EXPECT_THAT(WithSignatures(R"toml(
  [kernel.signatures]
  "sglang::ew::axpy<{dtype}>" = "(const __grid_constant__ Params<T> p)"
  "sglang::ew::scale<{dtype}>" = "(T* out)"
  "sglang::ew::other<{dtype}>" = "(T* out)"
)toml")
                  .status()
                  .message(),
              HasSubstr("names 'sglang::ew::other<{dtype}>', which is not one of its name_expressions"));
  EXPECT_THAT(WithSignatures(R"toml(
signature = "(T* out)"
  [kernel.signatures]
  "sglang::ew::axpy<{dtype}>" = "(T* out)"
  "sglang::ew::scale<{dtype}>" = "(T* out)"
)toml")
                  .status()
                  .message(),
              HasSubstr("not both"));
  EXPECT_THAT(WithSignatures(R"toml(
  [kernel.signatures]
  "sglang::ew::axpy<{dtype}>" = "(half h)"
  "sglang::ew::scale<{dtype}>" = "(T* out)"
)toml")
                  .status()
                  .message(),
              HasSubstr("sglang::ew::axpy<{dtype}>: signature argument 'half h'"));
}

}  // namespace
}  // namespace jitd::manifest
