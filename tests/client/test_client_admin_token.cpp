// The admin token file format both the daemon and jitctl read.
#include <gtest/gtest.h>

#include <fstream>

#include "jitd/client.h"
#include "temp_dir.h"

namespace jitd {
namespace {

TEST(ReadAdminTokenFile, TrimsTheTrailingNewlineAndSurroundingBlanks) {
  testing::TempDir dir;
  std::ofstream(dir / "token") << "  s3cret-token \n";
  absl::StatusOr<std::string> token = ReadAdminTokenFile(dir / "token");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-token");
}

TEST(ReadAdminTokenFile, RefusesEmptyFilesAndTokensWithInnerWhitespace) {
  testing::TempDir dir;
  std::ofstream(dir / "empty") << "\n\n";
  EXPECT_EQ(ReadAdminTokenFile(dir / "empty").status().code(), absl::StatusCode::kInvalidArgument);
  std::ofstream(dir / "two-lines") << "first\nsecond\n";
  EXPECT_EQ(ReadAdminTokenFile(dir / "two-lines").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadAdminTokenFile, MissingFileIsNotFoundNamingIt) {
  absl::StatusOr<std::string> token = ReadAdminTokenFile("/nonexistent/token");
  EXPECT_EQ(token.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(token.status().message().find("/nonexistent/token"), std::string::npos);
}

}  // namespace
}  // namespace jitd
