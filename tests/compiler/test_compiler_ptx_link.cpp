// ptx_link: unused module-scope globals leave the PTX, and a compile that
// had them gets a cubin assembled from what is left, with the same code.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "compiler/nvrtc_program.h"
#include "compiler/ptx_link.h"
#include "scoped_env.h"
#include "test_programs.h"

namespace jitd::compiler {
namespace {

// The sections of an ELF64 cubin by name, and how many data symbols
// (STT_OBJECT) its symbol table holds.
struct Elf {
  std::map<std::string, std::string> sections;
  int objects = 0;
};

Elf ReadElf(const std::string& image) {
  Elf elf;
  if (image.size() < sizeof(Elf64_Ehdr)) return elf;
  Elf64_Ehdr header;
  std::memcpy(&header, image.data(), sizeof header);
  auto section = [&](int i) {
    Elf64_Shdr s;
    std::memcpy(&s, image.data() + header.e_shoff + i * sizeof(Elf64_Shdr), sizeof s);
    return s;
  };
  const Elf64_Shdr names = section(header.e_shstrndx);
  for (int i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr s = section(i);
    const std::string name = image.c_str() + names.sh_offset + s.sh_name;
    elf.sections[name] = s.sh_type == SHT_NOBITS ? std::string() : image.substr(s.sh_offset, s.sh_size);
    if (s.sh_type == SHT_SYMTAB) {
      for (size_t at = 0; at + sizeof(Elf64_Sym) <= s.sh_size; at += sizeof(Elf64_Sym)) {
        Elf64_Sym symbol;
        std::memcpy(&symbol, image.data() + s.sh_offset + at, sizeof symbol);
        elf.objects += ELF64_ST_TYPE(symbol.st_info) == STT_OBJECT ? 1 : 0;
      }
    }
  }
  return elf;
}

constexpr char kPtx[] = R"(.version 9.0
.target sm_90
.address_size 64

.global .align 1 .u8 _ZN4cuda3std17integral_constantIbLb0EE5valueE;
.global .align 8 .u64 _ZN4cuda3std17integral_constantImLm0EE5valueE = 1;
.global .align 4 .u32 used_by_code;
.global .align 4 .u32 used_by_initializer = 7;
.global .align 8 .u64 points_at_it = generic(used_by_initializer);
.visible .global .align 4 .u32 host_visible;
.const .align 4 .u32 a_constant;
.global .align 4 .b8 spans_lines[8] = {1, 2, 3, 4,
5, 6, 7, 8};

.visible .entry k(.param .u64 k_param_0)
{
	ld.global.u32 	%r1, [used_by_code];
	ld.global.u64 	%rd1, [points_at_it];
	ret;
}
)";

TEST(PtxLink, DropsOnlyModuleGlobalsThatNothingNames) {
  const StrippedPtx out = DropUnreferencedGlobals(kPtx);
  EXPECT_EQ(out.dropped, 2u);
  EXPECT_EQ(out.ptx.find("integral_constantIbLb0EE5valueE"), std::string::npos);
  EXPECT_EQ(out.ptx.find("integral_constantImLm0EE5valueE"), std::string::npos);
  for (const char* kept :
       {".global .align 4 .u32 used_by_code;", ".global .align 4 .u32 used_by_initializer = 7;",
        "points_at_it = generic(used_by_initializer);", ".visible .global .align 4 .u32 host_visible;",
        ".const .align 4 .u32 a_constant;", "spans_lines[8] = {1, 2, 3, 4,", ".visible .entry k"}) {
    EXPECT_NE(out.ptx.find(kept), std::string::npos) << kept;
  }
  // Only the two lines went; everything else is byte for byte the input.
  std::string expected = kPtx;
  for (const char* line : {".global .align 1 .u8 _ZN4cuda3std17integral_constantIbLb0EE5valueE;\n",
                           ".global .align 8 .u64 _ZN4cuda3std17integral_constantImLm0EE5valueE = 1;\n"}) {
    expected.erase(expected.find(line), std::strlen(line));
  }
  EXPECT_EQ(out.ptx, expected);
}

TEST(PtxLink, PtxWithoutDeadGlobalsIsUnchanged) {
  const std::string ptx = ".version 9.0\n.global .align 4 .u32 x;\n{ ld.global.u32 %r1, [x]; }\n";
  const StrippedPtx out = DropUnreferencedGlobals(ptx);
  EXPECT_EQ(out.dropped, 0u);
  EXPECT_EQ(out.ptx, ptx);
}

TEST(PtxLink, OptionsCarryWhatPtxasHonoursAndRefuseWhatTheyCannot) {
  using V = std::vector<std::string>;
  EXPECT_EQ(PtxLinkOptions(testing::BaseOptions()), V({"-arch=sm_90"}));
  V options = testing::BaseOptions();
  for (const char* o : {"--generate-line-info", "--maxrregcount=64", "--fmad=false", "--ftz=true", "-DX=1"}) {
    options.push_back(o);
  }
  EXPECT_EQ(PtxLinkOptions(options), V({"-arch=sm_90", "-lineinfo", "--maxrregcount=64", "--fmad=false"}));
  for (const char* o : {"--device-debug", "-G", "-Xptxas=-O1", "--ptxas-options=-v", "-dlto", "-rdc=true"}) {
    V with = testing::BaseOptions();
    with.push_back(o);
    EXPECT_TRUE(PtxLinkOptions(with).empty()) << o;
  }
  EXPECT_TRUE(PtxLinkOptions({"-arch=compute_90", "-std=c++17"}).empty());
  EXPECT_TRUE(PtxLinkOptions({"-std=c++17"}).empty()) << "no architecture, nothing to assemble for";
}

// The CUB kernel is the case the route exists for: NVRTC's own cubin (kept
// when an option the route cannot carry is present: --ptxas-options=-O3 is
// ptxas's default) carries hundreds of data symbols; the assembled one none
// of them, and the kernel's machine code is the same bytes.
TEST(PtxLink, ACubKernelLosesItsDeadGlobalsAndKeepsItsCode) {
  const CompileJob job = testing::CubJob(256);
  CompileJob nvrtc_only = job;
  nvrtc_only.options.push_back("--ptxas-options=-O3");
  absl::StatusOr<CompileResult> assembled = CompileInProcess(job, nullptr, nullptr);
  absl::StatusOr<CompileResult> reference = CompileInProcess(nvrtc_only, nullptr, nullptr);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const Elf a = ReadElf(assembled->cubin);
  const Elf r = ReadElf(reference->cubin);
  EXPECT_GT(r.objects, 400) << "NVRTC's cubin of a CUB kernel carries CCCL's constexpr members";
  EXPECT_LT(a.objects, 10);
  EXPECT_LT(assembled->cubin.size() * 4, reference->cubin.size());
  ASSERT_EQ(assembled->lowered_names.size(), 1u);
  const std::string text = ".text." + assembled->lowered_names[0].second;
  ASSERT_TRUE(a.sections.count(text)) << text;
  ASSERT_TRUE(r.sections.count(text)) << text;
  EXPECT_EQ(a.sections.at(text), r.sections.at(text)) << "the kernel's machine code must not change";
  // Deterministic: the same job gives the same bytes again.
  absl::StatusOr<CompileResult> again = CompileInProcess(job, nullptr, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cubin, assembled->cubin);
}

// Without dead globals NVRTC's cubin is kept: every section is the
// reference's but the note that records ptxas's options ("-O 3" there).
TEST(PtxLink, AKernelWithoutCcclKeepsNvrtcsCubin) {
  const CompileJob job = testing::TrivialJob();
  CompileJob nvrtc_only = job;
  nvrtc_only.options.push_back("--ptxas-options=-O3");
  absl::StatusOr<CompileResult> a = CompileInProcess(job, nullptr, nullptr);
  absl::StatusOr<CompileResult> r = CompileInProcess(nvrtc_only, nullptr, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(r.ok()) << r.status();
  Elf ea = ReadElf(a->cubin);
  Elf er = ReadElf(r->cubin);
  EXPECT_EQ(ea.objects, er.objects);
  ea.sections.erase(".note.nv.tkinfo");
  er.sections.erase(".note.nv.tkinfo");
  EXPECT_EQ(ea.sections, er.sections);
}

// The assembly's files live in a private directory made straight in
// TMPDIR and removed afterwards: nothing is left, and nothing shared.
TEST(PtxLink, ACompileLeavesNothingInTmpdir) {
  const std::filesystem::path tmp = std::filesystem::path(::testing::TempDir()) / "ptx_link_tmpdir";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  absl::StatusOr<CompileResult> result = [&] {
    const jitd::testing::ScopedEnv tmpdir("TMPDIR", tmp.c_str());
    return CompileInProcess(testing::CubJob(128), nullptr, nullptr);
  }();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LT(ReadElf(result->cubin).objects, 10) << "the cubin went through the PTX route";
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
}

TEST(PtxLink, TheToolkitsPtxasIsFoundBesideNvrtc) {
  absl::StatusOr<std::filesystem::path> ptxas = ToolkitPtxas();
  ASSERT_TRUE(ptxas.ok()) << ptxas.status();
  EXPECT_EQ(ptxas->filename(), "ptxas");
}

TEST(PtxLink, AssemblyErrorsCarryPtxassOutputAndLeaveNothingBehind) {
  absl::StatusOr<std::filesystem::path> ptxas = ToolkitPtxas();
  ASSERT_TRUE(ptxas.ok()) << ptxas.status();
  const std::filesystem::path scratch = std::filesystem::path(::testing::TempDir()) / "ptx_link_errors";
  std::filesystem::remove_all(scratch);
  absl::StatusOr<std::string> cubin =
      AssemblePtx(".version 9.0\n.target sm_90\nnot ptx at all;\n", {"-arch=sm_90"}, *ptxas, scratch);
  ASSERT_FALSE(cubin.ok());
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(cubin.status().message().find("ptxas could not assemble the PTX (exit "), std::string::npos)
      << cubin.status();
  EXPECT_NE(cubin.status().message().find("syntax error"), std::string::npos) << cubin.status();
  EXPECT_TRUE(std::filesystem::is_empty(scratch)) << "the scratch directory is removed";
}

}  // namespace
}  // namespace jitd::compiler
