#include "remote/remote_storage.h"

namespace jitd::cache {

std::shared_ptr<const Entry> RemoteStorage::Find(const std::string& key,
                                                 std::chrono::steady_clock::time_point deadline) {
  // Fetch refuses a module without a fleet key to verify it (RemoteTier).
  RemoteFetch fetched = remote_->Fetch(key, deadline);
  if (fetched.kind != RemoteFetch::Kind::kHit) return nullptr;
  auto entry = std::make_shared<Entry>();
  entry->meta = std::move(fetched.meta);
  entry->cubin = std::move(fetched.cubin);
  entry->checksum = Checksum128(entry->cubin);
  return entry;
}

std::shared_ptr<const Entry> RemoteStorage::Fill(std::shared_ptr<const Entry> entry) {
  if (remote_->options().signing_key.empty() && IsHostSharedObject(entry->cubin)) {
    return entry;  // no daemon would serve it unsigned (Find)
  }
  remote_->Store(entry->meta, entry->cubin);
  // The remote's own counters (stores, failures) tell how a store went.
  CountFill(true);
  return entry;
}

}  // namespace jitd::cache
