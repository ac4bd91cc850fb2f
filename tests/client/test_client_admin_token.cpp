// The admin token file format both the daemon and jitctl read, and the
// token beside a socket as the client reads it and sends it: only from a
// file its daemon wrote, and only on the calls that need it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "jitd/client.h"
#include "jitd/v1/cache_admin.grpc.pb.h"
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

// A server on a Unix socket that answers CacheAdmin's Stats and Evict and
// notes the authorization each call carried: what a fake daemon learns.
class RecordingAdmin final : public v1::CacheAdmin::Service {
 public:
  grpc::Status Stats(grpc::ServerContext* context, const v1::StatsRequest*, v1::StatsResponse*) override {
    Note("Stats", *context);
    return grpc::Status::OK;
  }
  grpc::Status Evict(grpc::ServerContext* context, const v1::EvictRequest*, v1::EvictResponse*) override {
    Note("Evict", *context);
    return grpc::Status::OK;
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void Note(const std::string& call, const grpc::ServerContext& context) {
    std::string authorization = "none";
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end())
      authorization.assign(it->second.data(), it->second.size());
    std::lock_guard lock(mu_);
    seen_.push_back(call + ": " + authorization);
  }
  std::mutex mu_;
  std::vector<std::string> seen_;
};

class SocketToken : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_.string(), grpc::InsecureServerCredentials());
    builder.RegisterService(&admin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<Client> Connect() {
    ClientOptions options;
    options.endpoint = "unix:" + socket_.string();
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  testing::TempDir dir_;
  std::filesystem::path socket_ = dir_ / "jitd.sock";
  std::filesystem::path token_ = dir_ / "jitd.sock.admin-token";
  RecordingAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(SocketToken, TheTokenTravelsOnlyOnCallsThatChangeState) {
  std::ofstream(token_) << "s3cret\n";
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Stats().ok());
  v1::EvictRequest evict;
  evict.set_dry_run(true);
  evict.set_kernel_glob("*");
  ASSERT_TRUE(client->Evict(evict).ok());
  EXPECT_EQ(admin_.seen(), (std::vector<std::string>{"Stats: none", "Evict: Bearer s3cret"}));
}

TEST_F(SocketToken, ASymlinkPlantedBesideTheSocketIsNotFollowed) {
  // A fake server's owner points its "token" at the real daemon's token.
  std::ofstream(dir_ / "real-daemon-token") << "the-real-token\n";
  std::filesystem::create_symlink(dir_ / "real-daemon-token", token_);
  absl::StatusOr<std::string> read = ReadSocketAdminToken(socket_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(read.status().message().find("symlink"), std::string::npos) << read.status();

  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EvictRequest evict;
  evict.set_kernel_glob("*");
  ASSERT_TRUE(client->Evict(evict).ok());
  EXPECT_EQ(admin_.seen(), (std::vector<std::string>{"Evict: none"}));
}

TEST_F(SocketToken, OnlyAFileOfTheSocketsOwnerIsRead) {
  std::ofstream(token_) << "s3cret\n";
  ASSERT_EQ(ReadSocketAdminToken(socket_).value_or(""), "s3cret");
  if (::geteuid() != 0) GTEST_SKIP() << "giving the file to another user needs root";
  ASSERT_EQ(::chown(token_.c_str(), 65534, static_cast<gid_t>(-1)), 0);
  absl::StatusOr<std::string> read = ReadSocketAdminToken(socket_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(read.status().message().find("owned by uid 65534"), std::string::npos) << read.status();
}

TEST_F(SocketToken, ADirectoryOrAHugeFileIsNoToken) {
  std::filesystem::create_directory(token_);
  EXPECT_EQ(ReadSocketAdminToken(socket_).status().code(), absl::StatusCode::kPermissionDenied);
  std::filesystem::remove(token_);
  std::ofstream(token_) << std::string(1 << 20, 'x');
  EXPECT_EQ(ReadSocketAdminToken(socket_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace jitd
