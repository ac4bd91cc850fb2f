#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "jitd/base/files.h"

namespace jitd::files {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "jitd-base-files-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  fs::path Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  fs::path dir_;
};

TEST_F(FilesTest, ReadWholeFileReturnsEveryByte) {
  std::string bytes(3 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  absl::StatusOr<std::string> got = ReadWholeFile(Write("big", bytes));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, bytes);
  got = ReadWholeFile(Write("empty", ""));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "");
}

TEST_F(FilesTest, ReadWholeFileNamesThePathAndTheReason) {
  absl::StatusOr<std::string> got = ReadWholeFile(dir_ / "missing");
  EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr((dir_ / "missing").string()));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("No such file"));
  got = ReadWholeFile(dir_ / "missing" / "below");
  EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
  got = ReadWholeFile(dir_);
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("Is a directory"));
}

TEST_F(FilesTest, ReadWholeFileSaysPermissionDeniedForAnUnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  const fs::path p = Write("secret", "x");
  fs::permissions(p, fs::perms::none);
  absl::StatusOr<std::string> got = ReadWholeFile(p);
  EXPECT_TRUE(absl::IsPermissionDenied(got.status())) << got.status();
}

TEST_F(FilesTest, ReadPemFileNamesTheFlagAndRefusesWhatIsNotPem) {
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  absl::StatusOr<std::string> got = ReadPemFile(Write("ok.pem", pem), "--tls-cert");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, pem);

  got = ReadPemFile(Write("not.pem", "hello"), "--tls-cert");
  EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("--tls-cert"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("not.pem: not a readable PEM file"));

  got = ReadPemFile(dir_ / "absent.pem", "TLS CA");
  EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("TLS CA"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("No such file"));
}

TEST_F(FilesTest, EmptyDirectoryMakesTheDirectoryAndRemovesWhatIsInIt) {
  const fs::path scratch = dir_ / "a" / "b";
  EmptyDirectory(scratch);
  EXPECT_TRUE(fs::is_directory(scratch));
  Write("a/b/file", "x");
  fs::create_directories(scratch / "sub" / "deeper");
  Write("a/b/sub/deeper/f", "y");
  Write("keep", "z");
  EmptyDirectory(scratch);
  EXPECT_TRUE(fs::is_directory(scratch));
  EXPECT_TRUE(fs::is_empty(scratch));
  EXPECT_TRUE(fs::exists(dir_ / "keep"));  // only what is inside goes
}

TEST_F(FilesTest, UniqueFdClosesOnceAndReportsCloseErrors) {
  const fs::path p = Write("f", "x");
  const int raw = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_TRUE(fd.valid());
    UniqueFd moved(std::move(fd));
    EXPECT_FALSE(fd.valid());  // NOLINT(bugprone-use-after-move): the point of the test
    EXPECT_EQ(moved.get(), raw);
    EXPECT_EQ(moved.Close(), 0);
    EXPECT_FALSE(moved.valid());
    EXPECT_EQ(moved.Close(), 0);  // a second Close is a no-op
  }
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);  // closed, and not twice
  UniqueFd stale(raw);                   // a descriptor that is no longer open
  EXPECT_EQ(stale.Close(), EBADF);
}

TEST_F(FilesTest, WriteFileAtomicallyReplacesTheFileWholeAndLeavesNoTemporary) {
  const fs::path p = dir_ / "f";
  ASSERT_TRUE(WriteFileAtomically(p, "first").ok());
  EXPECT_EQ(*ReadWholeFile(p), "first");
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE(WriteFileAtomically(p, big).ok());
  EXPECT_EQ(*ReadWholeFile(p), big);
  EXPECT_EQ((fs::status(p).permissions() & fs::perms::all), fs::perms::owner_read | fs::perms::owner_write);
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.path() == p ? 0 : 1;
  EXPECT_EQ(entries, 0u) << "a temporary file was left beside " << p;
}

TEST_F(FilesTest, WriteFileAtomicallyUsesTheGivenTemporaryModeAndNoSync) {
  fs::create_directories(dir_ / "tmp");
  AtomicWrite how;
  how.temp = dir_ / "tmp" / "x.1.2.tmp";
  how.mode = 0640;
  how.sync = false;
  ASSERT_TRUE(WriteFileAtomically(dir_ / "g", "bytes", how).ok());
  EXPECT_EQ(*ReadWholeFile(dir_ / "g"), "bytes");
  EXPECT_EQ((fs::status(dir_ / "g").permissions() & fs::perms::all),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_FALSE(fs::exists(how.temp));
}

TEST_F(FilesTest, WriteFileAtomicallyReplacesALinkWithoutFollowingIt) {
  const fs::path target = Write("target", "keep me");
  const fs::path link = dir_ / "link";
  fs::create_symlink(target, link);
  ASSERT_TRUE(WriteFileAtomically(link, "new").ok());
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(*ReadWholeFile(link), "new");
  EXPECT_EQ(*ReadWholeFile(target), "keep me");
}

TEST_F(FilesTest, WriteFileAtomicallyFailsWithoutTouchingTheFile) {
  // A missing directory: NOT_FOUND, naming the step and the path.
  absl::Status missing = WriteFileAtomically(dir_ / "no" / "f", "x");
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("create " + (dir_ / "no").string()));
  // A temporary that already exists is never written through or removed.
  const fs::path p = Write("f", "old");
  const fs::path busy = Write("busy.tmp", "someone else's");
  AtomicWrite how;
  how.temp = busy;
  absl::Status taken = WriteFileAtomically(p, "new", how);
  EXPECT_FALSE(taken.ok());
  EXPECT_EQ(*ReadWholeFile(p), "old");
  EXPECT_EQ(*ReadWholeFile(busy), "someone else's");
  // The rename fails (a directory is in the way): the temporary goes.
  fs::create_directories(dir_ / "d" / "inside");
  how.temp = dir_ / "d.tmp";
  absl::Status blocked = WriteFileAtomically(dir_ / "d", "x", how);
  EXPECT_FALSE(blocked.ok());
  EXPECT_THAT(std::string(blocked.message()), HasSubstr("rename"));
  EXPECT_FALSE(fs::exists(how.temp));
  EXPECT_TRUE(fs::is_directory(dir_ / "d" / "inside"));
}

TEST_F(FilesTest, ErrnoStatusGivesTheCodesTheCacheReliesOn) {
  EXPECT_TRUE(absl::IsResourceExhausted(ErrnoStatus(ENOSPC, "write", "/x")));
  EXPECT_TRUE(absl::IsResourceExhausted(ErrnoStatus(EDQUOT, "write", "/x")));
  EXPECT_TRUE(absl::IsNotFound(ErrnoStatus(ENOENT, "create", "/x")));
  EXPECT_TRUE(absl::IsFailedPrecondition(ErrnoStatus(EROFS, "create", "/x")));
  EXPECT_TRUE(absl::IsInternal(ErrnoStatus(EIO, "fsync", "/x")));
  EXPECT_THAT(std::string(ErrnoStatus(ENOSPC, "write", "/x/y").message()), HasSubstr("write /x/y: "));
}

}  // namespace
}  // namespace jitd::files

namespace jitd::files {
namespace {

TEST(PathInside, OnlyWhatLiesStrictlyUnderTheRootIsInside) {
  EXPECT_TRUE(PathInside("/t/kernels", "/t/kernels/a.cu"));
  EXPECT_TRUE(PathInside("/t/kernels", "/t/kernels/sub/b.cuh"));
  EXPECT_FALSE(PathInside("/t/kernels", "/t/kernels")) << "the root itself";
  EXPECT_FALSE(PathInside("/t/kernels", "/t/kernels2/a.cu")) << "a sibling that shares a prefix";
  EXPECT_FALSE(PathInside("/t/kernels", "/t/other/a.cu"));
  EXPECT_FALSE(PathInside("/t/kernels", "/etc/passwd"));
  EXPECT_FALSE(PathInside("kernels", "/t/kernels/a.cu")) << "one relative, one absolute";
}

}  // namespace
}  // namespace jitd::files
