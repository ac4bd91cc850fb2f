// Cache's reconcile (the index and the blob files made to agree, at open
// and in Verify) and Verify itself.
#include <spdlog/spdlog.h>

#include <unordered_set>

#include "cache_impl.h"
#include "jitd/base/status.h"

namespace jitd::cache {
absl::StatusOr<VerifyReport> Cache::Impl::Verify(bool repair) {
  if (repair && opts_.read_only) return absl::FailedPreconditionError("cache opened read-only: cannot repair");
  VerifyReport report;
  auto integrity = index_->IntegrityCheck();
  report.index_integrity = integrity.ok() ? *integrity : integrity.status().ToString();
  JITD_ASSIGN_OR_RETURN(std::vector<IndexRow> rows, index_->Select(RowFilter{}, false, 0));
  for (const auto& r : rows) {
    ++report.checked;
    fs::path path = blobs_.PathFor(r.key, r.checksum);
    auto bytes = blobs_.Read(path);
    std::string problem;
    bool missing = false;
    if (!bytes.ok()) {
      missing = absl::IsNotFound(bytes.status());
      problem = missing ? "blob file missing" : std::string(bytes.status().message());
    } else if (auto s = DecodeBlob(*bytes, nullptr, nullptr); !s.ok()) {
      problem = std::string(s.message());
    } else if (StoredBlobChecksum(*bytes) != r.checksum) {
      problem = "blob does not match its index row";
    }
    if (problem.empty()) {
      ++report.ok;
      continue;
    }
    if (missing) {
      // An entry evicted while we read is not a problem. Evictions delete
      // row and file in one write transaction, so the question is asked
      // under the write lock: no eviction is half done then.
      bool really_missing = false;
      if (repair) {
        really_missing = DropCorrupt(r.key, r.checksum, path, problem, /*missing=*/true);
      } else {
        auto again = index_->FindSerialized(r.key);
        std::error_code ec;
        really_missing = again.ok() && *again && (*again)->checksum == r.checksum && !fs::exists(path, ec) && !ec;
      }
      if (!really_missing) {
        --report.checked;
        continue;
      }
      ++report.missing_blobs;
      report.problems.push_back(Cat(r.key, " (", r.kernel, " ", r.arch, "): ", problem));
      if (repair) ++report.repaired;
      continue;
    }
    ++report.corrupt;
    report.problems.push_back(Cat(r.key, " (", r.kernel, " ", r.arch, "): ", problem));
    if (repair) {
      DropCorrupt(r.key, r.checksum, path, problem);
      ++report.repaired;
    }
  }
  // Under maintain_mu_: this process's budget eviction and reconcile do
  // not interleave with it (other processes are kept apart by the index's
  // write transactions).
  std::lock_guard lock(maintain_mu_);
  JITD_RETURN_IF_ERROR(Reconcile(&report, repair, /*drop_missing_rows=*/false));
  return report;
}

// One Reconcile pass over the blob files: the rows read before it, what it
// has found, and the report it fills (may be null).
struct Cache::Impl::ReconcileWalk {
  std::unordered_map<std::string, std::string> rows;  // key -> checksum
  std::unordered_set<std::string> seen;               // keys whose blob is the row's
  size_t adopted = 0, removed = 0;
  VerifyReport* report = nullptr;
  bool repair = true;

  void Report(const fs::path& path, std::string_view what) {
    if (report == nullptr) return;
    ++report->orphan_blobs;
    report->problems.push_back(Cat(path.string(), what));
  }
  // The blob reported last turned out to be fine.
  void Unreport() {
    if (report == nullptr) return;
    --report->orphan_blobs;
    report->problems.pop_back();
  }
  void Repaired() {
    if (report != nullptr) ++report->repaired;
  }
};

absl::Status Cache::Impl::Reconcile(VerifyReport* report, bool repair, bool drop_missing_rows) {
  // One shard of blob files at a time, against the rows of that shard's
  // keys only: memory stays one shard's (about 400 rows at 100k entries),
  // not the whole index's.
  ReconcileWalk walk;
  walk.report = report;
  walk.repair = repair;
  const std::vector<std::string> shards =
      blobs_.Shards([&](const fs::path& path) { ReconcileBlob(walk, path, {}, {}); });
  size_t dropped = 0;
  for (const std::string& shard : shards) {
    walk.rows.clear();
    walk.seen.clear();
    if (shard.size() == 2) {
      JITD_ASSIGN_OR_RETURN(auto keys, index_->KeysWithPrefix(shard));
      walk.rows.insert(keys.begin(), keys.end());
    }
    blobs_.ForEachBlobIn(shard, [&](const fs::path& path, std::string_view key, std::string_view checksum) {
      ReconcileBlob(walk, path, key, checksum);
    });
    if (drop_missing_rows) {
      JITD_ASSIGN_OR_RETURN(size_t gone, DropRowsWithoutBlobs(walk));
      dropped += gone;
    }
  }
  if (drop_missing_rows) {
    // Rows of keys whose shard directory does not exist at all: keys are
    // lowercase hex (IsValidKey), so their shards are the 256 two-digit
    // prefixes, each looked up by its range of the primary key.
    const std::unordered_set<std::string> present(shards.begin(), shards.end());
    constexpr char kHex[] = "0123456789abcdef";
    for (int i = 0; i < 256; ++i) {
      const std::string prefix = {kHex[i / 16], kHex[i % 16]};
      if (present.count(prefix) != 0) continue;
      walk.rows.clear();
      walk.seen.clear();
      JITD_ASSIGN_OR_RETURN(auto keys, index_->KeysWithPrefix(prefix));
      if (keys.empty()) continue;
      walk.rows.insert(keys.begin(), keys.end());
      JITD_ASSIGN_OR_RETURN(size_t gone, DropRowsWithoutBlobs(walk));
      dropped += gone;
    }
  }
  if (walk.adopted + walk.removed + dropped > 0) {
    spdlog::info(
        "cache: reconciled {}: indexed {} blobs without rows, removed {} stray blobs, dropped {} rows "
        "without blobs",
        opts_.dir.string(), walk.adopted, walk.removed, dropped);
  }
  return absl::OkStatus();
}

void Cache::Impl::ReconcileBlob(ReconcileWalk& walk, const fs::path& path, std::string_view key,
                                std::string_view checksum) {
  if (key.empty()) {
    if (walk.report) walk.report->problems.push_back(Cat(path.string(), ": not a jitd blob file"));
    return;
  }
  std::string k(key);
  auto it = walk.rows.find(k);
  if (it != walk.rows.end() && it->second == checksum) {
    walk.seen.insert(k);
    return;
  }
  walk.Report(path, ": blob without an index row");
  if (!walk.repair) return;
  if (it != walk.rows.end()) {
    // The rows were read before the walk: the entry may have been
    // evicted and published again since, with this very blob. Only a
    // blob that is not the key's current one is a stray.
    auto now_row = index_->Find(k);
    if (!now_row.ok()) return;
    if (*now_row && (*now_row)->checksum == checksum) {
      walk.seen.insert(k);
      walk.Unreport();
      return;
    }
    if (*now_row) {
      blobs_.Remove(path);  // the loser of a publish race, or a stale copy
      ++walk.removed;
      walk.Repaired();
      return;
    }
    // No row now: an orphan, adopted if intact.
  }
  AdoptOrphan(walk, path, k, checksum);
}

void Cache::Impl::AdoptOrphan(ReconcileWalk& walk, const fs::path& path, const std::string& key,
                              std::string_view checksum) {
  auto bytes = blobs_.Read(path);
  EntryMeta meta;
  if (!bytes.ok()) return;
  if (!DecodeBlob(*bytes, &meta, nullptr).ok() || meta.key != key || StoredBlobChecksum(*bytes) != checksum) {
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    blobs_.Remove(path);
    ++walk.removed;
    walk.Repaired();
    return;
  }
  // Adopted only if the file is still there under the write lock: an
  // eviction in another process deletes its files inside its own
  // transaction, so this never brings back a row for a blob that is
  // being deleted.
  auto stored = index_->InsertIfAbsent(RowFromMeta(meta, std::string(checksum), bytes->size()), [&] {
    std::error_code ec;
    return fs::exists(path, ec);
  });
  if (stored.ok() && stored->empty()) {
    // Gone meanwhile: evicted. Not a problem, nothing repaired.
    walk.Unreport();
    return;
  }
  if (stored.ok() && *stored != checksum) {
    blobs_.Remove(path);
    ++walk.removed;
  } else if (stored.ok()) {
    ++walk.adopted;
    walk.seen.insert(key);
  }
  walk.Repaired();
}

absl::StatusOr<size_t> Cache::Impl::DropRowsWithoutBlobs(const ReconcileWalk& walk) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [key, checksum] : walk.rows) {
    if (walk.seen.count(key)) continue;
    std::error_code ec;
    if (fs::exists(blobs_.PathFor(key, checksum), ec) || ec) continue;
    pairs.emplace_back(key, checksum);
  }
  if (pairs.empty()) return 0;
  JITD_ASSIGN_OR_RETURN(auto done, index_->Remove(pairs));
  std::vector<std::string> dropped_keys;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if ((done)[i]) dropped_keys.push_back(pairs[i].first);
  }
  corrupt_.fetch_add(dropped_keys.size(), std::memory_order_relaxed);
  NotifyRemoved(dropped_keys);
  return dropped_keys.size();
}

}  // namespace jitd::cache
