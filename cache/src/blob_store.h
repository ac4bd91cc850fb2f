// BlobStore: the immutable blob files of a cache directory.
//
//   DIR/blobs/KK/KEY-CHECKSUM   KK = first two hex digits of KEY
//   DIR/tmp/KEY.PID.SEQ.tmp     files being written
//
// A blob's name carries its checksum, so two processes publishing the same
// key never overwrite each other's file: each renames its own, and the index
// decides which one is served.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitd::cache::detail {

class BlobStore {
 public:
  explicit BlobStore(std::filesystem::path dir);

  // Creates blobs/ and tmp/; FAILED_PRECONDITION when that is impossible.
  absl::Status Init() const;

  std::filesystem::path PathFor(std::string_view key, std::string_view checksum) const;

  // Writes `bytes` to a temp file, fsyncs it (with `sync`), renames it to
  // its final name and fsyncs the directory. RESOURCE_EXHAUSTED on
  // ENOSPC/EDQUOT; the temp file is removed on every failure.
  absl::StatusOr<std::filesystem::path> Write(std::string_view key, std::string_view checksum, std::string_view bytes,
                                              bool sync) const;

  // Reads a whole blob. NOT_FOUND when the file does not exist.
  absl::StatusOr<std::string> Read(const std::filesystem::path& path) const;

  // Removes a blob file; a file already gone is not an error.
  void Remove(const std::filesystem::path& path) const;

  // Removes temp files whose writer is dead (by the PID in their name) or
  // that are older than `grace`. Returns how many were removed.
  size_t SweepTemp(std::chrono::seconds grace) const;

  using BlobFn = std::function<void(const std::filesystem::path&, std::string_view key, std::string_view checksum)>;
  // The shard directories under blobs/, by name (a key's blob lives in the
  // shard named by the key's first two characters). Files there that are
  // no directory are passed to `stray`.
  std::vector<std::string> Shards(const std::function<void(const std::filesystem::path&)>& stray) const;
  // Calls `fn(path, key, checksum)` for every file of shard `name` whose
  // name has the blob form of that shard; other files get an empty key.
  void ForEachBlobIn(const std::string& shard, const BlobFn& fn) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path blobs_;
  std::filesystem::path tmp_;
};

}  // namespace jitd::cache::detail
