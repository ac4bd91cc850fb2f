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

}  // namespace
}  // namespace jitd::files
