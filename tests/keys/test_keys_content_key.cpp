// Content keys change exactly when the compiled bytes could: one byte of an
// included header changes the key of every kernel that includes it and of
// no other; paths, mtimes and include-path options never do.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "jitd/keys/content_key.h"
#include "testing.h"

namespace jitd::keys {
namespace {

namespace fs = std::filesystem;
using cache::testing::TempDir;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A little kernels tree: a.cu and b.cu share common/dtype.cuh; only a.cu
// includes moe/topk.cuh (through a quoted relative include); c.cu includes
// nothing of ours.
class KernelTree : public ::testing::Test {
 protected:
  void SetUp() override {
    Write(root() / "common/dtype.cuh", "#pragma once\nnamespace sglang { using f = float; }\n");
    Write(root() / "common/math.cuh", "#pragma once\n#include \"dtype.cuh\"\n");
    Write(root() / "moe/topk.cuh", "#pragma once\n#include <common/math.cuh>\n");
    Write(root() / "moe/a.cu", "#include \"topk.cuh\"\n#include <cuda_bf16.h>\nnamespace sglang {}\n");
    Write(root() / "norm/b.cu", "  #  include \"common/dtype.cuh\"\nnamespace sglang {}\n");
    Write(root() / "norm/c.cu", "#include <cuda_fp16.h>\n#if 0\n#include \"missing.cuh\"\n#endif\n");
  }
  fs::path root() const { return dir_.path() / "kernels"; }

  std::string KeyOf(const std::string& source, const fs::path& tree) {
    auto closure = IncludeClosure(tree, source);
    EXPECT_TRUE(closure.ok()) << closure.status();
    KeyInputs in;
    in.nvrtc_version = "13.0";
    in.toolkit_fingerprint = "toolkit";
    in.arch = "sm_90";
    in.options = {"-std=c++17", "-I" + tree.string()};
    in.name_expressions = {"sglang::k<float>"};
    for (const auto& rel : *closure) in.sources.emplace_back(rel.generic_string(), Read(tree / rel));
    return ContentKey(in);
  }
  std::string KeyOf(const std::string& source) { return KeyOf(source, root()); }

  TempDir dir_;
};

TEST_F(KernelTree, ClosureFollowsQuotedAndAngleIncludesInsideTheTreeOnly) {
  auto a = IncludeClosure(root(), "moe/a.cu");
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<fs::path> want = {"moe/a.cu", "common/dtype.cuh", "common/math.cuh", "moe/topk.cuh"};
  EXPECT_EQ(*a, want);
  auto c = IncludeClosure(root(), "norm/c.cu");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size(), 1u) << "toolkit headers and missing files are not project headers";
}

TEST_F(KernelTree, MissingSourceIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(IncludeClosure(root(), "nope.cu").status()));
  EXPECT_TRUE(absl::IsNotFound(IncludeClosure(root(), "../outside.cu").status()));
}

TEST_F(KernelTree, OneByteInASharedHeaderChangesExactlyTheKeysOfItsIncluders) {
  std::string a = KeyOf("moe/a.cu"), b = KeyOf("norm/b.cu"), c = KeyOf("norm/c.cu");
  Write(root() / "common/dtype.cuh", "#pragma once\nnamespace sglang { using f = double; }\n");
  EXPECT_NE(KeyOf("moe/a.cu"), a) << "a.cu includes dtype.cuh through two levels";
  EXPECT_NE(KeyOf("norm/b.cu"), b);
  EXPECT_EQ(KeyOf("norm/c.cu"), c);
}

TEST_F(KernelTree, AHeaderOnlyOneKernelIncludesChangesOnlyThatKey) {
  std::string a = KeyOf("moe/a.cu"), b = KeyOf("norm/b.cu");
  Write(root() / "moe/topk.cuh", Read(root() / "moe/topk.cuh") + "// comment\n");
  EXPECT_NE(KeyOf("moe/a.cu"), a);
  EXPECT_EQ(KeyOf("norm/b.cu"), b);
}

TEST_F(KernelTree, ModificationTimeAndLocationDoNotChangeKeys) {
  std::string a = KeyOf("moe/a.cu");
  fs::last_write_time(root() / "common/dtype.cuh", fs::file_time_type::clock::now() + std::chrono::hours(1));
  EXPECT_EQ(KeyOf("moe/a.cu"), a);
  fs::path moved = dir_.path() / "elsewhere" / "kernels";
  fs::create_directories(moved.parent_path());
  fs::copy(root(), moved, fs::copy_options::recursive);
  EXPECT_EQ(KeyOf("moe/a.cu", moved), a) << "the tree's location (and its -I path) is not part of the key";
}

// IncludeNames: what NVRTC is given from memory for the same tree.
std::map<std::string, std::string> InMemory(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files[entry.path().lexically_relative(root).generic_string()] = Read(entry.path());
  }
  return files;
}

TEST_F(KernelTree, IncludeNamesGivesEverySpellingOfTheClosure) {
  auto names = IncludeNames(InMemory(root()), "moe/a.cu");
  ASSERT_TRUE(names.ok()) << names.status();
  // a.cu: "topk.cuh" (beside it); topk.cuh: <common/math.cuh>; math.cuh:
  // "dtype.cuh" (beside it). <cuda_bf16.h> is the toolkit's.
  std::vector<IncludeName> want = {
      {"common/math.cuh", "common/math.cuh"}, {"dtype.cuh", "common/dtype.cuh"}, {"topk.cuh", "moe/topk.cuh"}};
  EXPECT_EQ(*names, want);
  auto b = IncludeNames(InMemory(root()), "norm/b.cu");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<IncludeName>{{"common/dtype.cuh", "common/dtype.cuh"}}));
  EXPECT_TRUE(absl::IsNotFound(IncludeNames(InMemory(root()), "nope.cu").status()));
}

TEST_F(KernelTree, IncludeNamesRefusesOneSpellingForTwoFiles) {
  Write(root() / "norm/dtype.cuh", "#pragma once\n");
  Write(root() / "norm/d.cu", "#include \"dtype.cuh\"\n#include \"common/math.cuh\"\n");
  auto names = IncludeNames(InMemory(root()), "norm/d.cu");
  ASSERT_TRUE(absl::IsInvalidArgument(names.status())) << names.status();
  EXPECT_NE(names.status().message().find("norm/dtype.cuh"), std::string_view::npos) << names.status();
  EXPECT_NE(names.status().message().find("common/dtype.cuh"), std::string_view::npos) << names.status();
}

TEST(IncludeDirectives, EachDirectiveWithItsLineAndTheFilesItMayMean) {
  const auto directives =
      IncludeDirectives("a/k.cu",
                        "// #include \"not.cuh\" in a comment\n  #  include \"util.cuh\"\n#include <common/t.cuh>\n"
                        "#include \"../../outside.cuh\"\n#if 0\n#include \"off.inc\"\n#endif\n");
  ASSERT_EQ(directives.size(), 4u);
  EXPECT_EQ(directives[0].spelled, "util.cuh");
  EXPECT_EQ(directives[0].line, 2);
  EXPECT_EQ(directives[0].candidates, (std::vector<std::string>{"a/util.cuh", "util.cuh"}));
  EXPECT_EQ(directives[1].candidates, (std::vector<std::string>{"common/t.cuh"}));
  EXPECT_TRUE(directives[2].candidates.empty()) << "a path out of the root is the toolkit's";
  EXPECT_EQ(directives[3].spelled, "off.inc") << "whatever the conditions around it";
  EXPECT_EQ(directives[3].line, 6);
}

TEST(IncludeDirectives, AMegabyteLongNameIsNoFileOfTheTreeAndNoCrash) {
  // std::regex recurses per character matched: matched whole, this name
  // overflowed the stack.
  const std::string source = "#include \"" + std::string(size_t{1} << 20, 'a') + ".cuh\"\n#include \"b.cuh\"\n";
  const auto directives = IncludeDirectives("k.cu", source);
  ASSERT_EQ(directives.size(), 1u);
  EXPECT_EQ(directives[0].spelled, "b.cuh");
  EXPECT_TRUE(IncludeNames({{"k.cu", source}, {"b.cuh", ""}}, "k.cu").ok());
}

TEST(FilesFingerprint, ChangesWithContentAndIsRemembered) {
  TempDir dir;
  Write(dir.path() / "lib/libnvrtc.so.13", "one");
  Write(dir.path() / "lib/libnvrtc-builtins.so.13.0", "two");
  std::vector<fs::path> files = {dir.path() / "lib/libnvrtc.so.13", dir.path() / "lib/libnvrtc-builtins.so.13.0"};
  auto a = FilesFingerprint(files);
  ASSERT_TRUE(a.ok()) << a.status();
  auto memo = MemoizedFilesFingerprint(files, dir.path() / "memo", std::chrono::nanoseconds(0));
  ASSERT_TRUE(memo.ok());
  EXPECT_EQ(*memo, *a);
  auto meta = FilesMetadataDigest(files, std::chrono::nanoseconds(0), nullptr);
  ASSERT_TRUE(meta.ok());
  Write(dir.path() / "lib/libnvrtc.so.13", "One");
  EXPECT_NE(*FilesFingerprint(files), *a);
  EXPECT_NE(*MemoizedFilesFingerprint(files, dir.path() / "memo", std::chrono::nanoseconds(0)), *a);
  EXPECT_NE(*FilesMetadataDigest(files, std::chrono::nanoseconds(0), nullptr), *meta);
  fs::remove(files[1]);
  EXPECT_TRUE(absl::IsNotFound(FilesMetadataDigest(files, std::chrono::nanoseconds(0), nullptr).status()));
}

TEST(ContentKey, EveryInputMatters) {
  KeyInputs base;
  base.nvrtc_version = "13.0";
  base.toolkit_fingerprint = "t";
  base.arch = "sm_90";
  base.options = {"-std=c++17"};
  base.name_expressions = {"sglang::k<float>"};
  base.sources = {{"k.cu", "source"}};
  const std::string key = ContentKey(base);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_TRUE(cache::IsValidKey(key));
  auto differs = [&](auto mutate) {
    KeyInputs k = base;
    mutate(k);
    return ContentKey(k) != key;
  };
  EXPECT_TRUE(differs([](KeyInputs& k) { k.nvrtc_version = "13.1"; }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.toolkit_fingerprint = "u"; }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.nvrtc_library_fingerprint = "a patch release of libnvrtc"; }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.arch = "sm_90a"; }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.options.push_back("-lineinfo"); }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.name_expressions = {"sglang::k<double>"}; }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.sources[0].second += " "; }));
  EXPECT_TRUE(differs([](KeyInputs& k) { k.sources[0].first = "j.cu"; }));
  // A named tree's entries are its own; the unnamed tree's keys are unchanged.
  EXPECT_TRUE(differs([](KeyInputs& k) { k.tree = "team"; }));
  EXPECT_FALSE(differs([](KeyInputs& k) { k.tree = ""; }));
  // Field boundaries are part of the hash.
  EXPECT_TRUE(differs([](KeyInputs& k) { k.options = {"-std=c++1", "7"}; }));
  // Neutral: include paths and precompiled-header options.
  EXPECT_FALSE(differs([](KeyInputs& k) { k.options.push_back("-I/usr/local/cuda/include"); }));
  EXPECT_FALSE(differs([](KeyInputs& k) { k.options.insert(k.options.begin(), "-pch"); }));
  EXPECT_FALSE(differs([](KeyInputs& k) { k.options.push_back("--pch-dir=/tmp/x"); }));
  // Source order does not matter.
  base.sources.push_back({"h.cuh", "header"});
  std::string two = ContentKey(base);
  std::swap(base.sources[0], base.sources[1]);
  EXPECT_EQ(ContentKey(base), two);
}

TEST(TreeFingerprint, ChangesWithContentAndNamesNotLocation) {
  TempDir a, b;
  Write(a.path() / "x/y.h", "one");
  Write(b.path() / "x/y.h", "one");
  auto fa = TreeFingerprint(a.path());
  ASSERT_TRUE(fa.ok());
  EXPECT_EQ(*fa, *TreeFingerprint(b.path()));
  Write(b.path() / "x/y.h", "two");
  EXPECT_NE(*fa, *TreeFingerprint(b.path()));
  Write(b.path() / "x/y.h", "one");
  Write(b.path() / "x/z.h", "");
  EXPECT_NE(*fa, *TreeFingerprint(b.path()));
}

// One rule for a tree's fingerprint: the files held in memory (a kernel
// tree) and the same files in a directory give the same digest.
TEST(TreeFingerprint, OfFilesInMemoryIsTheDirectorysOfTheSameFiles) {
  TempDir dir;
  const std::map<std::string, std::string> files = {
      {"kernels.toml", "namespace = \"sglang\"\n"}, {"common/dtype.cuh", "#pragma once\n"}, {"a-b.cu", ""}};
  for (const auto& [name, content] : files) Write(dir.path() / name, content);
  auto on_disk = TreeFingerprint(dir.path());
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(TreeFingerprint(files), *on_disk);
  auto changed = files;
  changed["a-b.cu"] = "x";
  EXPECT_NE(TreeFingerprint(changed), *on_disk);
}

// The memo's three lines: header, metadata digest, fingerprint.
std::vector<std::string> MemoLines(const fs::path& memo) {
  std::ifstream in(memo);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void WriteMemo(const fs::path& memo, const std::vector<std::string>& lines) {
  std::ofstream out(memo, std::ios::trunc);
  for (const auto& line : lines) out << line << "\n";
}

TEST(MemoizedTreeFingerprint, AnswersTheFingerprintAndRemembersIt) {
  TempDir tree, cache;
  Write(tree.path() / "a.h", "alpha");
  Write(tree.path() / "sub/b.h", "beta");
  const fs::path memo = cache.path() / "memo";
  auto first = MemoizedTreeFingerprint(tree.path(), memo, std::chrono::nanoseconds(0));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, *TreeFingerprint(tree.path()));
  ASSERT_EQ(MemoLines(memo).size(), 3u);
  EXPECT_EQ(MemoLines(memo)[2], *first);

  // With the files' metadata unchanged the memo is the answer: the
  // contents are not read (a memo edited by hand shows it).
  std::vector<std::string> lines = MemoLines(memo);
  lines[2] = std::string(64, 'f');
  WriteMemo(memo, lines);
  EXPECT_EQ(*MemoizedTreeFingerprint(tree.path(), memo, std::chrono::nanoseconds(0)), std::string(64, 'f'));
}

TEST(MemoizedTreeFingerprint, AnyChangeToTheTreeMissesTheMemo) {
  TempDir tree, cache;
  Write(tree.path() / "a.h", "alpha");
  const fs::path memo = cache.path() / "memo";
  const auto kNow = std::chrono::nanoseconds(0);
  ASSERT_TRUE(MemoizedTreeFingerprint(tree.path(), memo, kNow).ok());
  auto poison = [&] {  // a memo that would answer wrongly if it were used
    std::vector<std::string> lines = MemoLines(memo);
    ASSERT_EQ(lines.size(), 3u);
    lines[2] = std::string(64, 'f');
    WriteMemo(memo, lines);
  };

  // Same size, same name, new content, written through a new file (as a
  // package upgrade does): a new inode.
  poison();
  Write(tree.path() / "a.h.new", "ALPHA");
  fs::rename(tree.path() / "a.h.new", tree.path() / "a.h");
  EXPECT_EQ(*MemoizedTreeFingerprint(tree.path(), memo, kNow), *TreeFingerprint(tree.path()));

  // Same size, rewritten in place with an explicit older mtime.
  poison();
  Write(tree.path() / "a.h", "alpha");
  fs::last_write_time(tree.path() / "a.h", fs::file_time_type::clock::now() - std::chrono::hours(24));
  EXPECT_EQ(*MemoizedTreeFingerprint(tree.path(), memo, kNow), *TreeFingerprint(tree.path()));

  // A file added, then removed.
  poison();
  Write(tree.path() / "new.h", "");
  EXPECT_EQ(*MemoizedTreeFingerprint(tree.path(), memo, kNow), *TreeFingerprint(tree.path()));
  poison();
  fs::remove(tree.path() / "new.h");
  EXPECT_EQ(*MemoizedTreeFingerprint(tree.path(), memo, kNow), *TreeFingerprint(tree.path()));
}

TEST(MemoizedTreeFingerprint, FreshlyWrittenFilesAreNotRemembered) {
  TempDir tree, cache;
  Write(tree.path() / "a.h", "alpha");
  const fs::path memo = cache.path() / "memo";
  // The file was written just now, within the default racy window: its
  // timestamps could still match a later same-tick write.
  auto fp = MemoizedTreeFingerprint(tree.path(), memo);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(*fp, *TreeFingerprint(tree.path()));
  EXPECT_FALSE(fs::exists(memo));
}

TEST(MemoizedTreeFingerprint, AGarbledMemoIsIgnored) {
  TempDir tree, cache;
  Write(tree.path() / "a.h", "alpha");
  const fs::path memo = cache.path() / "memo";
  WriteMemo(memo, {"not a memo"});
  auto fp = MemoizedTreeFingerprint(tree.path(), memo, std::chrono::nanoseconds(0));
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(*fp, *TreeFingerprint(tree.path()));
  EXPECT_EQ(MemoLines(memo).size(), 3u);  // rewritten
}

}  // namespace
}  // namespace jitd::keys
