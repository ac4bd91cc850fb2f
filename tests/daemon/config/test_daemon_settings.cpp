// The settings table (daemon/config/settings.h) against everything made from it
// and everything that documents it: each row's flag and key read the same
// value, the flag is the key's spelling, `jitd --help` shows every row, and
// deploy/jitd.toml and docs/CONTRACT.md name every row and no other.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <variant>

#include "config/command_line.h"
#include "config/config_file.h"
#include "config/settings.h"
#include "temp_dir.h"

namespace jitd::daemon {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What `row` takes in this test: its example, with files that exist and a
// group this host has.
std::string Example(const Setting& row, const std::filesystem::path& dir) {
  if (row.existing_file) {
    const std::filesystem::path file = dir / (row.key + ".file");
    std::ofstream(file) << "a file for " << row.key << "\n";
    return file.string();
  }
  if (row.key == "socket_group") {
    const group* own = ::getgrgid(::getgid());
    return own == nullptr ? row.example : std::string(own->gr_name);
  }
  return row.example;
}

// The example as a TOML value of the row's kind.
std::string TomlValue(const Setting& row, const std::string& example) {
  switch (row.kind) {
    case SettingKind::kCount:
    case SettingKind::kInteger:
    case SettingKind::kMilliseconds:
    case SettingKind::kSwitch:
      return example;
    default:
      return "\"" + example + "\"";
  }
}

absl::StatusOr<ConfigLayer> FromFlag(const Setting& row, const std::string& example) {
  std::vector<std::string> args = {"jitd", row.flag};
  if (row.kind != SettingKind::kSwitch) args.push_back(example);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  std::variant<CommandLine, int> parsed = ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  if (std::holds_alternative<int>(parsed)) {
    return absl::InvalidArgumentError("the command line was refused with exit " +
                                      std::to_string(std::get<int>(parsed)));
  }
  return std::get<CommandLine>(parsed).flags;
}

TEST(Settings, EachRowsFlagAndKeyReadTheSameValue) {
  jitd::testing::TempDir dir;
  ASSERT_GE(Settings().size(), 30u);
  for (const Setting& row : Settings()) {
    SCOPED_TRACE(row.key);
    const std::string example = Example(row, dir.path());
    if (row.kind == SettingKind::kSwitch) {
      EXPECT_EQ(example, row.switch_value ? "true" : "false") << "a switch's example is what its flag sets";
    }
    const std::filesystem::path file = dir / "one.toml";
    std::ofstream(file) << row.key << " = " << TomlValue(row, example) << "\n";
    absl::StatusOr<ConfigLayer> from_key = ReadConfigFile(file);
    ASSERT_TRUE(from_key.ok()) << from_key.status();
    absl::StatusOr<ConfigLayer> from_flag = FromFlag(row, example);
    ASSERT_TRUE(from_flag.ok()) << from_flag.status();
    EXPECT_FALSE(*from_key == ConfigLayer{}) << "the key set nothing";
    EXPECT_TRUE(*from_key == *from_flag) << row.flag << " " << example << " and " << row.key << " = "
                                         << TomlValue(row, example) << " read different values";
  }
}

TEST(Settings, EachFlagIsItsKeySpelledWithDashes) {
  std::set<std::string> keys;
  std::set<std::string> flags;
  for (const Setting& row : Settings()) {
    std::string dashed = row.key;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    const std::string expected = (row.switch_value ? "--" : "--no-") + dashed;
    EXPECT_EQ(row.flag, expected) << "the config file's keys are the long flags with '_' for '-' (CONTRACT.md)";
    EXPECT_TRUE(keys.insert(row.key).second) << "two rows with the key " << row.key;
    EXPECT_TRUE(flags.insert(row.flag).second) << "two rows with the flag " << row.flag;
    EXPECT_FALSE(row.help.empty()) << row.key;
    EXPECT_EQ(row.value_name.empty(), row.kind == SettingKind::kSwitch) << row.key;
  }
}

TEST(Settings, HelpShowsEveryRow) {
  std::string arg0 = "jitd";
  std::string help = "--help";
  char* argv[] = {arg0.data(), help.data()};
  ::testing::internal::CaptureStdout();
  std::variant<CommandLine, int> parsed = ParseCommandLine(2, argv);
  const std::string shown = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(std::holds_alternative<int>(parsed));
  EXPECT_EQ(std::get<int>(parsed), 0);
  for (const Setting& row : Settings()) {
    EXPECT_THAT(shown, HasSubstr(row.flag + (row.value_name.empty() ? "" : " " + row.value_name))) << row.key;
    // The help line's first words, as CLI11 may wrap the rest.
    EXPECT_THAT(shown, HasSubstr(row.help.substr(0, 20))) << row.key;
  }
}

TEST(Settings, TheExampleConfigNamesEveryKey) {
  const std::string example = ReadAll(JITD_EXAMPLE_CONFIG);
  for (const Setting& row : Settings()) {
    const std::regex line("(^|\n)(# )?" + row.key + " = ");
    EXPECT_TRUE(std::regex_search(example, line)) << JITD_EXAMPLE_CONFIG << " does not document " << row.key;
  }
}

// The serve section of CONTRACT.md: from its heading to the next one.
std::string ServeSection() {
  const std::string contract = ReadAll(JITD_CONTRACT);
  const size_t begin = contract.find("### `jitd` / `jitd serve`");
  EXPECT_NE(begin, std::string::npos) << JITD_CONTRACT << " has no serve section";
  if (begin == std::string::npos) return "";
  const size_t end = contract.find("\n### ", begin + 1);
  return contract.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(Settings, TheContractsFlagTableNamesEveryRowAndNoOther) {
  const std::string section = ServeSection();
  std::set<std::string> rows = {"--config"};
  for (const Setting& row : Settings()) {
    rows.insert(row.flag);
    EXPECT_THAT(section, HasSubstr("`" + row.flag)) << JITD_CONTRACT << "'s serve table lacks " << row.flag;
  }
  // Every flag the table's rows name (their first column).
  std::istringstream lines(section);
  const std::regex flag("`(--[a-z-]+)");
  int named = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("| `--")) continue;
    const std::string first = line.substr(0, line.find(" | "));
    for (std::sregex_iterator it(first.begin(), first.end(), flag), end; it != end; ++it) {
      ++named;
      EXPECT_TRUE(rows.count((*it)[1]) > 0) << JITD_CONTRACT << " names " << (*it)[1] << ", which jitd does not take";
    }
  }
  EXPECT_GE(named, static_cast<int>(Settings().size()));
}

TEST(Settings, ABadFlagValueIsRefusedNamingTheFlag) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--workers", "many"}, {"--max-cache-bytes", "10X"}, {"--max-connections", "-1"}, {"--arch", "sm90"}}) {
    std::vector<std::string> args = {"jitd", flag, value};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    ::testing::internal::CaptureStderr();
    std::variant<CommandLine, int> parsed = ParseCommandLine(3, argv.data());
    const std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(std::holds_alternative<int>(parsed)) << flag;
    EXPECT_EQ(std::get<int>(parsed), kExitUsage) << flag;
    EXPECT_THAT(said, HasSubstr("jitd: " + flag + ": ")) << said;
  }
}

}  // namespace
}  // namespace jitd::daemon
