#include "fallback_cache.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "jitd/base/text.h"

namespace jitd::client_detail {

using text::Cat;
namespace {

// A GLOB pattern that matches exactly `literal`: SQLite's GLOB has no escape
// character, so each special character goes into a one-character class.
std::string GlobLiteral(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    if (c == '*' || c == '?' || c == '[') {
      out += Cat("[", c, "]");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

KernelBinary ToBinary(cache::Entry entry) {
  KernelBinary binary;
  binary.key = std::move(entry.meta.key);
  binary.cubin = std::move(entry.cubin);
  for (cache::Symbol& symbol : entry.meta.symbols) {
    binary.symbols.push_back({std::move(symbol.name_expression), std::move(symbol.lowered_name)});
  }
  binary.arch = std::move(entry.meta.arch);
  binary.source = v1::GetKernelResponse::FALLBACK;
  binary.compile_ms = entry.meta.compile_ms;
  binary.log = std::move(entry.meta.log);
  binary.nvrtc_version = std::move(entry.meta.nvrtc_version);
  binary.blob_path = entry.blob_path.string();
  return binary;
}

}  // namespace

FallbackCache::FallbackCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
FallbackCache::~FallbackCache() = default;

absl::StatusOr<cache::Cache*> FallbackCache::OpenCache() {
  std::lock_guard lock(open_mu_);
  if (cache_ != nullptr) return cache_.get();
  cache::CacheOptions options;
  options.dir = dir_;
  options.read_only = true;
  options.background = false;  // nothing to flush, evict or reconcile
  absl::StatusOr<std::unique_ptr<cache::Cache>> opened = cache::Cache::Open(options);
  if (!opened.ok()) return opened.status();
  cache_ = *std::move(opened);
  return cache_.get();
}

absl::StatusOr<KernelBinary> FallbackCache::Find(const KernelSpec& spec) {
  const std::string params = CanonicalParams(spec.params);
  const std::string what = text::Instantiation(spec.kernel, params, spec.arch);
  const std::string where = Cat("fallback cache ", dir_.string());
  if (!spec.options.empty()) {
    return absl::FailedPreconditionError(
        Cat(where, " answers requests without extra options only; ", what, " has ", text::Join(spec.options, " ")));
  }
  absl::StatusOr<cache::Cache*> cache = OpenCache();
  if (!cache.ok()) return absl::FailedPreconditionError(Cat(where, ": ", cache.status().message()));

  cache::ListFilter filter;
  filter.kernel_glob = GlobLiteral(spec.kernel);
  filter.arch = spec.arch;
  filter.params = params;
  filter.options = "";  // never a cubin some request built with extra options
  absl::StatusOr<std::vector<cache::EntryInfo>> rows = (*cache)->List(filter);
  if (!rows.ok()) return absl::Status(rows.status().code(), Cat(where, ": ", rows.status().message()));
  if (rows->empty()) return absl::NotFoundError(Cat(where, " has no entry for ", what));
  if (spec.arch.empty()) {
    std::set<std::string> archs;
    for (const cache::EntryInfo& row : *rows) archs.insert(row.arch);
    if (archs.size() > 1) {
      return absl::FailedPreconditionError(Cat(where, " has ", what, " for several archs (", text::Join(archs, ", "),
                                               ") and no CUDA device here says which; name the arch"));
    }
  }
  std::stable_sort(rows->begin(), rows->end(), [](const cache::EntryInfo& a, const cache::EntryInfo& b) {
    return a.created_unix_ms > b.created_unix_ms;
  });
  std::optional<cache::Entry> best;
  size_t unverified = 0;
  for (const cache::EntryInfo& row : *rows) {
    absl::StatusOr<cache::Entry> entry = (*cache)->Lookup(row.key);
    if (absl::IsNotFound(entry.status())) {
      ++unverified;  // failed its checksum, or removed since the listing
      continue;
    }
    if (!entry.ok()) return absl::Status(entry.status().code(), Cat(where, ": ", entry.status().message()));
    if (!best || entry->meta.options.size() < best->meta.options.size()) best = *std::move(entry);
  }
  if (!best) {
    return absl::NotFoundError(Cat(where, ": ", unverified, unverified == 1 ? " entry" : " entries", " for ", what,
                                   " failed verification (a corrupt blob is never served)"));
  }
  return ToBinary(*std::move(best));
}

}  // namespace jitd::client_detail
