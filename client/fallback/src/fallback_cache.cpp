// jitd::OpenFallbackCache: a warmed cache directory read without the cache
// library. It runs one query on index.sqlite, read-only (the index's schema
// is cache/src/cache_index.cpp's; every version since the first is read),
// and decodes and verifies each candidate blob with jitd_blob, as the cache's
// own Lookup() does. It never writes: a corrupt blob is skipped, and left to
// the daemon to drop.
#include <sqlite3.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/blob.h"
#include "jitd/client_fallback.h"
#include "jitd/detail/sqlite.h"

namespace jitd {
namespace {

using cache::detail::Database;
using cache::detail::Statement;
using text::Cat;

// An index row of the instantiation asked for.
struct Row {
  std::string key;
  std::string checksum;
  std::string arch;
  int64_t created_ms = 0;
};

KernelBinary ToBinary(cache::EntryMeta meta, std::string cubin, const std::filesystem::path& path) {
  KernelBinary binary;
  binary.key = std::move(meta.key);
  binary.cubin = std::move(cubin);
  for (cache::Symbol& symbol : meta.symbols) {
    binary.symbols.push_back({std::move(symbol.name_expression), std::move(symbol.lowered_name)});
  }
  binary.arch = std::move(meta.arch);
  binary.source = v1::GetKernelResponse::FALLBACK;
  binary.compile_ms = meta.compile_ms;
  binary.log = std::move(meta.log);
  binary.nvrtc_version = std::move(meta.nvrtc_version);
  binary.blob_path = path.string();
  return binary;
}

class FallbackCache final : public KernelFallback {
 public:
  explicit FallbackCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  absl::StatusOr<KernelBinary> Find(const KernelSpec& spec) override {
    const std::string params = CanonicalParams(spec.params);
    const std::string what = text::Instantiation(spec.kernel, params, spec.arch);
    const std::string where = Cat("fallback cache ", dir_.string());
    if (!spec.options.empty()) {
      return absl::FailedPreconditionError(
          Cat(where, " answers requests without extra options only; ", what, " has ", text::Join(spec.options, " ")));
    }
    if (spec.fleet || !spec.archs.empty()) {
      return absl::FailedPreconditionError(
          Cat(where, " holds cubins, one arch each; a fatbin (archs, fleet) is made by the daemon only"));
    }
    absl::StatusOr<std::vector<Row>> rows = Rows(spec.kernel, params, spec.arch);
    if (!rows.ok()) {
      const absl::StatusCode code =
          absl::IsUnavailable(rows.status()) ? absl::StatusCode::kUnavailable : absl::StatusCode::kFailedPrecondition;
      return absl::Status(code, Cat(where, ": ", rows.status().message()));
    }
    if (rows->empty()) return absl::NotFoundError(Cat(where, " has no entry for ", what));
    if (spec.arch.empty()) {
      std::set<std::string> archs;
      for (const Row& row : *rows) archs.insert(row.arch);
      if (archs.size() > 1) {
        return absl::FailedPreconditionError(Cat(where, " has ", what, " for several archs (", text::Join(archs, ", "),
                                                 ") and no CUDA device here says which; name the arch"));
      }
    }
    std::stable_sort(rows->begin(), rows->end(),
                     [](const Row& a, const Row& b) { return a.created_ms > b.created_ms; });
    std::optional<KernelBinary> best;
    size_t best_options = 0;
    size_t unverified = 0;
    for (const Row& row : *rows) {
      cache::EntryMeta meta;
      std::string cubin;
      const std::filesystem::path path = dir_ / cache::BlobFileRelativePath(row.key, row.checksum);
      if (!Verified(path, row, &meta, &cubin)) {
        ++unverified;  // corrupt, or evicted since the query
        continue;
      }
      if (!best || meta.options.size() < best_options) {
        best_options = meta.options.size();
        best = ToBinary(std::move(meta), std::move(cubin), path);
      }
    }
    if (!best) {
      return absl::NotFoundError(Cat(where, ": ", unverified, unverified == 1 ? " entry" : " entries", " for ", what,
                                     " failed verification (a corrupt blob is never served)"));
    }
    return *std::move(best);
  }

 private:
  // The blob of `row`, decoded, if it is the intact blob the row names.
  static bool Verified(const std::filesystem::path& path, const Row& row, cache::EntryMeta* meta, std::string* cubin) {
    absl::StatusOr<std::string> bytes = files::ReadWholeFile(path);
    if (!bytes.ok()) return false;
    if (!cache::DecodeBlob(*bytes, meta, cubin).ok()) return false;
    return cache::StoredBlobChecksum(*bytes) == row.checksum && meta->key == row.key;
  }

  // The index, opened read-only at first use; an open that failed (the
  // directory not warmed yet) is tried again at the next Find().
  absl::StatusOr<Database*> Index() {
    if (db_.get() != nullptr) return &db_;
    const std::filesystem::path path = dir_ / "index.sqlite";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return absl::FailedPreconditionError(
          Cat("no cache index at ", path.string(), " (has this directory been warmed? jitd warm --cache-dir DIR)"));
    }
    absl::StatusOr<Database> db = Database::Open(Cat("file:", path.string(), "?mode=ro"), SQLITE_OPEN_READONLY);
    if (!db.ok()) {
      // A read-only directory cannot hold WAL's shared-memory file; an
      // immutable open reads the database as it is on disk.
      db = Database::Open(Cat("file:", path.string(), "?immutable=1"), SQLITE_OPEN_READONLY);
    }
    if (!db.ok()) return db.status();
    sqlite3_busy_timeout(db->get(), 2000);
    JITD_ASSIGN_OR_RETURN(Statement version, db->Prepare("SELECT version FROM schema_version"));
    JITD_ASSIGN_OR_RETURN(bool has, version.Step());
    schema_version_ = has ? version.Int(0) : 0;
    if (schema_version_ < 1) return absl::FailedPreconditionError("index.sqlite has no schema version");
    db_ = *std::move(db);
    return &db_;
  }

  absl::StatusOr<std::vector<Row>> Rows(const std::string& kernel, const std::string& params, const std::string& arch) {
    std::lock_guard lock(mu_);
    JITD_ASSIGN_OR_RETURN(Database * db, Index());
    // Version 2 added params, 3 the request's options: before, every row has
    // none of either. Never a cubin that a request built with extra options.
    const char* params_column = schema_version_ >= 2 ? "params" : "''";
    const char* options_column = schema_version_ >= 3 ? "options" : "''";
    JITD_ASSIGN_OR_RETURN(
        Statement query,
        db->Prepare(Cat("SELECT key, checksum, arch, created_ms FROM entries WHERE kernel = ?1 AND ", params_column,
                        " = ?2 AND ", options_column, " = '' AND (?3 = '' OR arch = ?3)")));
    query.Bind(1, std::string_view(kernel)).Bind(2, std::string_view(params)).Bind(3, std::string_view(arch));
    std::vector<Row> rows;
    while (true) {
      JITD_ASSIGN_OR_RETURN(bool more, query.Step());
      if (!more) break;
      rows.push_back({query.Text(0), query.Text(1), query.Text(2), query.Int(3)});
    }
    return rows;
  }

  const std::filesystem::path dir_;
  std::mutex mu_;  // guards db_ and schema_version_
  Database db_;
  int64_t schema_version_ = 0;
};

}  // namespace

std::unique_ptr<KernelFallback> OpenFallbackCache(const std::filesystem::path& dir) {
  return std::make_unique<FallbackCache>(dir);
}

}  // namespace jitd
