#include "jitd/read_only_directory.h"

#include <algorithm>

#include "jitd/base/status.h"

namespace jitd::cache {
namespace {

// `name` as a GLOB pattern matching only itself: the metacharacters in
// brackets ("[*]" matches "*").
std::string GlobLiteral(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '*' || c == '?' || c == '[' || c == ']') {
      out += '[';
      out += c;
      out += ']';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

ReadOnlyDirectory::ReadOnlyDirectory(std::filesystem::path dir) : dir_(std::move(dir)) {}

ReadOnlyDirectory::~ReadOnlyDirectory() = default;

absl::StatusOr<Cache*> ReadOnlyDirectory::Opened() {
  std::lock_guard lock(mu_);
  if (cache_ != nullptr) return cache_.get();
  CacheOptions options;
  options.dir = dir_;
  options.read_only = true;
  options.background = false;
  JITD_ASSIGN_OR_RETURN(std::unique_ptr<Cache> opened, Cache::Open(options));
  cache_ = std::move(opened);
  return cache_.get();
}

std::shared_ptr<const Entry> ReadOnlyDirectory::Find(const std::string& key, std::chrono::steady_clock::time_point) {
  absl::StatusOr<Cache*> cache = Opened();
  if (!cache.ok()) return nullptr;
  absl::StatusOr<Entry> found = (*cache)->Lookup(key);
  if (!found.ok()) return nullptr;  // a miss, or corrupt (Cache logs and skips it)
  return std::make_shared<const Entry>(*std::move(found));
}

std::shared_ptr<const Entry> ReadOnlyDirectory::Fill(std::shared_ptr<const Entry> entry) {
  CountFill(false);
  return entry;
}

absl::StatusOr<ReadOnlyDirectory::Instantiation> ReadOnlyDirectory::FindInstantiation(const std::string& kernel,
                                                                                      const std::string& params,
                                                                                      const std::string& arch) {
  JITD_ASSIGN_OR_RETURN(Cache * cache, Opened());
  ListFilter filter;
  filter.kernel_glob = GlobLiteral(kernel);
  filter.arch = arch;
  filter.params = params;
  filter.options = "";
  JITD_ASSIGN_OR_RETURN(std::vector<EntryInfo> rows, cache->List(filter));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const EntryInfo& a, const EntryInfo& b) { return a.created_unix_ms > b.created_unix_ms; });
  Instantiation found;
  for (const EntryInfo& row : rows) {
    absl::StatusOr<Entry> entry = cache->Lookup(row.key);
    if (!entry.ok()) {
      ++found.unverified;  // corrupt (Cache logs and skips it), or evicted since the listing
      continue;
    }
    found.verified.push_back(*std::move(entry));
  }
  return found;
}

}  // namespace jitd::cache
