// jitd::OpenFallbackCache: a warmed cache directory read through the
// cache's read-only level (cache::ReadOnlyDirectory), which owns the
// index's schema and verifies each blob as a daemon lookup does. This file
// only turns a KernelSpec into that level's question and its entries into
// a KernelBinary. It never writes: a corrupt blob is skipped, and left to
// the daemon to drop.
#include <set>
#include <utility>

#include "jitd/base/text.h"
#include "jitd/client_fallback.h"
#include "jitd/read_only_directory.h"

namespace jitd {
namespace {

using text::Cat;

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
  explicit FallbackCache(std::filesystem::path dir) : directory_(std::move(dir)) {}

  absl::StatusOr<KernelBinary> Find(const KernelSpec& spec) override {
    const std::string params = CanonicalParams(spec.params);
    const std::string what = text::Instantiation(spec.kernel, params, spec.arch);
    const std::string where = Cat("fallback cache ", directory_.dir().string());
    if (!spec.options.empty()) {
      return absl::FailedPreconditionError(
          Cat(where, " answers requests without extra options only; ", what, " has ", text::Join(spec.options, " ")));
    }
    if (spec.fleet || !spec.archs.empty()) {
      return absl::FailedPreconditionError(
          Cat(where, " holds cubins, one arch each; a fatbin (archs, fleet) is made by the daemon only"));
    }
    absl::StatusOr<cache::ReadOnlyDirectory::Instantiation> found =
        directory_.FindInstantiation(spec.kernel, params, spec.arch);
    if (!found.ok()) {
      const absl::StatusCode code =
          absl::IsUnavailable(found.status()) ? absl::StatusCode::kUnavailable : absl::StatusCode::kFailedPrecondition;
      return absl::Status(code, Cat(where, ": ", found.status().message()));
    }
    if (found->verified.empty()) {
      if (found->unverified == 0) return absl::NotFoundError(Cat(where, " has no entry for ", what));
      return absl::NotFoundError(Cat(where, ": ", found->unverified, found->unverified == 1 ? " entry" : " entries",
                                     " for ", what, " failed verification (a corrupt blob is never served)"));
    }
    if (spec.arch.empty()) {
      std::set<std::string> archs;
      for (const cache::Entry& entry : found->verified) archs.insert(entry.meta.arch);
      if (archs.size() > 1) {
        return absl::FailedPreconditionError(Cat(where, " has ", what, " for several archs (", text::Join(archs, ", "),
                                                 ") and no CUDA device here says which; name the arch"));
      }
    }
    // Newest first; of those, the one compiled with the fewest options.
    cache::Entry* best = nullptr;
    for (cache::Entry& entry : found->verified) {
      if (best == nullptr || entry.meta.options.size() < best->meta.options.size()) best = &entry;
    }
    return ToBinary(std::move(best->meta), std::move(best->cubin), best->blob_path);
  }

 private:
  cache::ReadOnlyDirectory directory_;
};

}  // namespace

std::unique_ptr<KernelFallback> OpenFallbackCache(const std::filesystem::path& dir) {
  return std::make_unique<FallbackCache>(dir);
}

}  // namespace jitd
