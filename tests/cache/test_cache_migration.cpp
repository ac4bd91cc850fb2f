// Schema migration: an index written by schema version 1 or 2 opens, is
// migrated in place, and serves its entries; a read-only open reads a
// version 1 or 2 index as it is; a newer schema is refused clearly.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>

#include "testing.h"

namespace jitd::cache {
namespace {

namespace fs = std::filesystem;
using testing::CubinFor;
using testing::KeyFor;
using testing::MetaFor;
using testing::Options;
using testing::TempDir;

// The version 1 schema, as jitd first wrote it. Kept here verbatim: the test
// must not follow the code's idea of history.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (1);
CREATE TABLE entries (
  key TEXT PRIMARY KEY,
  checksum TEXT NOT NULL,
  kernel TEXT NOT NULL,
  arch TEXT NOT NULL,
  size INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL
);
CREATE INDEX entries_by_last_used ON entries(last_used_ms);
)sql";

void Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
}

// Publishes with the current code to get real blob files, then replaces
// the index with a version 1 index that names them. Returns each entry's
// (checksum, blob path).
std::vector<std::pair<std::string, std::string>> MakeVersion1Index(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> rows;
  {
    auto c = Cache::Open(Options(dir));
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return rows;
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE((*c)->Publish(MetaFor(i), CubinFor(i)).ok());
      auto e = (*c)->Lookup(KeyFor(i));
      rows.emplace_back(e->checksum, e->blob_path.string());
    }
  }
  fs::path index = dir / "index.sqlite";
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(index.string() + s);
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(index.c_str(), &db), SQLITE_OK);
  Exec(db, kSchemaV1);
  for (int i = 0; i < 3; ++i) {
    Exec(db, "INSERT INTO entries VALUES ('" + KeyFor(i) + "', '" + rows[i].first + "', 'test.kernel', 'sm_90', " +
                 std::to_string(fs::file_size(rows[i].second)) + ", 1000, " + std::to_string(2000 + i) + ")");
  }
  sqlite3_close(db);
  return rows;
}

TEST(Migration, Version1IndexIsMigratedAndServesItsEntries) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> rows = MakeVersion1Index(dir.path());
  ASSERT_EQ(rows.size(), 3u);
  const fs::path index = dir.path() / "index.sqlite";
  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok()) << c.status();
  for (int i = 0; i < 3; ++i) {
    auto e = (*c)->Lookup(KeyFor(i));
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->cubin, CubinFor(i));
  }
  auto s = (*c)->Stats();
  EXPECT_EQ(s->entries, 3u);
  EXPECT_EQ(s->pinned_entries, 0u);
  uint64_t bytes = 0;
  for (const auto& r : rows) bytes += fs::file_size(r.second);
  EXPECT_EQ(s->bytes, bytes) << "totals are computed from the migrated rows";
  ASSERT_TRUE((*c)->Pin(KeyFor(0), true).ok()) << "the new columns work";
  auto list = (*c)->List({});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 3u);
  for (const auto& e : *list) EXPECT_EQ(e.hits, 1u) << "hits start at 0 and count";

  sqlite3* check = nullptr;
  ASSERT_EQ(sqlite3_open(index.c_str(), &check), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(check, "SELECT version FROM schema_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 3);
  sqlite3_finalize(st);
  sqlite3_close(check);
}

// Version 2 had no options column: made here from a current index by
// dropping it, with entries whose blobs record their request options.
void MakeVersion2Index(const fs::path& dir) {
  {
    auto c = Cache::Open(Options(dir));
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < 2; ++i) {
      EntryMeta meta = MetaFor(i);
      if (i == 1) meta.request_options = {"--generate-line-info", "-DTILE=4"};
      ASSERT_TRUE((*c)->Publish(meta, CubinFor(i)).ok());
    }
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "index.sqlite").c_str(), &db), SQLITE_OK);
  Exec(db, "ALTER TABLE entries DROP COLUMN options; UPDATE schema_version SET version = 2");
  sqlite3_close(db);
}

TEST(Migration, Version2IndexGainsAnOptionsColumnAndNewEntriesFillIt) {
  TempDir dir;
  MakeVersion2Index(dir.path());
  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok()) << c.status();
  auto before = (*c)->List({});
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->size(), 2u);
  for (const EntryInfo& e : *before) EXPECT_TRUE(e.options.empty()) << "rows indexed before say none";
  EntryMeta meta = MetaFor(2);
  meta.request_options = {"-DTILE=8"};
  ASSERT_TRUE((*c)->Publish(meta, CubinFor(2)).ok());
  ListFilter with;
  with.options = "-DTILE=8";
  auto listed = (*c)->List(with);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().key, KeyFor(2));
  EXPECT_EQ(listed->front().options, std::vector<std::string>{"-DTILE=8"});
  ListFilter without;
  without.options = "";
  EXPECT_EQ((*c)->List(without)->size(), 2u);
}

TEST(Migration, AReadOnlyOpenReadsAVersion2IndexAsItIs) {
  TempDir dir;
  MakeVersion2Index(dir.path());
  CacheOptions options = Options(dir.path());
  options.read_only = true;
  options.background = false;
  auto c = Cache::Open(options);
  ASSERT_TRUE(c.ok()) << c.status();
  auto listed = (*c)->List({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);
  ListFilter without;
  without.options = "";
  EXPECT_EQ((*c)->List(without)->size(), 2u);
  auto e = (*c)->Lookup(KeyFor(1));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->cubin, CubinFor(1));
  EXPECT_EQ(e->meta.request_options, (std::vector<std::string>{"--generate-line-info", "-DTILE=4"}));
}

TEST(Migration, AReadOnlyOpenReadsAVersion1IndexAsItIs) {
  TempDir dir;
  ASSERT_EQ(MakeVersion1Index(dir.path()).size(), 3u);
  CacheOptions options = Options(dir.path());
  options.read_only = true;
  options.background = false;
  auto c = Cache::Open(options);
  ASSERT_TRUE(c.ok()) << c.status();
  // What the client's fallback asks: one instantiation, no params (version
  // 1 had none), no extra options.
  auto listed = (*c)->List({.kernel_glob = "test.kernel", .arch = "sm_90", .params = "", .options = ""});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 3u);
  EXPECT_TRUE((*c)->List({.params = "dtype=fp32"})->empty());
  auto e = (*c)->Lookup(KeyFor(2));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->cubin, CubinFor(2));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() / "index.sqlite").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 1) << "a read-only open migrates nothing";
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(Migration, AnIndexRebuiltFromTheBlobsKnowsEachEntrysRequestOptions) {
  TempDir dir;
  MakeVersion2Index(dir.path());
  fs::path index = dir.path() / "index.sqlite";
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(index.string() + s);
  auto c = Cache::Open(Options(dir.path()));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Verify(/*repair=*/true).ok());  // indexes the blobs without rows
  ListFilter with;
  with.options = "--generate-line-info -DTILE=4";
  auto listed = (*c)->List(with);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().key, KeyFor(1));
}

TEST(Migration, NewerSchemaIsRefusedWithAClearMessage) {
  TempDir dir;
  { ASSERT_TRUE(Cache::Open(Options(dir.path())).ok()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() / "index.sqlite").c_str(), &db), SQLITE_OK);
  Exec(db, "UPDATE schema_version SET version = 99");
  sqlite3_close(db);
  auto c = Cache::Open(Options(dir.path()));
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("newer than this jitd"), std::string_view::npos) << c.status();
}

}  // namespace
}  // namespace jitd::cache
