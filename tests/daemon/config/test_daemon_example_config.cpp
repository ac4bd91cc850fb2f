// deploy/jitd.toml, the example configuration operators copy: it documents
// every key daemon/config/config_file.cpp accepts, names no key it refuses, and
// every value in it (set or commented out) is one the daemon accepts.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "config/config_file.h"
#include "test_daemon.h"

namespace jitd::daemon {
namespace {

using jitd::testing::ProcessResult;
using jitd::testing::TempDir;
using jitd::testing::TestDaemon;
using ::testing::HasSubstr;

const std::filesystem::path kExample = JITD_EXAMPLE_CONFIG;

std::vector<std::string> Lines() {
  std::ifstream in(kExample);
  EXPECT_TRUE(in) << "cannot read " << kExample;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "key = value" (set) or "# key = value" (commented out), as the file writes them.
const std::regex kSetKey(R"(^([a-z_]+) = (.+)$)");
const std::regex kCommentedKey(R"(^# ([a-z_]+) = (.+)$)");

TEST(ExampleConfig, DocumentsEveryKeyTheDaemonAccepts) {
  std::set<std::string> documented;
  for (const std::string& line : Lines()) {
    std::smatch match;
    if (std::regex_match(line, match, kSetKey) || std::regex_match(line, match, kCommentedKey)) {
      documented.insert(match[1]);
    }
  }
  const std::vector<std::string> keys = ConfigFileKeys();
  ASSERT_GE(keys.size(), 20u);  // listen ... max_calls_per_peer, as of this test
  for (const std::string& key : keys) {
    EXPECT_TRUE(documented.count(key) > 0)
        << kExample << " does not document the key '" << key << "' (add it as `" << key << " = ...` or `# " << key
        << " = ...`, with what it does, its default and unit)";
  }
}

TEST(ExampleConfig, NamesNoKeyTheDaemonRefuses) {
  const std::vector<std::string> keys = ConfigFileKeys();
  const std::set<std::string> accepted(keys.begin(), keys.end());
  int line_number = 0;
  for (const std::string& line : Lines()) {
    ++line_number;
    std::smatch match;
    if (std::regex_match(line, match, kSetKey) || std::regex_match(line, match, kCommentedKey)) {
      EXPECT_TRUE(accepted.count(match[1]) > 0)
          << kExample << ":" << line_number << ": '" << match[1] << "' is not a key the daemon accepts";
    }
  }
}

TEST(ExampleConfig, EachKeyHasACommentSayingItsDefault) {
  // The paragraph a key is in (the lines above it up to a blank one) says
  // what it does and "Default: ...".
  const std::vector<std::string> lines = Lines();
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch match;
    if (!std::regex_match(lines[i], match, kSetKey) && !std::regex_match(lines[i], match, kCommentedKey)) continue;
    std::string paragraph;
    for (size_t j = i; j-- > 0 && !lines[j].empty();) paragraph = lines[j] + "\n" + paragraph;
    EXPECT_THAT(paragraph, HasSubstr("Default")) << kExample << ":" << i + 1 << ": " << lines[i];
  }
}

TEST(ExampleConfig, TheDaemonReadsItAsIs) {
  absl::StatusOr<ConfigLayer> layer = ReadConfigFile(kExample);
  ASSERT_TRUE(layer.ok()) << layer.status();
  ASSERT_TRUE(layer->listen.has_value());
  EXPECT_EQ(*layer->listen, std::vector<std::string>{"unix:/run/jitd/jitd.sock"});
  EXPECT_EQ(layer->cache_dir, std::filesystem::path("/var/cache/jitd"));
  EXPECT_EQ(layer->max_cache_bytes, uint64_t{10} << 30);
  EXPECT_EQ(layer->hot_cache_bytes, uint64_t{256} << 20);
  EXPECT_EQ(layer->negative_ttl, std::chrono::seconds(30));
  EXPECT_EQ(layer->max_queue, 256u);
  EXPECT_EQ(layer->max_calls_per_peer, 1024u);
}

TEST(ExampleConfig, EveryCommentedOutExampleIsAcceptedToo) {
  // Uncommenting a line must never be the mistake that stops the daemon.
  // The socket group must exist on this host: the example's is replaced by
  // this process's own group.
  const group* own_group = ::getgrgid(::getgid());
  ASSERT_NE(own_group, nullptr);
  TempDir dir;
  int line_number = 0;
  int examples = 0;
  for (const std::string& line : Lines()) {
    ++line_number;
    std::smatch match;
    if (!std::regex_match(line, match, kCommentedKey)) continue;
    ++examples;
    std::string value = match[2];
    if (match[1] == "socket_group") value = std::string("\"") + own_group->gr_name + "\"";
    const std::filesystem::path one = dir / "one.toml";
    std::ofstream(one) << match[1] << " = " << value << "\n";
    absl::StatusOr<ConfigLayer> layer = ReadConfigFile(one);
    EXPECT_TRUE(layer.ok()) << kExample << ":" << line_number << ": " << line << "\n" << layer.status();
  }
  EXPECT_GE(examples, 8);
}

TEST(ExampleConfig, ADaemonStartedWithItServes) {
  // The file as shipped, with the socket and the cache moved into this
  // test's directory (flags win over keys, as in deploy/systemd/jitd.service).
  TempDir dir;
  TestDaemon daemon(dir, {"--config", kExample.string()});
  ASSERT_TRUE(daemon.WaitUntilServing().ok()) << daemon.process().Output();
  const v1::StatsResponse stats = daemon.Stats();
  EXPECT_EQ(stats.max_bytes(), uint64_t{10} << 30);
  EXPECT_EQ(stats.workers(), 4u);
  EXPECT_EQ(stats.hot_max_bytes(), uint64_t{256} << 20);
  const ProcessResult health = daemon.Jitctl({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.output;
}

}  // namespace
}  // namespace jitd::daemon
