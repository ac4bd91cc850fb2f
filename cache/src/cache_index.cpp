#include "cache_index.h"

#include <fcntl.h>
#include <unistd.h>

#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/cache.h"

namespace jitd::cache::detail {

using text::Cat;
using text::Join;
namespace {

// How long a connection waits for another process's write lock before it
// reports UNAVAILABLE. Writes are short (a publish, a batch of recency
// updates, an eviction batch), so waiting this long means something is wrong.
constexpr int kBusyTimeoutMs = 10000;

// Past this many WAL pages the background checkpoint truncates the WAL
// instead of leaving it to be reused (about 16 MiB with 4 KiB pages).
constexpr int kTruncateWalPages = 4096;

// Schema history. Each step takes the index from version i to i+1 and runs
// inside one transaction, so a crash mid-migration leaves the old version.
// Version 1 was the first schema; version 2 added params, NVRTC version,
// compile time, hit counts, pinning, trigger-kept totals and counters;
// version 3 the request's extra options ('' for rows indexed before).
constexpr const char* kMigrations[] = {
    // 0 -> 1
    R"sql(
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
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
)sql",
    // 1 -> 2
    R"sql(
ALTER TABLE entries ADD COLUMN params TEXT NOT NULL DEFAULT '';
ALTER TABLE entries ADD COLUMN nvrtc_version TEXT NOT NULL DEFAULT '';
ALTER TABLE entries ADD COLUMN compile_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN hits INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
DROP INDEX entries_by_last_used;
CREATE INDEX entries_lru ON entries(pinned, last_used_ms);
CREATE INDEX entries_by_kernel ON entries(kernel);
CREATE TABLE totals (
  id INTEGER PRIMARY KEY CHECK (id = 0),
  entries INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  pinned_entries INTEGER NOT NULL,
  pinned_bytes INTEGER NOT NULL
);
INSERT INTO totals SELECT 0, COUNT(*), COALESCE(SUM(size), 0), COALESCE(SUM(pinned), 0),
  COALESCE(SUM(size * pinned), 0) FROM entries;
CREATE TRIGGER entries_insert AFTER INSERT ON entries BEGIN
  UPDATE totals SET entries = entries + 1, bytes = bytes + NEW.size,
    pinned_entries = pinned_entries + NEW.pinned, pinned_bytes = pinned_bytes + NEW.size * NEW.pinned
  WHERE id = 0;
END;
CREATE TRIGGER entries_delete AFTER DELETE ON entries BEGIN
  UPDATE totals SET entries = entries - 1, bytes = bytes - OLD.size,
    pinned_entries = pinned_entries - OLD.pinned, pinned_bytes = pinned_bytes - OLD.size * OLD.pinned
  WHERE id = 0;
END;
CREATE TRIGGER entries_resize AFTER UPDATE OF size, pinned ON entries BEGIN
  UPDATE totals SET bytes = bytes - OLD.size + NEW.size,
    pinned_entries = pinned_entries - OLD.pinned + NEW.pinned,
    pinned_bytes = pinned_bytes - OLD.size * OLD.pinned + NEW.size * NEW.pinned
  WHERE id = 0;
END;
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
)sql",
    // 2 -> 3
    R"sql(
ALTER TABLE entries ADD COLUMN options TEXT NOT NULL DEFAULT '';
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

constexpr const char* kColumns =
    "key, checksum, kernel, params, arch, size, nvrtc_version, compile_ms, created_ms, last_used_ms, hits, pinned, "
    "options";
// The same from a version 2 index, which a read-only open reads as it is
// (a read-only client cannot migrate a cache an older jitd warmed).
constexpr const char* kColumnsV2 =
    "key, checksum, kernel, params, arch, size, nvrtc_version, compile_ms, created_ms, last_used_ms, hits, pinned, "
    "''";
// And from a version 1 index (the first): no params, NVRTC version,
// compile time, hits or pins yet. The client's fallback reads directories
// warmed by any jitd.
constexpr const char* kColumnsV1 = "key, checksum, kernel, '', arch, size, '', 0, created_ms, last_used_ms, 0, 0, ''";
constexpr int kOldestReadOnlyVersion = 1;

IndexRow ReadRow(const Statement& s) {
  IndexRow r;
  r.key = s.Text(0);
  r.checksum = s.Text(1);
  r.kernel = s.Text(2);
  r.params = s.Text(3);
  r.arch = s.Text(4);
  r.size = static_cast<uint64_t>(s.Int(5));
  r.nvrtc_version = s.Text(6);
  r.compile_ms = s.Real(7);
  r.created_ms = s.Int(8);
  r.last_used_ms = s.Int(9);
  r.hits = static_cast<uint64_t>(s.Int(10));
  r.pinned = s.Int(11) != 0;
  r.options = s.Text(12);
  return r;
}

// Builds "WHERE ..." with ?N placeholders and the values to bind, in order.
std::string WhereClause(const RowFilter& f, std::string_view params_column, std::string_view options_column,
                        std::vector<std::string>* text_args, std::optional<int64_t>* int_arg) {
  std::vector<std::string> terms;
  if (!f.keys.empty()) {
    std::vector<std::string> marks;
    for (const auto& k : f.keys) {
      text_args->push_back(k);
      marks.push_back("?");
    }
    terms.push_back(Cat("key IN (", Join(marks, ","), ")"));
  }
  if (!f.kernel_glob.empty()) {
    text_args->push_back(f.kernel_glob);
    terms.push_back("kernel GLOB ?");
  }
  if (!f.arch.empty()) {
    text_args->push_back(f.arch);
    terms.push_back("arch = ?");
  }
  if (f.params) {
    text_args->push_back(*f.params);
    terms.push_back(Cat(params_column, " = ?"));
  }
  if (f.options) {
    text_args->push_back(*f.options);
    terms.push_back(Cat(options_column, " = ?"));
  }
  if (f.unpinned_only) terms.push_back("pinned = 0");
  if (f.last_used_before_ms) {
    *int_arg = f.last_used_before_ms;
    terms.push_back("last_used_ms < ?");
  }
  return terms.empty() ? std::string() : Cat(" WHERE ", Join(terms, " AND "));
}

void BindFilter(Statement& s, const std::vector<std::string>& text_args, const std::optional<int64_t>& int_arg) {
  int i = 1;
  for (const auto& a : text_args) s.Bind(i++, std::string_view(a));
  if (int_arg) s.Bind(i++, *int_arg);
}

}  // namespace

struct CacheIndex::Reader {
  Database db;
  Statement find;
};

CacheIndex::CacheIndex(std::string uri, int flags, Database writer)
    : uri_(std::move(uri)), flags_(flags), writer_(std::move(writer)) {}
CacheIndex::~CacheIndex() = default;

absl::Status ConfigureConnection(Database& db, bool read_only) {
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  if (read_only) return absl::OkStatus();
  // synchronous=NORMAL in WAL mode: a commit does not fsync; durability of
  // the last few commits is traded for a hit path and publish path without
  // fsync. A lost row is recovered from its blob by reconcile.
  return db.Exec("PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0; PRAGMA foreign_keys=OFF;");
}

absl::StatusOr<std::unique_ptr<CacheIndex>> CacheIndex::Open(const std::filesystem::path& path, bool read_only) {
  std::string uri = Cat("file:", path.string());
  int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (read_only) uri += "?mode=ro";
  if (!read_only) {
    // Made 0600 here: SQLite would make it 0644, and gives its -wal and
    // -shm files the database file's mode.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
    if (fd >= 0) ::close(fd);
  }
  auto db = Database::Open(uri, flags);
  if (!db.ok() && read_only) {
    // A read-only directory cannot hold WAL's shared-memory file; an
    // immutable open reads the database as it is on disk.
    uri = Cat("file:", path.string(), "?immutable=1");
    db = Database::Open(uri, flags);
  }
  if (!db.ok()) return db.status();
  JITD_RETURN_IF_ERROR(ConfigureConnection(*db, read_only));
  if (!read_only) {
    JITD_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL;"));
  }
  std::unique_ptr<CacheIndex> index(new CacheIndex(uri, flags, std::move(*db)));
  if (read_only) {
    JITD_ASSIGN_OR_RETURN(auto st, index->writer_.Prepare("SELECT version FROM schema_version"));
    JITD_ASSIGN_OR_RETURN(auto row, st.Step());
    index->opened_at_version_ = row ? static_cast<int>(st.Int(0)) : 0;
    if (index->opened_at_version_ < kOldestReadOnlyVersion || index->opened_at_version_ > kSchemaVersion) {
      return absl::FailedPreconditionError(Cat("index schema version ", index->opened_at_version_, " is not ",
                                               kOldestReadOnlyVersion, "..", kSchemaVersion,
                                               " (read-only: cannot migrate)"));
    }
    index->schema_version_ = index->opened_at_version_;
    return index;
  }
  JITD_RETURN_IF_ERROR(index->Migrate());
  return index;
}

template <typename F>
absl::Status CacheIndex::WriteTransaction(F&& body) {
  std::lock_guard lock(write_mu_);
  JITD_RETURN_IF_ERROR(writer_.Exec("BEGIN IMMEDIATE"));
  absl::Status s = body(writer_);
  if (s.ok()) s = writer_.Exec("COMMIT");
  if (!s.ok()) (void)writer_.Exec("ROLLBACK");
  return s;
}

absl::Status CacheIndex::Migrate() {
  return WriteTransaction([&](Database& db) -> absl::Status {
    // Reading the schema inside the write transaction makes two processes
    // opening a new directory at once migrate it once, one after the other.
    int version = 0;
    {
      JITD_ASSIGN_OR_RETURN(
          auto has, db.Prepare("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'"));
      JITD_RETURN_IF_ERROR(has.Step().status());
      if (has.Int(0) > 0) {
        JITD_ASSIGN_OR_RETURN(auto st, db.Prepare("SELECT version FROM schema_version"));
        JITD_ASSIGN_OR_RETURN(auto r, st.Step());
        if (r) version = static_cast<int>(st.Int(0));
      }
    }
    opened_at_version_ = version;
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(Cat("index schema version ", version,
                                               " is newer than this jitd understands (", kSchemaVersion,
                                               "); upgrade jitd or use another cache directory"));
    }
    for (int v = version; v < kSchemaVersion; ++v) {
      if (auto s = db.Exec(kMigrations[v]); !s.ok()) {
        return absl::Status(s.code(), Cat("migrating the index from version ", v, ": ", s.message()));
      }
    }
    if (version != kSchemaVersion) {
      JITD_RETURN_IF_ERROR(
          db.Exec(Cat("DELETE FROM schema_version; INSERT INTO schema_version VALUES (", kSchemaVersion, ");")));
    }
    return absl::OkStatus();
  });
}

const char* CacheIndex::Columns() const {
  return schema_version_ >= 3 ? kColumns : (schema_version_ == 2 ? kColumnsV2 : kColumnsV1);
}
const char* CacheIndex::ParamsColumn() const { return schema_version_ >= 2 ? "params" : "''"; }
const char* CacheIndex::OptionsColumn() const { return schema_version_ >= 3 ? "options" : "''"; }

absl::StatusOr<std::unique_ptr<CacheIndex::Reader>> CacheIndex::AcquireReader() {
  {
    std::lock_guard lock(readers_mu_);
    if (!readers_.empty()) {
      auto r = std::move(readers_.back());
      readers_.pop_back();
      return r;
    }
  }
  JITD_ASSIGN_OR_RETURN(auto db, Database::Open(uri_, flags_ & ~SQLITE_OPEN_CREATE));
  JITD_RETURN_IF_ERROR(ConfigureConnection(db, true));
  auto reader = std::make_unique<Reader>();
  reader->db = std::move(db);
  JITD_ASSIGN_OR_RETURN(auto find, reader->db.Prepare(Cat("SELECT ", Columns(), " FROM entries WHERE key = ?")));
  reader->find = std::move(find);
  return reader;
}

void CacheIndex::ReleaseReader(std::unique_ptr<Reader> reader) {
  // Enough for the request threads of a 2..16 core host; more are closed.
  constexpr size_t kMaxPooledReaders = 16;
  std::lock_guard lock(readers_mu_);
  if (readers_.size() < kMaxPooledReaders) readers_.push_back(std::move(reader));
}

absl::StatusOr<std::optional<IndexRow>> CacheIndex::Find(const std::string& key) {
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  Statement& st = reader->find;
  st.Reset().Bind(1, std::string_view(key));
  auto row = st.Step();
  std::optional<IndexRow> out;
  if (row.ok() && *row) out = ReadRow(st);
  st.Reset();
  ReleaseReader(std::move(reader));
  if (!row.ok()) return row.status();
  return out;
}

absl::StatusOr<std::string> CacheIndex::InsertIfAbsent(const IndexRow& r, const std::function<bool()>& still_valid) {
  std::string stored;
  auto s = WriteTransaction([&](Database& db) -> absl::Status {
    if (still_valid) {
      JITD_ASSIGN_OR_RETURN(auto sel, db.Prepare("SELECT checksum FROM entries WHERE key = ?"));
      sel.Bind(1, std::string_view(r.key));
      JITD_ASSIGN_OR_RETURN(auto row, sel.Step());
      if (row) {
        stored = sel.Text(0);
        return absl::OkStatus();
      }
      if (!still_valid()) return absl::OkStatus();
    }
    JITD_ASSIGN_OR_RETURN(auto ins,
                          db.Prepare(Cat("INSERT INTO entries (", kColumns,
                                         ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key) DO NOTHING")));
    ins.Bind(1, std::string_view(r.key)).Bind(2, std::string_view(r.checksum)).Bind(3, std::string_view(r.kernel));
    ins.Bind(4, std::string_view(r.params)).Bind(5, std::string_view(r.arch)).Bind(6, static_cast<int64_t>(r.size));
    ins.Bind(7, std::string_view(r.nvrtc_version)).Bind(8, r.compile_ms).Bind(9, r.created_ms);
    ins.Bind(10, r.last_used_ms).Bind(11, static_cast<int64_t>(r.hits)).Bind(12, static_cast<int64_t>(r.pinned));
    ins.Bind(13, std::string_view(r.options));
    JITD_RETURN_IF_ERROR(ins.Run());
    if (db.Changes() == 1) {
      stored = r.checksum;
      return absl::OkStatus();
    }
    JITD_ASSIGN_OR_RETURN(auto sel, db.Prepare("SELECT checksum FROM entries WHERE key = ?"));
    sel.Bind(1, std::string_view(r.key));
    JITD_ASSIGN_OR_RETURN(auto row, sel.Step());
    if (row) stored = sel.Text(0);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return stored;
}

absl::StatusOr<std::vector<bool>> CacheIndex::Remove(const std::vector<std::pair<std::string, std::string>>& rows,
                                                     const std::function<void(size_t)>& on_removed) {
  std::vector<bool> removed(rows.size(), false);
  auto s = WriteTransaction([&](Database& db) -> absl::Status {
    JITD_ASSIGN_OR_RETURN(auto del, db.Prepare("DELETE FROM entries WHERE key = ? AND checksum = ?"));
    for (size_t i = 0; i < rows.size(); ++i) {
      del.Reset().Bind(1, std::string_view(rows[i].first)).Bind(2, std::string_view(rows[i].second));
      JITD_RETURN_IF_ERROR(del.Run());
      removed[i] = db.Changes() == 1;
    }
    // After every DELETE succeeded: a failed statement rolls back, and then
    // no file may be gone.
    if (on_removed) {
      for (size_t i = 0; i < rows.size(); ++i) {
        if (removed[i]) on_removed(i);
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return removed;
}

absl::StatusOr<std::optional<IndexRow>> CacheIndex::FindSerialized(const std::string& key) {
  std::optional<IndexRow> out;
  auto s = WriteTransaction([&](Database& db) -> absl::Status {
    JITD_ASSIGN_OR_RETURN(auto st, db.Prepare(Cat("SELECT ", Columns(), " FROM entries WHERE key = ?")));
    st.Bind(1, std::string_view(key));
    JITD_ASSIGN_OR_RETURN(auto row, st.Step());
    if (row) out = ReadRow(st);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<IndexRow>> CacheIndex::Select(const RowFilter& filter, bool newest_first, size_t limit) {
  std::vector<IndexRow> out;
  JITD_RETURN_IF_ERROR(Visit(filter, newest_first, limit, [&](const IndexRow& row) {
    out.push_back(row);
    return true;
  }));
  return out;
}

absl::Status CacheIndex::Visit(const RowFilter& filter, bool newest_first, size_t limit,
                               const std::function<bool(const IndexRow&)>& visit) {
  std::vector<std::string> text_args;
  std::optional<int64_t> int_arg;
  std::string sql = Cat(
      "SELECT ", Columns(), " FROM entries", WhereClause(filter, ParamsColumn(), OptionsColumn(), &text_args, &int_arg),
      newest_first ? " ORDER BY last_used_ms DESC, created_ms DESC" : " ORDER BY last_used_ms ASC, created_ms ASC");
  if (limit > 0) text::Append(sql, " LIMIT ", limit);
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  absl::Status status;
  {
    auto st = reader->db.Prepare(sql);
    if (!st.ok()) {
      status = st.status();
    } else {
      BindFilter(*st, text_args, int_arg);
      while (true) {
        auto row = st->Step();
        if (!row.ok()) {
          status = row.status();
          break;
        }
        if (!*row || !visit(ReadRow(*st))) break;
      }
    }
  }
  ReleaseReader(std::move(reader));
  return status;
}

absl::StatusOr<uint64_t> CacheIndex::LargestInstantiation() {
  const std::string sql = Cat("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM entries GROUP BY kernel, ",
                              ParamsColumn(), ", arch, ", OptionsColumn(), ")");
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  absl::StatusOr<uint64_t> out = uint64_t{0};
  {
    auto st = reader->db.Prepare(sql);
    if (!st.ok()) {
      out = st.status();
    } else if (auto row = st->Step(); !row.ok()) {
      out = row.status();
    } else {
      out = static_cast<uint64_t>(st->Int(0));
    }
  }
  ReleaseReader(std::move(reader));
  return out;
}

absl::StatusOr<uint64_t> CacheIndex::Count(const RowFilter& filter) {
  std::vector<std::string> text_args;
  std::optional<int64_t> int_arg;
  std::string sql =
      Cat("SELECT count(*) FROM entries", WhereClause(filter, ParamsColumn(), OptionsColumn(), &text_args, &int_arg));
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  absl::StatusOr<uint64_t> out = uint64_t{0};
  {
    auto st = reader->db.Prepare(sql);
    if (!st.ok()) {
      out = st.status();
    } else {
      BindFilter(*st, text_args, int_arg);
      auto row = st->Step();
      if (!row.ok())
        out = row.status();
      else
        out = static_cast<uint64_t>(st->Int(0));
    }
  }
  ReleaseReader(std::move(reader));
  return out;
}

absl::Status CacheIndex::Apply(const std::vector<RecencyUpdate>& updates,
                               const std::map<std::string, uint64_t>& counters) {
  if (updates.empty() && counters.empty()) return absl::OkStatus();
  return WriteTransaction([&](Database& db) -> absl::Status {
    JITD_ASSIGN_OR_RETURN(
        auto up, db.Prepare("UPDATE entries SET last_used_ms = max(last_used_ms, ?), hits = hits + ? WHERE key = ?"));
    for (const auto& u : updates) {
      up.Reset().Bind(1, u.last_used_ms).Bind(2, static_cast<int64_t>(u.hits)).Bind(3, std::string_view(u.key));
      JITD_RETURN_IF_ERROR(up.Run());
    }
    JITD_ASSIGN_OR_RETURN(auto add, db.Prepare("INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT(name) DO "
                                               "UPDATE SET value = value + excluded.value"));
    for (const auto& [name, delta] : counters) {
      if (delta == 0) continue;
      add.Reset().Bind(1, std::string_view(name)).Bind(2, static_cast<int64_t>(delta));
      JITD_RETURN_IF_ERROR(add.Run());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> CacheIndex::SetPinned(const std::string& key, bool pinned) {
  bool found = false;
  auto s = WriteTransaction([&](Database& db) -> absl::Status {
    JITD_ASSIGN_OR_RETURN(auto up, db.Prepare("UPDATE entries SET pinned = ? WHERE key = ?"));
    up.Bind(1, static_cast<int64_t>(pinned)).Bind(2, std::string_view(key));
    JITD_RETURN_IF_ERROR(up.Run());
    found = db.Changes() == 1;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return found;
}

absl::StatusOr<Totals> CacheIndex::GetTotals() {
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  absl::StatusOr<Totals> out = Totals{};
  {
    auto st = reader->db.Prepare("SELECT entries, bytes, pinned_entries, pinned_bytes FROM totals WHERE id = 0");
    if (!st.ok()) {
      out = st.status();
    } else if (auto row = st->Step(); !row.ok()) {
      out = row.status();
    } else if (*row) {
      out = Totals{static_cast<uint64_t>(st->Int(0)), static_cast<uint64_t>(st->Int(1)),
                   static_cast<uint64_t>(st->Int(2)), static_cast<uint64_t>(st->Int(3))};
    }
  }
  ReleaseReader(std::move(reader));
  return out;
}

absl::StatusOr<std::map<std::string, uint64_t>> CacheIndex::Counters() {
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  absl::StatusOr<std::map<std::string, uint64_t>> out = std::map<std::string, uint64_t>{};
  {
    auto st = reader->db.Prepare("SELECT name, value FROM counters");
    if (!st.ok()) {
      out = st.status();
    } else {
      while (true) {
        auto row = st->Step();
        if (!row.ok()) {
          out = row.status();
          break;
        }
        if (!*row) break;
        (*out)[st->Text(0)] = static_cast<uint64_t>(st->Int(1));
      }
    }
  }
  ReleaseReader(std::move(reader));
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> CacheIndex::KeysWithPrefix(const std::string& prefix) {
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  std::vector<std::pair<std::string, std::string>> out;
  absl::Status status;
  {
    // A range over the primary key: keys are ASCII, so every key with the
    // prefix sorts below the prefix followed by DEL.
    auto st = reader->db.Prepare("SELECT key, checksum FROM entries WHERE key >= ?1 AND key < ?2");
    if (!st.ok()) {
      status = st.status();
    } else {
      st->Bind(1, std::string_view(prefix));
      st->Bind(2, std::string_view(prefix + "\x7f"));
      while (true) {
        absl::StatusOr<bool> row = st->Step();
        if (!row.ok() || !*row) {
          status = row.status();
          break;
        }
        out.emplace_back(st->Text(0), st->Text(1));
      }
    }
  }
  ReleaseReader(std::move(reader));
  JITD_RETURN_IF_ERROR(status);
  return out;
}

absl::Status CacheIndex::Checkpoint() {
  std::lock_guard lock(write_mu_);
  int log_pages = 0, checkpointed = 0;
  int rc = sqlite3_wal_checkpoint_v2(writer_.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_pages, &checkpointed);
  if (rc == SQLITE_OK && log_pages > kTruncateWalPages && checkpointed == log_pages) {
    rc = sqlite3_wal_checkpoint_v2(writer_.get(), nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  }
  // BUSY means another process holds a lock; the next round will catch up.
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) return SqliteError(rc, "wal checkpoint", writer_.get());
  return absl::OkStatus();
}

absl::StatusOr<std::string> CacheIndex::IntegrityCheck() {
  JITD_ASSIGN_OR_RETURN(auto reader, AcquireReader());
  absl::StatusOr<std::string> out = std::string();
  {
    auto st = reader->db.Prepare("PRAGMA quick_check");
    if (!st.ok()) {
      out = st.status();
    } else {
      std::vector<std::string> lines;
      while (true) {
        auto row = st->Step();
        if (!row.ok()) {
          out = row.status();
          break;
        }
        if (!*row) {
          out = Join(lines, "; ");
          break;
        }
        lines.push_back(st->Text(0));
      }
    }
  }
  ReleaseReader(std::move(reader));
  return out;
}

}  // namespace jitd::cache::detail
