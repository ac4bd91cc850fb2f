// Thin RAII over the SQLite C API: a connection and a prepared statement.
// Errors become absl::Status values carrying SQLite's message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jitd/base/text.h"

namespace jitd::cache::detail {

using text::Cat;
using text::Join;

// Maps a SQLite result code to a status: busy/locked become UNAVAILABLE (a
// retry may succeed), full disk RESOURCE_EXHAUSTED, corruption DATA_LOSS.
inline absl::Status SqliteError(int rc, std::string_view what, sqlite3* db) {
  std::string msg = Cat(what, ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept {
    std::swap(db_, o.db_);
    std::swap(stmt_, o.stmt_);
    return *this;
  }
  ~Statement() { sqlite3_finalize(stmt_); }

  // Clears bindings and rewinds; call before reusing a cached statement.
  Statement& Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return *this;
  }
  Statement& Bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // True while a row is available; an error ends iteration with a status.
  absl::StatusOr<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    absl::Status s = SqliteError(rc, "sqlite step", db_);
    sqlite3_reset(stmt_);
    return s;
  }
  absl::Status Run() {
    auto r = Step();
    sqlite3_reset(stmt_);
    return r.status();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  Database() = default;
  explicit Database(sqlite3* db) : db_(db) {}
  Database(Database&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Database& operator=(Database&& o) noexcept {
    std::swap(db_, o.db_);
    return *this;
  }
  ~Database() { sqlite3_close_v2(db_); }

  static absl::StatusOr<Database> Open(const std::string& uri, int flags) {
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(uri.c_str(), &db, flags | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    Database out(db);
    if (rc != SQLITE_OK) return SqliteError(rc, Cat("open ", uri), db);
    sqlite3_extended_result_codes(db, 1);
    return out;
  }

  absl::Status Exec(std::string_view sql) {
    char* err = nullptr;
    std::string s(sql);
    int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return absl::OkStatus();
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    absl::Status st = SqliteError(rc, "sqlite exec", db_);
    return absl::Status(st.code(), Cat("sqlite: ", msg, " (in: ", sql.substr(0, 80), ")"));
  }

  absl::StatusOr<Statement> Prepare(std::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc =
        sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(rc, Cat("prepare ", sql.substr(0, 60)), db_);
    return Statement(db_, stmt);
  }

  int Changes() const { return sqlite3_changes(db_); }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace jitd::cache::detail
