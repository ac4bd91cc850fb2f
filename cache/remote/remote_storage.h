// RemoteStorage: the fleet's shared tier as a storage level (jitd/storage.h).
#pragma once

#include "jitd/storage.h"
#include "remote/remote.h"

namespace jitd::cache {

// Lookup is a verified Fetch; Fill is the write-back. RecordUse is not
// sent: a read of Redis is what its LRU counts, and a use per memory hit
// would be a round trip per hit; a kernel hot in every daemon's memory may
// therefore age out of Redis, which costs a fresh daemon one compile, never
// a wrong answer.
class RemoteStorage final : public Storage {
 public:
  // `remote` must outlive this.
  explicit RemoteStorage(RemoteTier* remote) : remote_(remote) {}
  Level level() const override { return Level::kRemote; }
  std::shared_ptr<const Entry> Fill(std::shared_ptr<const Entry> entry) override;
  void RecordUse(const std::string&) override {}
  void Forget(const std::vector<std::string>&) override {}
  RemoteTier* remote() const { return remote_; }

 protected:
  std::shared_ptr<const Entry> Find(const std::string& key, std::chrono::steady_clock::time_point deadline) override;

 private:
  RemoteTier* const remote_;
};

}  // namespace jitd::cache
