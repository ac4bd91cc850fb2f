// ReadOnlyDirectory: a warmed cache directory read without writing, as a
// storage level (jitd/storage.h). It is how anything outside the daemon
// reads a cache: the client's fallback (jitd::client_fallback) answers from
// it while the daemon is away. It opens the directory's Cache read-only
// (every index schema since the first; nothing migrated, recorded or
// dropped), and every entry it returns was verified against its blob's
// checksum and key, as a daemon lookup is: a corrupt blob is never
// returned, and left to the daemon to drop.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jitd/cache.h"
#include "jitd/storage.h"

namespace jitd::cache {

class ReadOnlyDirectory final : public Storage {
 public:
  // Opens nothing yet: the directory may be warmed after this is made. The
  // first use opens it; an open that failed is tried again at the next.
  explicit ReadOnlyDirectory(std::filesystem::path dir);
  ~ReadOnlyDirectory() override;

  Level level() const override { return Level::kDirectory; }
  // Never writes: a fill is counted as not kept.
  std::shared_ptr<const Entry> Fill(std::shared_ptr<const Entry> entry) override;
  void RecordUse(const std::string&) override {}
  void Forget(const std::vector<std::string>&) override {}

  // What a reader without a content key asks: the entries of one
  // instantiation (kernel, canonical params, arch; "" is any arch)
  // compiled without extra request options, newest first.
  struct Instantiation {
    std::vector<Entry> verified;
    // Listed, but evicted since or no longer verifying: never returned.
    size_t unverified = 0;
  };
  // FAILED_PRECONDITION when the directory holds no index (never warmed)
  // or one of a newer jitd; UNAVAILABLE when the index is locked too long.
  absl::StatusOr<Instantiation> FindInstantiation(const std::string& kernel, const std::string& params,
                                                  const std::string& arch);

  const std::filesystem::path& dir() const { return dir_; }

 protected:
  std::shared_ptr<const Entry> Find(const std::string& key, std::chrono::steady_clock::time_point) override;

 private:
  absl::StatusOr<Cache*> Opened();

  const std::filesystem::path dir_;
  std::mutex mu_;  // guards cache_ while it is opened
  std::unique_ptr<Cache> cache_;
};

}  // namespace jitd::cache
