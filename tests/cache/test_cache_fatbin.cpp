// The fatbin container: what WriteFatbin makes (byte for byte what CUDA
// 13.0's fatbinary makes of the same images: fixtures/fatbin/README.md),
// what ReadFatbin gives back, and what either refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jitd/base/coding.h"
#include "jitd/base/files.h"
#include "jitd/fatbin.h"

namespace jitd::fatbin {
namespace {

std::string Fixture(const std::string& name) {
  absl::StatusOr<std::string> bytes = files::ReadWholeFile(std::string(JITD_FATBIN_FIXTURES_DIR) + "/" + name);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

// The fixtures: one kernel as PTX for compute_80 and as cubins, and what
// `fatbinary --compress=false` made of them.
std::string Ptx80() { return Fixture("kernel.compute_80.ptx"); }
std::string Cubin80() { return Fixture("kernel.sm_80.cubin"); }
std::string Cubin90() { return Fixture("kernel.sm_90.cubin"); }
std::string Cubin100a() { return Fixture("kernel.sm_100a.cubin"); }
std::string ToolFatbin() { return Fixture("fatbinary.sm_80.sm_90.compute_80.fatbin"); }
std::string ToolFatbin100a() { return Fixture("fatbinary.sm_100a.fatbin"); }

Image Cubin(int arch, std::string bytes, ArchVariant variant = ArchVariant::kGeneric) {
  return Image{ImageKind::kCubin, arch, std::move(bytes), variant};
}
Image Ptx(int arch, std::string text, ArchVariant variant = ArchVariant::kGeneric) {
  return Image{ImageKind::kPtx, arch, std::move(text), variant};
}

// The three images of the tool's fatbin, in its order.
std::vector<Image> ThreeImages() { return {Cubin(80, Cubin80()), Cubin(90, Cubin90()), Ptx(80, Ptx80())}; }

std::string Write(const std::vector<Image>& images) {
  absl::StatusOr<std::string> out = WriteFatbin(images);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::string();
}

// PTX without its comments and blank space: what the tool's stripping of
// PTX leaves the same.
std::string PtxTokens(std::string_view ptx) {
  std::string out;
  for (size_t i = 0; i < ptx.size(); ++i) {
    if (ptx.substr(i, 2) == "//") {
      i = std::min(ptx.find('\n', i), ptx.size());
    } else if (ptx[i] != ' ' && ptx[i] != '\t' && ptx[i] != '\n') {
      out += ptx[i];
    }
  }
  return out;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

void Put32(std::string& bytes, size_t off, uint32_t v) {
  std::string b;
  coding::PutFixed32(&b, v);
  bytes.replace(off, 4, b);
}
void Put64(std::string& bytes, size_t off, uint64_t v) {
  std::string b;
  coding::PutFixed64(&b, v);
  bytes.replace(off, 8, b);
}

TEST(FatbinFormat, FixturesAreWhatTheReadmeSays) {
  EXPECT_EQ(Cubin80().size(), 3112u);
  EXPECT_EQ(Cubin90().size(), 3568u);
  EXPECT_EQ(Cubin100a().size(), 5144u);
  EXPECT_EQ(Ptx80().size(), 559u);
  EXPECT_EQ(ToolFatbin().size(), 7288u);
  EXPECT_EQ(ToolFatbin100a().size(), 5272u);
}

TEST(FatbinFormat, RoundTripsImagesInOrder) {
  std::vector<Image> images = {Ptx(80, Ptx80()),
                               Cubin(90, Cubin90()),
                               Cubin(100, Cubin100a(), ArchVariant::kArchSpecific),
                               Cubin(80, Cubin80()),
                               Ptx(100, Ptx80(), ArchVariant::kFamilySpecific),
                               Cubin(90, Cubin90(), ArchVariant::kArchSpecific)};
  std::string bytes = Write(images);
  EXPECT_EQ(bytes.size() % 8, 0u);
  absl::StatusOr<std::vector<Image>> back = ReadFatbin(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, images);
}

TEST(FatbinFormat, RoundTripsPtxOfEveryLengthModuloEight) {
  for (size_t extra = 0; extra < 16; ++extra) {
    std::string ptx = ".version 8.5\n.target sm_90\n.address_size 64\n" + std::string(extra, 'x');
    std::string bytes = Write({Ptx(90, ptx)});
    // Text, a NUL, zeros to a multiple of 8, after 16 + 80 bytes of headers.
    EXPECT_EQ(bytes.size(), 16 + 80 + ((ptx.size() + 1 + 7) / 8) * 8) << extra;
    absl::StatusOr<std::vector<Image>> back = ReadFatbin(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->size(), 1u);
    EXPECT_EQ((*back)[0].bytes, ptx);
  }
}

TEST(FatbinFormat, ReadsTheToolsFatbin) {
  absl::StatusOr<std::vector<Image>> images = ReadFatbin(ToolFatbin());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 3u);
  EXPECT_EQ((*images)[0], Cubin(80, Cubin80()));
  EXPECT_EQ((*images)[1], Cubin(90, Cubin90()));
  const Image& ptx = (*images)[2];
  EXPECT_EQ(ptx.kind, ImageKind::kPtx);
  EXPECT_EQ(ptx.arch, 80);
  EXPECT_EQ(ptx.variant, ArchVariant::kGeneric);
  // The tool stores PTX without its comments and indentation.
  EXPECT_LT(ptx.bytes.size(), Ptx80().size());
  EXPECT_EQ(ptx.bytes.find("//"), std::string::npos);
  EXPECT_EQ(PtxTokens(ptx.bytes), PtxTokens(Ptx80()));
}

TEST(FatbinFormat, WritesWhatTheToolWritesByteForByte) {
  // The tool's own images (its PTX as it stored it) make its bytes exactly.
  absl::StatusOr<std::vector<Image>> images = ReadFatbin(ToolFatbin());
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(Write(*images), ToolFatbin());
}

TEST(FatbinFormat, DiffersFromTheToolOnlyInThePtxText) {
  // From the files the tool was given, only the PTX differs: we store it as
  // given, the tool without comments. So the sizes that depend on it differ.
  std::string ours = Write(ThreeImages());
  std::string tool = ToolFatbin();
  const size_t ptx_entry = 16 + 64 + 3112 + 64 + 3568;
  ASSERT_GT(ours.size(), ptx_entry + 80);
  ASSERT_GT(tool.size(), ptx_entry + 80);
  EXPECT_EQ(ours.substr(0, 8), tool.substr(0, 8));                              // magic, version, header size
  EXPECT_EQ(ours.substr(16, ptx_entry - 16), tool.substr(16, ptx_entry - 16));  // both cubin entries
  EXPECT_EQ(ours.substr(ptx_entry, 8), tool.substr(ptx_entry, 8));              // kind, mark, header size
  EXPECT_EQ(ours.substr(ptx_entry + 16, 64), tool.substr(ptx_entry + 16, 64));  // the rest of the header
  const std::string ptx = Ptx80();
  const size_t payload = (ptx.size() + 1 + 7) / 8 * 8;
  EXPECT_EQ(coding::DecodeFixed64(ours.data() + ptx_entry + 8), payload);
  EXPECT_EQ(coding::DecodeFixed64(ours.data() + 8), ours.size() - 16);
  EXPECT_EQ(ours.substr(ptx_entry + 80), ptx + std::string(payload - ptx.size(), '\0'));
}

TEST(FatbinFormat, ArchSpecificCubinIsWhatTheToolWrites) {
  // sm_100a: the arch-specific flag, the flag of an e_flags bit 1 cubin and
  // the options area with the cubin's .nv.compat section.
  absl::StatusOr<std::vector<Image>> images = ReadFatbin(ToolFatbin100a());
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 1u);
  EXPECT_EQ((*images)[0], Cubin(100, Cubin100a(), ArchVariant::kArchSpecific));
  EXPECT_EQ(Write({Cubin(100, Cubin100a(), ArchVariant::kArchSpecific)}), ToolFatbin100a());
  // Without the suffix only the flag differs (bit 20 of the flags at +40).
  std::string generic = Write({Cubin(100, Cubin100a())});
  std::string expected = ToolFatbin100a();
  expected[16 + 40 + 2] = static_cast<char>(expected[16 + 40 + 2] & ~0x10);
  EXPECT_EQ(generic, expected);
}

TEST(FatbinFormat, EntryFieldsOfPtx) {
  std::string ptx = "// comment .version 1.0\n\t.version 7.12\n.target sm_90a\n";
  std::string bytes = Write({Ptx(90, ptx, ArchVariant::kArchSpecific)});
  ASSERT_EQ(bytes.size(), 16u + 80 + 56);
  const char* e = bytes.data() + 16;
  EXPECT_EQ(coding::DecodeFixed32(bytes.data()), 0xBA55ED50u);
  EXPECT_EQ(coding::DecodeFixed16(e), 1);  // kind: PTX
  EXPECT_EQ(coding::DecodeFixed16(e + 2), 0x0101);
  EXPECT_EQ(coding::DecodeFixed32(e + 4), 80u);   // header size
  EXPECT_EQ(coding::DecodeFixed64(e + 8), 56u);   // 54 bytes, a NUL, a zero
  EXPECT_EQ(coding::DecodeFixed32(e + 20), 64u);  // options area
  EXPECT_EQ(coding::DecodeFixed16(e + 24), 12);   // minor
  EXPECT_EQ(coding::DecodeFixed16(e + 26), 7);    // major
  EXPECT_EQ(coding::DecodeFixed32(e + 28), 90u);
  EXPECT_EQ(coding::DecodeFixed64(e + 40), 0x100011u);
  EXPECT_EQ(coding::DecodeFixed32(e + 64), 72u);
  EXPECT_EQ(coding::DecodeFixed32(e + 68), 0u);
}

TEST(FatbinFormat, NamesTargets) {
  EXPECT_EQ(TargetName(Cubin(90, "")), "sm_90");
  EXPECT_EQ(TargetName(Cubin(100, "", ArchVariant::kArchSpecific)), "sm_100a");
  EXPECT_EQ(TargetName(Ptx(100, "", ArchVariant::kFamilySpecific)), "compute_100f");
  EXPECT_EQ(TargetName(Ptx(80, "")), "compute_80");
}

TEST(FatbinFormat, LooksLikeFatbinChecksTheMagic) {
  EXPECT_TRUE(LooksLikeFatbin(ToolFatbin()));
  EXPECT_TRUE(LooksLikeFatbin(Write(ThreeImages())));
  EXPECT_FALSE(LooksLikeFatbin(Cubin80()));
  EXPECT_FALSE(LooksLikeFatbin(Ptx80()));
  EXPECT_FALSE(LooksLikeFatbin(""));
  EXPECT_FALSE(LooksLikeFatbin(ToolFatbin().substr(0, 15)));
}

void ExpectInvalid(const std::vector<Image>& images, std::string_view says) {
  absl::StatusOr<std::string> out = WriteFatbin(images);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(out.status())) << out.status();
  EXPECT_NE(Message(out.status()).find(says), std::string_view::npos) << out.status();
}

TEST(FatbinFormat, WriteRefusesBadImages) {
  ExpectInvalid({}, "no images");
  ExpectInvalid({Cubin(80, Cubin80()), Ptx(80, "")}, "image 1 (PTX compute_80): empty payload");
  ExpectInvalid({Cubin(80, "")}, "image 0 (cubin sm_80): empty payload");
  ExpectInvalid({Cubin(0, Cubin80())}, "arch outside");
  ExpectInvalid({Ptx(70000, Ptx80())}, "arch outside");
  ExpectInvalid({Cubin(80, Cubin80()), Cubin(90, Cubin90()), Cubin(80, Cubin80())},
                "image 2 (cubin sm_80): a second image for its target");
  ExpectInvalid({Ptx(80, Ptx80()), Ptx(80, Ptx80())}, "image 1 (PTX compute_80): a second");
  ExpectInvalid({Ptx(80, Cubin80())}, "PTX is not text: byte 127 at offset 0");
  ExpectInvalid({Ptx(80, Ptx80() + std::string(1, '\0'))}, "PTX is not text: byte 0");
  ExpectInvalid({Ptx(80, ".target sm_80\n")}, "does not begin with a `.version");
  ExpectInvalid({Ptx(80, "/* .version 9.0\n")}, "unterminated");
  ExpectInvalid({Ptx(80, ".version x\n")}, "does not begin with a `.version");
  ExpectInvalid({Cubin(80, Ptx80())}, "not an ELF");
}

TEST(FatbinFormat, WriteRefusesCubinsThatAreNotCudaElf) {
  std::string cubin = Cubin80();
  std::string bad_magic = cubin;
  bad_magic[1] = 'X';
  ExpectInvalid({Cubin(80, bad_magic)}, "no \\x7fELF magic");
  std::string elf32 = cubin;
  elf32[4] = 1;
  ExpectInvalid({Cubin(80, elf32)}, "not a 64-bit little-endian ELF");
  std::string x86 = cubin;
  x86[18] = 62;  // EM_X86_64
  ExpectInvalid({Cubin(80, x86)}, "e_machine 62");
  std::string linux_abi = cubin;
  linux_abi[7] = 3;
  ExpectInvalid({Cubin(80, linux_abi)}, "OS/ABI 3");
  ExpectInvalid({Cubin(90, cubin)}, "image 0 (cubin sm_90): its ELF's e_flags are for sm_80");
  ExpectInvalid({Cubin(80, cubin.substr(0, 40))}, "shorter than its header");
  ExpectInvalid({Cubin(80, cubin.substr(0, cubin.size() - 1))}, "run past the end");
  ExpectInvalid({Cubin(80, cubin + "x")}, "the cubin is 3113 bytes, but its ELF headers and sections end at byte 3112");
  std::string huge_section = cubin;
  const size_t shoff = coding::DecodeFixed64(cubin.data() + 40);
  Put64(huge_section, shoff + 64 + 32, uint64_t{1} << 62);  // section 1's size
  ExpectInvalid({Cubin(80, huge_section)}, "section 1 (");
}

TEST(FatbinFormat, WriteTakesOneArchForPtxAndCubinAndEachVariant) {
  std::vector<Image> images = {Cubin(90, Cubin90()), Ptx(90, Ptx80()),
                               Cubin(90, Cubin90(), ArchVariant::kArchSpecific)};
  EXPECT_TRUE(WriteFatbin(images).ok());
}

void ExpectDataLoss(std::string_view bytes, std::string_view says) {
  absl::StatusOr<std::vector<Image>> images = ReadFatbin(bytes);
  ASSERT_FALSE(images.ok());
  EXPECT_TRUE(absl::IsDataLoss(images.status())) << images.status();
  EXPECT_NE(Message(images.status()).find(says), std::string_view::npos) << images.status();
}

TEST(FatbinFormat, EveryTruncationIsDataLoss) {
  for (const std::string& whole : {Write(ThreeImages()), ToolFatbin(), ToolFatbin100a()}) {
    for (size_t len = 0; len < whole.size(); ++len) {
      absl::StatusOr<std::vector<Image>> images = ReadFatbin(std::string_view(whole).substr(0, len));
      ASSERT_FALSE(images.ok()) << "length " << len;
      EXPECT_TRUE(absl::IsDataLoss(images.status())) << "length " << len << ": " << images.status();
    }
  }
}

TEST(FatbinFormat, DamagedSizesAreDataLoss) {
  const std::string good = Write(ThreeImages());
  ExpectDataLoss(good + std::string(8, '\0'), "corrupt fatbin at offset 7464: 8 bytes after the fatbin's end");
  std::string bytes = good;
  Put64(bytes, 8, good.size());  // the entries' size, 16 too many
  ExpectDataLoss(bytes, "truncated");
  // The first entry's payload size: too large, far too large, too small.
  for (uint64_t size : {uint64_t{3112 + 8}, uint64_t{1} << 63, uint64_t{~0ull}, uint64_t{3112 - 8}, uint64_t{0}}) {
    bytes = good;
    Put64(bytes, 16 + 8, size);
    ExpectDataLoss(bytes, "corrupt fatbin at offset");
  }
  bytes = good;
  Put32(bytes, 16 + 4, 40);  // the first entry's header size
  ExpectDataLoss(bytes, "corrupt fatbin at offset 16: entry header size 40");
  bytes = good;
  Put32(bytes, 16 + 4, 0xffffffff);
  ExpectDataLoss(bytes, "entry header size 4294967295");
  bytes = good;
  Put32(bytes, 16 + 28, 90);  // the first entry's arch, not its cubin's
  ExpectDataLoss(bytes, "entry for arch 90 holds a cubin for sm_80");
  bytes = good;
  bytes[16 + 64] = 'X';  // the first cubin's ELF magic
  ExpectDataLoss(bytes, "corrupt fatbin at offset 80: cubin payload: not an ELF");
  bytes = good;
  bytes.back() = 'x';  // the PTX's last padding byte: no NUL left
  bytes.replace(bytes.size() - 8, 7, "xxxxxxx");
  ExpectDataLoss(bytes, "without its terminating NUL");
  bytes = good;
  bytes[6904] = '\0';  // the PTX's first byte
  ExpectDataLoss(bytes, "corrupt fatbin at offset 6904: empty PTX payload");
  ExpectDataLoss(std::string("\x50\xed\x55\xba\x01\x00\x10\x00", 8) + std::string(8, '\0'), "no entries");
  ExpectDataLoss(Cubin80(), "no fatbin magic");
}

TEST(FatbinFormat, EveryDamagedByteIsReadSafely) {
  // Anything may be read from a damaged fatbin, but never out of bounds
  // (what the sanitizer builds check), and a damaged header is an error.
  const std::string good = Write({Cubin(100, Cubin100a(), ArchVariant::kArchSpecific), Ptx(80, Ptx80())});
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(bytes[i] ^ x);
      absl::StatusOr<std::vector<Image>> images = ReadFatbin(bytes);
      if (i < 16 + 8) {
        EXPECT_FALSE(images.ok()) << "byte " << i;
      }
    }
  }
}

TEST(FatbinFormat, RefusesWhatItDoesNotRead) {
  const std::string good = Write(ThreeImages());
  absl::StatusOr<std::vector<Image>> zstd = ReadFatbin(Fixture("fatbinary.compute_80.zstd.fatbin"));
  EXPECT_TRUE(absl::IsUnimplemented(zstd.status())) << zstd.status();
  EXPECT_NE(Message(zstd.status()).find("at offset 16: ZSTD-compressed entry"), std::string_view::npos)
      << zstd.status();
  std::string lz4 = good;
  lz4[16 + 41] = static_cast<char>(lz4[16 + 41] | 0x20);  // flag 0x2000
  EXPECT_TRUE(absl::IsUnimplemented(ReadFatbin(lz4).status())) << ReadFatbin(lz4).status();
  std::string ltoir = good;
  ltoir[16] = 8;
  EXPECT_TRUE(absl::IsUnimplemented(ReadFatbin(ltoir).status())) << ReadFatbin(ltoir).status();
  std::string v2 = good;
  v2[4] = 2;
  EXPECT_TRUE(absl::IsUnimplemented(ReadFatbin(v2).status())) << ReadFatbin(v2).status();
}

}  // namespace
}  // namespace jitd::fatbin
