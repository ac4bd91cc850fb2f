// UnixSocketClaim: a stale socket is cleared, a live one or a locked path is
// refused, a non-socket is never deleted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "security/unix_socket_claim.h"
#include "temp_dir.h"

namespace jitd::daemon {
namespace {

using ::testing::HasSubstr;

// A bound Unix socket; listening when `listen` is true. Closing without
// unlinking leaves the stale file a killed daemon leaves.
int BindSocket(const std::filesystem::path& path, bool listen_too) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  if (listen_too) {
    EXPECT_EQ(listen(fd, 4), 0);
  }
  return fd;
}

TEST(UnixSocketClaim, CreatesTheParentDirectory) {
  jitd::testing::TempDir dir;
  auto claim = UnixSocketClaim::Acquire(dir / "run/deeper/jitd.sock");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_TRUE(std::filesystem::is_directory(dir / "run/deeper"));
  EXPECT_FALSE((*claim)->removed_stale());
}

TEST(UnixSocketClaim, RefusesADirectoryEveryUserMayWriteToUnlessItIsSticky) {
  jitd::testing::TempDir dir;
  const std::filesystem::path open_dir = dir / "open";
  std::filesystem::create_directories(open_dir);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  auto refused = UnixSocketClaim::Acquire(open_dir / "jitd.sock");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("writable by every user"));
  // With the sticky bit (as /tmp), only an entry's owner may remove it.
  ASSERT_EQ(chmod(open_dir.c_str(), 01777), 0);
  EXPECT_TRUE(UnixSocketClaim::Acquire(open_dir / "jitd.sock").ok());
}

TEST(UnixSocketClaim, NeverFollowsALockFileSymlinkNorTruncatesItsTarget) {
  jitd::testing::TempDir dir;
  std::ofstream(dir / "victim") << "precious\n";
  std::filesystem::create_symlink(dir / "victim", dir / "jitd.sock.lock");
  auto refused = UnixSocketClaim::Acquire(dir / "jitd.sock");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("is a symlink"));
  std::ifstream victim(dir / "victim");
  std::string content((std::istreambuf_iterator<char>(victim)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "precious\n");
}

TEST(UnixSocketClaim, RefusesALockFileThatIsNotARegularFileOfItsOwn) {
  jitd::testing::TempDir dir;
  std::filesystem::create_directory(dir / "jitd.sock.lock");
  auto refused = UnixSocketClaim::Acquire(dir / "jitd.sock");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  if (geteuid() != 0) return;
  // Root can hand the files to another user, as a hostile one would plant them.
  std::filesystem::remove(dir / "jitd.sock.lock");
  std::ofstream(dir / "jitd.sock.lock") << "1\n";
  ASSERT_EQ(chown((dir / "jitd.sock.lock").c_str(), 65534, 65534), 0);
  refused = UnixSocketClaim::Acquire(dir / "jitd.sock");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("not a regular file of the daemon's user"));
}

TEST(UnixSocketClaim, RefusesADirectoryOfAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  jitd::testing::TempDir dir;
  std::filesystem::create_directory(dir / "theirs");
  ASSERT_EQ(chown((dir / "theirs").c_str(), 65534, 65534), 0);
  auto refused = UnixSocketClaim::Acquire(dir / "theirs/jitd.sock");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("belongs to uid 65534"));
}

TEST(UnixSocketClaim, RemovesAStaleSocketNobodyAcceptsOn) {
  jitd::testing::TempDir dir;
  close(BindSocket(dir / "jitd.sock", /*listen_too=*/false));
  ASSERT_TRUE(std::filesystem::exists(dir / "jitd.sock"));
  auto claim = UnixSocketClaim::Acquire(dir / "jitd.sock");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_TRUE((*claim)->removed_stale());
  EXPECT_FALSE(std::filesystem::exists(dir / "jitd.sock"));
}

TEST(UnixSocketClaim, RefusesASocketSomeoneAcceptsOn) {
  jitd::testing::TempDir dir;
  const int live = BindSocket(dir / "jitd.sock", /*listen_too=*/true);
  auto claim = UnixSocketClaim::Acquire(dir / "jitd.sock");
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(claim.status().message()), HasSubstr("already serving"));
  EXPECT_TRUE(std::filesystem::exists(dir / "jitd.sock"));
  close(live);
}

TEST(UnixSocketClaim, RefusesAPathAnotherClaimHolds) {
  jitd::testing::TempDir dir;
  auto first = UnixSocketClaim::Acquire(dir / "jitd.sock");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = UnixSocketClaim::Acquire(dir / "jitd.sock");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("pid " + std::to_string(getpid())));
}

TEST(UnixSocketClaim, NeverDeletesAFileThatIsNotASocket) {
  jitd::testing::TempDir dir;
  std::ofstream(dir / "jitd.sock") << "precious";
  auto claim = UnixSocketClaim::Acquire(dir / "jitd.sock");
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(claim.status().message()), HasSubstr("not a socket"));
  EXPECT_TRUE(std::filesystem::exists(dir / "jitd.sock"));
}

TEST(UnixSocketClaim, ReleasingRemovesTheSocketFile) {
  jitd::testing::TempDir dir;
  {
    auto claim = UnixSocketClaim::Acquire(dir / "jitd.sock");
    ASSERT_TRUE(claim.ok()) << claim.status();
    close(BindSocket(dir / "jitd.sock", /*listen_too=*/false));
    ASSERT_TRUE((*claim)->RestrictMode().ok());
    struct stat info {};
    ASSERT_EQ(stat((dir / "jitd.sock").c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0660u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "jitd.sock"));
  // And the path can be claimed again at once.
  EXPECT_TRUE(UnixSocketClaim::Acquire(dir / "jitd.sock").ok());
}

}  // namespace
}  // namespace jitd::daemon
