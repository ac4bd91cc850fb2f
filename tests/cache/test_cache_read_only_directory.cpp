// cache::ReadOnlyDirectory, the level anything outside the daemon reads a
// warmed directory through: the entries of one instantiation newest first,
// each verified; a corrupt one never returned and the directory never
// written; a directory warmed after the level was made is read.
#include <gtest/gtest.h>

#include "jitd/read_only_directory.h"
#include "testing.h"

namespace jitd::cache {
namespace {

namespace fs = std::filesystem;
using testing::CubinFor;
using testing::KeyFor;
using testing::MetaFor;
using testing::Options;
using testing::TempDir;

// Two versions of one instantiation (the second created later), one of
// another instantiation, and one compiled with extra request options.
void Warm(const fs::path& dir) {
  auto cache = testing::OpenCache(Options(dir));
  ASSERT_NE(cache, nullptr);
  EntryMeta older = MetaFor(1);
  older.params = "dtype=fp32";
  older.created_unix_ms = 1000;
  EntryMeta newer = MetaFor(2);
  newer.params = "dtype=fp32";
  newer.created_unix_ms = 2000;
  EntryMeta other = MetaFor(3);
  other.params = "dtype=fp64";
  EntryMeta with_options = MetaFor(4);
  with_options.params = "dtype=fp32";
  with_options.created_unix_ms = 3000;
  with_options.request_options = {"-DTILE=8"};
  for (const auto& [meta, n] : {std::pair{older, 1}, {newer, 2}, {other, 3}, {with_options, 4}}) {
    ASSERT_TRUE(cache->Publish(meta, CubinFor(n)).ok());
  }
}

TEST(ReadOnlyDirectory, AnInstantiationsEntriesComeNewestFirstWithoutRequestOptions) {
  TempDir dir;
  ReadOnlyDirectory directory(dir.path());
  auto before = directory.FindInstantiation("test.kernel", "dtype=fp32", "sm_90");
  ASSERT_FALSE(before.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(before.status())) << before.status();
  EXPECT_NE(before.status().message().find("has this directory been warmed?"), std::string::npos);

  Warm(dir.path());  // after the level was made: the next use opens it
  auto found = directory.FindInstantiation("test.kernel", "dtype=fp32", "sm_90");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->verified.size(), 2u);
  EXPECT_EQ(found->verified[0].meta.key, KeyFor(2));
  EXPECT_EQ(found->verified[1].meta.key, KeyFor(1));
  EXPECT_EQ(found->verified[0].cubin, CubinFor(2));
  EXPECT_EQ(found->unverified, 0u);
  EXPECT_TRUE(directory.FindInstantiation("test.kernel", "dtype=fp32", "sm_100a")->verified.empty());
  EXPECT_EQ(directory.FindInstantiation("test.kernel", "dtype=fp32", "")->verified.size(), 2u) << "any arch";
  EXPECT_TRUE(directory.FindInstantiation("test.*", "dtype=fp32", "")->verified.empty())
      << "a kernel name is matched as it is, never as a pattern";
}

TEST(ReadOnlyDirectory, ACorruptEntryIsNeverReturnedAndNothingIsWritten) {
  TempDir dir;
  Warm(dir.path());
  std::filesystem::path blob;
  {
    auto cache = testing::OpenCache(Options(dir.path()));
    blob = cache->Lookup(KeyFor(2))->blob_path;
  }
  testing::FlipBytes(blob, 100);
  const auto index_written = fs::last_write_time(dir.path() / "index.sqlite");
  ReadOnlyDirectory directory(dir.path());
  auto found = directory.FindInstantiation("test.kernel", "dtype=fp32", "sm_90");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->verified.size(), 1u);
  EXPECT_EQ(found->verified[0].meta.key, KeyFor(1));
  EXPECT_EQ(found->unverified, 1u);
  EXPECT_EQ(directory.Lookup(KeyFor(2), std::chrono::steady_clock::time_point::max()), nullptr);
  EXPECT_NE(directory.Lookup(KeyFor(3), std::chrono::steady_clock::time_point::max()), nullptr);
  auto compiled = std::make_shared<Entry>();
  compiled->meta = MetaFor(9);
  compiled->cubin = CubinFor(9);
  EXPECT_EQ(directory.Fill(compiled), compiled);
  EXPECT_TRUE(fs::exists(blob)) << "the daemon drops a corrupt blob, a reader leaves it";
  EXPECT_EQ(fs::last_write_time(dir.path() / "index.sqlite"), index_written);
  const StorageStats stats = directory.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.fills, 0u);
  EXPECT_EQ(stats.fill_failures, 1u);
  EXPECT_EQ(directory.level(), Level::kDirectory);
}

}  // namespace
}  // namespace jitd::cache
