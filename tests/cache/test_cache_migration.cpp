// Schema migration: an index written by schema version 1 opens, is migrated
// in place, and serves its entries; a newer schema is refused clearly.
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

TEST(Migration, Version1IndexIsMigratedAndServesItsEntries) {
  TempDir dir;
  // Publish with the current code to get real blob files, then replace the
  // index with a version 1 index that names them.
  std::vector<std::pair<std::string, std::string>> rows;  // key, blob file name
  {
    auto c = Cache::Open(Options(dir.path()));
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE((*c)->Publish(MetaFor(i), CubinFor(i)).ok());
      auto e = (*c)->Lookup(KeyFor(i));
      rows.emplace_back(e->checksum, e->blob_path.string());
    }
  }
  fs::path index = dir.path() / "index.sqlite";
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(index.string() + s);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(index.c_str(), &db), SQLITE_OK);
  Exec(db, kSchemaV1);
  for (int i = 0; i < 3; ++i) {
    Exec(db, "INSERT INTO entries VALUES ('" + KeyFor(i) + "', '" + rows[i].first + "', 'test.kernel', 'sm_90', " +
                 std::to_string(fs::file_size(rows[i].second)) + ", 1000, " + std::to_string(2000 + i) + ")");
  }
  sqlite3_close(db);

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
  EXPECT_EQ(sqlite3_column_int(st, 0), 2);
  sqlite3_finalize(st);
  sqlite3_close(check);
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
