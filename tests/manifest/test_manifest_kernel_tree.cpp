// Reading a kernel tree: only what its kernels can reach (and what the
// guard scans), within bounds, never a byte from outside the tree, and a
// filesystem error a refusal, never an exception.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "manifest/manifest.h"
#include "testing.h"

namespace jitd::manifest {
namespace {

namespace fs = std::filesystem;
using cache::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

void Write(const fs::path& file, const std::string& content) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << content;
}

// A sparse file of `bytes`: as large as a stat says, costing no disk.
void Sparse(const fs::path& file, off_t bytes) {
  fs::create_directories(file.parent_path());
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, bytes), 0);
  ::close(fd);
}

constexpr char kManifest[] =
    "schema = 1\n[defaults]\noptions = [\"-std=c++17\"]\n"
    "[[kernel]]\nname = \"t.k\"\nsource = \"k.cu\"\nname_expressions = [\"sglang::k\"]\n";

// kernels.toml and k.cu, which includes act/config.inc.
fs::path Tree(const TempDir& dir) {
  const fs::path root = dir.path() / "tree";
  Write(root / "kernels.toml", kManifest);
  Write(root / "k.cu", "#include \"act/config.inc\"\nnamespace sglang {\n__global__ void k() {}\n}\n");
  Write(root / "act/config.inc", "#define ACT 1\n");
  return root;
}

absl::Status LoadStatus(const fs::path& root) { return KernelTree::Load(root).status(); }

TEST(KernelTree, ReadsWhatItsKernelsCanReachAndNotADataFileBesideThem) {
  TempDir dir;
  const fs::path root = Tree(dir);
  Write(root / "notes.txt", "not a source\n");
  Write(root / "unused.cuh", "namespace sglang {}\n");
  Sparse(root / "data/weights.bin", off_t{2} << 30);
  auto tree = KernelTree::Load(root);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_NE((*tree)->File("act/config.inc"), nullptr) << "an #include reaches it whatever its suffix";
  EXPECT_NE((*tree)->File("unused.cuh"), nullptr) << "the guard scans every header";
  EXPECT_EQ((*tree)->File("notes.txt"), nullptr);
  EXPECT_EQ((*tree)->File("data/weights.bin"), nullptr);

  // The fingerprint covers what a compile can reach, and only that.
  const std::string before = (*tree)->fingerprint();
  Write(root / "notes.txt", "edited\n");
  EXPECT_EQ((*KernelTree::Load(root))->fingerprint(), before);
  Write(root / "act/config.inc", "#define ACT 2\n");
  EXPECT_NE((*KernelTree::Load(root))->fingerprint(), before);
}

TEST(KernelTree, ALinkOutOfTheTreeIsRefusedNamingItAndItsTargetIsNeverRead) {
  TempDir dir;
  const fs::path root = Tree(dir);
  Write(dir.path() / "secret", "SECRET-CONTENT-42\n");
  fs::remove(root / "act/config.inc");
  fs::create_symlink(dir.path() / "secret", root / "act/config.inc");
  const absl::Status status = LoadStatus(root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("act/config.inc in " + root.string() + " is a symbolic link to " +
                        (dir.path() / "secret").string() + ", outside the kernel tree"));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("SECRET-CONTENT-42")));

  // Relative, and on a file no kernel includes: the same rule.
  fs::remove(root / "act/config.inc");
  Write(root / "act/config.inc", "#define ACT 1\n");
  fs::create_symlink("../../secret", root / "act/notes.txt");
  EXPECT_THAT(std::string(LoadStatus(root).message()), HasSubstr("act/notes.txt in "));
}

TEST(KernelTree, AnIncludeOfAPathOutsideTheTreeIsRefusedNamingItsLine) {
  TempDir dir;
  const fs::path root = Tree(dir);
  Write(dir.path() / "secret.h", "SECRET-CONTENT-42\n");
  for (const std::string& spelled : {(dir.path() / "secret.h").string(), std::string("../../secret.h")}) {
    Write(root / "act/config.inc", "#define ACT 1\n#include \"" + spelled + "\"\n");
    const absl::Status status = LoadStatus(root);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << spelled;
    EXPECT_THAT(std::string(status.message()), HasSubstr("act/config.inc:2 in " + root.string() + ": #include \"" +
                                                         spelled + "\" names a file outside the kernel tree"));
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("SECRET-CONTENT-42")));
  }
  // Climbing out of a directory but not out of the tree is fine, and so is
  // a toolkit header.
  Write(root / "act/config.inc", "#include \"../common.cuh\"\n#include <cuda/std/cstdint>\n");
  Write(root / "common.cuh", "#pragma once\n");
  EXPECT_TRUE(LoadStatus(root).ok()) << LoadStatus(root);
}

TEST(KernelTree, ALinkInsideTheTreeIsReadUnderItsOwnNameAndADanglingOneIsSkipped) {
  TempDir dir;
  const fs::path root = Tree(dir);
  fs::create_symlink("act", root / "same_act");              // a directory: not descended
  fs::create_symlink("config.inc", root / "act/alias.inc");  // a file of the tree
  fs::create_symlink("nowhere.cuh", root / ".#k.cu");        // an editor's lock file
  Write(root / "k.cu", "#include \"act/alias.inc\"\nnamespace sglang {\n__global__ void k() {}\n}\n");
  auto tree = KernelTree::Load(root);
  ASSERT_TRUE(tree.ok()) << tree.status();
  ASSERT_NE((*tree)->File("act/alias.inc"), nullptr);
  EXPECT_EQ(*(*tree)->File("act/alias.inc"), "#define ACT 1\n");
  EXPECT_EQ((*tree)->File("same_act/config.inc"), nullptr);
}

TEST(KernelTree, ALinkThatCannotBeFollowedIsRefusedNamingItNotThrown) {
  TempDir dir;
  const fs::path root = Tree(dir);
  fs::create_symlink("loop_b.cuh", root / "loop_a.cuh");
  fs::create_symlink("loop_a.cuh", root / "loop_b.cuh");
  absl::Status status = LoadStatus(root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  // Either end of the loop, whichever the walk meets first.
  EXPECT_THAT(std::string(status.message()),
              ::testing::ContainsRegex("loop_[ab]\\.cuh in " + root.string() + " is a symbolic link"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("cannot be followed"));

  fs::remove(root / "loop_a.cuh");
  fs::remove(root / "loop_b.cuh");
  fs::create_symlink(std::string(300, 'x'), root / "long.cuh");  // ENAMETOOLONG
  status = LoadStatus(root);
  EXPECT_THAT(std::string(status.message()), HasSubstr("long.cuh in ")) << status;
}

// EACCES needs a user the permission bits bind: root is not one, so as root
// the load runs in a child that has become nobody.
TEST(KernelTree, ALinkIntoADirectoryThisUserCannotSearchIsRefusedNotThrown) {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const fs::path root = Tree(dir);
  Write(dir.path() / "private/x.cuh", "namespace sglang {}\n");
  fs::permissions(dir.path() / "private", fs::perms::none);
  fs::create_symlink("../private/x.cuh", root / "x.cuh");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    const absl::Status status = LoadStatus(root);
    const std::string message(status.message());
    const bool named = message.find("x.cuh in " + root.string() + " is a symbolic link") != std::string::npos &&
                       message.find("Permission denied") != std::string::npos;
    ::_exit(named ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  fs::permissions(dir.path() / "private", fs::perms::owner_all);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "the load threw or crashed: " << wstatus;
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "refused without naming the link and the reason";
}

TEST(KernelTree, AFileOverTheBoundIsRefusedUnreadAndSoIsATreeOverItsTotal) {
  TempDir dir;
  const fs::path root = Tree(dir);
  Sparse(root / "big.cuh", off_t{20} << 20);
  absl::Status status = LoadStatus(root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("big.cuh in " + root.string() + " is 20971520 bytes"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("at most 16 MiB"));

  // A file of any name is read, and bounded, once a kernel includes it.
  fs::remove(root / "big.cuh");
  Sparse(root / "act/config.inc", off_t{20} << 20);
  EXPECT_THAT(std::string(LoadStatus(root).message()), HasSubstr("act/config.inc in "));

  Write(root / "act/config.inc", "#define ACT 1\n");
  for (int i = 0; i < 5; ++i) Sparse(root / ("part" + std::to_string(i) + ".cuh"), off_t{15} << 20);
  status = LoadStatus(root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("come to more than 64 MiB"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("part4.cuh"));
}

TEST(KernelTree, NoManifestOrNoDirectoryIsNotFound) {
  TempDir dir;
  EXPECT_TRUE(absl::IsNotFound(LoadStatus(dir.path() / "none")));
  const fs::path root = Tree(dir);
  fs::remove(root / "kernels.toml");
  fs::create_symlink("nowhere.toml", root / "kernels.toml");
  EXPECT_TRUE(absl::IsNotFound(LoadStatus(root)));
}

}  // namespace
}  // namespace jitd::manifest
