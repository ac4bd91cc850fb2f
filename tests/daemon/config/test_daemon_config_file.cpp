// The TOML config file: every key read, and every mistake named precisely
// (file, line, key) so an operator can fix it without guessing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "config/config_file.h"
#include "temp_dir.h"

namespace jitd::daemon {
namespace {

using ::testing::HasSubstr;

class ConfigFileTest : public ::testing::Test {
 protected:
  std::filesystem::path Write(const std::string& text) {
    const std::filesystem::path path = dir_ / "jitd.toml";
    std::ofstream(path) << text;
    return path;
  }
  jitd::testing::TempDir dir_;
};

TEST_F(ConfigFileTest, ReadsEveryKey) {
  const auto path = Write(R"(
listen = ["unix:/run/jitd.sock", "127.0.0.1:7070"]
cache_dir = "/var/cache/jitd"
kernels = "/usr/share/jitd/kernels"
max_cache_bytes = "512M"
workers = 6
arch = "sm_90a"
remote = "redis://cache:6379/0"
metrics_listen = "127.0.0.1:9464"
admin_token_file = "/etc/jitd/token"
)");
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(path);
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(*layer->listen, (std::vector<std::string>{"unix:/run/jitd.sock", "127.0.0.1:7070"}));
  EXPECT_EQ(*layer->cache_dir, std::filesystem::path("/var/cache/jitd"));
  EXPECT_EQ(*layer->kernels, (std::vector<KernelTreeSource>{{"", "/usr/share/jitd/kernels"}}));
  EXPECT_EQ(*layer->max_cache_bytes, 512u << 20);
  EXPECT_EQ(*layer->workers, 6u);
  EXPECT_EQ(*layer->arch, "sm_90a");
  EXPECT_EQ(*layer->remote, "redis://cache:6379/0");
  EXPECT_EQ(*layer->metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(*layer->admin_token_file, std::filesystem::path("/etc/jitd/token"));
}

TEST_F(ConfigFileTest, ReadsTheServingKeys) {
  const auto path = Write(R"(
max_queue = 64
hot_cache_bytes = "128M"
negative_ttl = "2m"
log_hits = true
allow_guard_findings = true
)");
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(path);
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(*layer->max_queue, 64u);
  EXPECT_EQ(*layer->hot_cache_bytes, 128u << 20);
  EXPECT_EQ(*layer->negative_ttl, std::chrono::seconds(120));
  EXPECT_TRUE(*layer->log_hits);
  EXPECT_TRUE(*layer->allow_guard_findings);
}

TEST_F(ConfigFileTest, ServingKeysTakeIntegersToo) {
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(Write("hot_cache_bytes = 4096\nnegative_ttl = 0\n"));
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(*layer->hot_cache_bytes, 4096u);
  EXPECT_EQ(*layer->negative_ttl, std::chrono::seconds(0));
}

TEST_F(ConfigFileTest, UnsetKeysStayUnsetSoFlagsAndDefaultsApply) {
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(Write("workers = 2\n"));
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_FALSE(layer->listen.has_value());
  EXPECT_FALSE(layer->cache_dir.has_value());
  EXPECT_FALSE(layer->max_cache_bytes.has_value());
}

TEST_F(ConfigFileTest, MaxCacheBytesAcceptsAnIntegerToo) {
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(Write("max_cache_bytes = 1048576\n"));
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(*layer->max_cache_bytes, 1048576u);
}

TEST_F(ConfigFileTest, ListenAcceptsASingleString) {
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(Write("listen = \"127.0.0.1:7070\"\n"));
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(*layer->listen, std::vector<std::string>{"127.0.0.1:7070"});
}

TEST_F(ConfigFileTest, RelativePathsAreRelativeToTheFilesDirectory) {
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(Write("cache_dir = \"cache\"\nlisten = \"unix:run/jitd.sock\"\n"));
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(*layer->cache_dir, dir_ / "cache");
  EXPECT_EQ((*layer->listen)[0], "unix:" + (dir_ / "run/jitd.sock").string());
}

TEST_F(ConfigFileTest, UnknownKeyIsRejectedNamingFileLineAndKey) {
  const auto path = Write("workers = 2\ncache_size = \"10G\"\n");
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(path);
  ASSERT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layer.status().message()), HasSubstr(path.string() + ":2"));
  EXPECT_THAT(std::string(layer.status().message()), HasSubstr("unknown key 'cache_size'"));
  EXPECT_THAT(std::string(layer.status().message()), HasSubstr("max_cache_bytes"));  // the hint
}

TEST_F(ConfigFileTest, AMistypedKeyGetsDidYouMean) {
  const auto path = Write("max_cache_byte = \"10G\"\n");
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(path);
  ASSERT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layer.status().message()),
              HasSubstr("unknown key 'max_cache_byte'; did you mean max_cache_bytes"));
}

TEST_F(ConfigFileTest, WrongTypeIsRejectedNamingKeyAndBothTypes) {
  const auto path = Write("workers = \"eight\"\n");
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(path);
  ASSERT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layer.status().message()),
              HasSubstr(path.string() + ":1: key 'workers': must be an integer, not a string"));
}

TEST_F(ConfigFileTest, BadValuesAreRejectedNamingTheKey) {
  struct Case {
    const char* text;
    const char* key;
  };
  for (const Case& c :
       {Case{"arch = \"sm90\"\n", "arch"}, Case{"max_cache_bytes = \"10X\"\n", "max_cache_bytes"},
        Case{"max_cache_bytes = -1\n", "max_cache_bytes"}, Case{"workers = 0\n", "workers"},
        Case{"listen = [\"nowhere\"]\n", "listen"}, Case{"listen = [1, 2]\n", "listen"},
        Case{"remote = \"ftp://x:1\"\n", "remote"}, Case{"cache_dir = 5\n", "cache_dir"},
        Case{"max_queue = 0\n", "max_queue"}, Case{"max_queue = \"many\"\n", "max_queue"},
        Case{"hot_cache_bytes = \"lots\"\n", "hot_cache_bytes"}, Case{"negative_ttl = \"soon\"\n", "negative_ttl"},
        Case{"negative_ttl = 100000\n", "negative_ttl"}, Case{"log_hits = 1\n", "log_hits"},
        Case{"allow_guard_findings = \"yes\"\n", "allow_guard_findings"}}) {
    absl::StatusOr<ConfigLayer> layer = ReadConfigFile(Write(c.text));
    EXPECT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(layer.status().message()), HasSubstr(std::string("'") + c.key + "'")) << c.text;
  }
}

TEST_F(ConfigFileTest, SyntaxErrorNamesFileAndLine) {
  const auto path = Write("workers = 2\narch = \n");
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(path);
  ASSERT_EQ(layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layer.status().message()), HasSubstr(path.string() + ":2"));
  EXPECT_THAT(std::string(layer.status().message()), HasSubstr("invalid TOML"));
}

TEST_F(ConfigFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadConfigFile(dir_ / "absent.toml").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace jitd::daemon
