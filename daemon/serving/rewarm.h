// Toolkit upgrades without a cold start. Every key covers the toolchain
// (NVRTC, its builtins, the headers), so a new toolkit makes every cached
// cubin a miss: without help, the first request for each hot kernel pays a
// compile on the serving path. A Rewarmer uses what the cache already knows
// about use (each entry's hits and last use, whatever toolchain made it) to
// compile the most used instantiations again under the toolchain in use
// now, in the background at warm priority, before clients ask:
//
//   1. the cache's entries, flushed first, grouped by instantiation (kernel,
//      params, arch, options: every generation of one kernel together),
//      ranked by hits, then by last use; the first `count` are the hot set;
//   2. each is resolved under the current kernels and toolchain: one whose
//      key is in the cache is ready, the rest are compiled (RunWarm: a
//      bounded number at once, warm priority, pinned like any warm-up),
//      until `budget` has passed; what is left then compiles when asked;
//   3. an instantiation that is ready under its new key unpins the keys of
//      its older generations, which then age out under the byte budget.
//
// A run starts when the daemon starts on another toolkit than the one its
// cache was last served with (an upgrade while it was stopped), and after a
// toolkit change it noticed; one that is asked for while another runs
// starts when that one ends. Progress is kept for Stats and /metrics, with
// the cache's generations (generations()).
//
// Thread safety: every method from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "jitd/cache.h"
#include "serving/kernel_service.h"

namespace jitd::serving {

class Rewarmer {
 public:
  struct Options {
    std::size_t count = 64;            // the hot set's size; 0: Trigger() does nothing
    std::chrono::seconds budget{600};  // the longest one run compiles
    std::size_t concurrency = 1;       // compiles at once (the workers)
  };

  struct Progress {
    std::string state = "idle";  // "idle", "running", "done", "stopped" (the budget ran out)
    std::string trigger;         // why the last run started ("toolkit changed", "start on a new toolkit")
    std::uint64_t runs = 0;
    std::uint32_t hot_set = 0;   // instantiations the last run considered
    std::uint32_t ready = 0;     // of them, in the cache under their current key
    std::uint32_t compiled = 0;  // compiled by the last run (counted in ready too)
    std::uint32_t failed = 0;    // did not compile, or no longer resolve
    std::uint32_t skipped = 0;   // left for their first request (the budget ran out)
    std::uint32_t unpinned = 0;  // older generations' entries unpinned
    std::uint32_t migrated = 0;  // copied from their jitd 0.2 tree-named key (counted in ready too)
    std::int64_t started_unix_ms = 0;
    std::int64_t finished_unix_ms = 0;
  };

  // `service` and `cache` must outlive the Rewarmer.
  Rewarmer(KernelService& service, cache::Cache& cache, Options options);
  // Stops a run (its compiles in flight are withdrawn) and joins.
  ~Rewarmer();
  Rewarmer(const Rewarmer&) = delete;
  Rewarmer& operator=(const Rewarmer&) = delete;

  // The cache's entries by generation, from its index. Entries record
  // NVRTC's version but not the whole toolkit identity (its libraries'
  // and headers' fingerprints), so an entry is told apart by its key: it is
  // current when its instantiation resolves to it under the kernels and
  // toolkit served now, older otherwise (an older toolkit, an older edit of
  // its kernel, or a kernel no longer served).
  struct Generations {
    std::uint32_t generations = 0;  // at least this many: the most keys one instantiation has
    std::uint64_t current_entries = 0;
    std::uint64_t current_bytes = 0;
    std::uint64_t older_entries = 0;
    std::uint64_t older_bytes = 0;
  };
  // Reads the index one entry at a time and resolves each, when the index
  // or the resolver changed since the last call; else remembered. Memory
  // stays one entry's at any size of cache.
  Generations generations() const;

  // Asks for a run, saying why; returns at once.
  void Trigger(std::string why);
  // At start: counts how many cached entries match the kernels and toolkit
  // served now, says so in the log (a warning when some do not: a tree
  // edited, renamed or served anew, a toolkit changed), and runs when some
  // do not. Returns at once.
  void CheckAtStart();
  // How many of the most recently used entries CheckAtStart counts.
  static constexpr std::size_t kStartSample = 4096;
  Progress progress() const;

  // One instantiation and every generation of it the cache holds.
  struct Hot {
    manifest::KernelRequest request;
    std::uint64_t hits = 0;
    std::int64_t last_used_unix_ms = 0;
    std::vector<std::string> pinned_keys;  // of any generation
  };

 private:
  void Loop();
  void Run(const std::string& why, bool only_if_stale);
  // Whether some of `entries` are not current (CheckAtStart's question),
  // said in the log either way.
  bool AnyStale(const std::vector<cache::EntryInfo>& entries) const;
  // Resolves the first keys.size() of `ranked` into `keys` (empty: no
  // longer resolves) and counts the ready ones; returns the indices to
  // compile.
  std::vector<std::size_t> Survey(const std::vector<Hot>& ranked, std::vector<std::string>& keys);
  // Unpins the older generations of each instantiation ready under its key.
  std::uint32_t UnpinOlder(const std::vector<Hot>& ranked, const std::vector<std::string>& keys);
  // An entry stored under the key jitd 0.2 gave a named tree's
  // instantiation (ResolvedKernel::named_key) is the same bytes: copied
  // under the key it has now (pinned if it was), instead of a compile.
  bool Migrate(const manifest::ResolvedKernel& resolved, const Hot& hot);

  // What generations() counted, and what it counted from.
  struct GenerationsMemo {
    bool valid = false;
    std::weak_ptr<const manifest::Resolver> resolver;
    std::uint64_t entries = 0, bytes = 0, publishes = 0, evictions = 0;
    Generations value;
  };

  KernelService& service_;
  cache::Cache& cache_;
  const Options options_;
  mutable std::mutex generations_mu_;
  mutable GenerationsMemo generations_;  // guarded by generations_mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;                 // the reason of a run asked for and not started; guarded by mu_
  bool pending_only_if_stale_ = false;  // CheckAtStart's run; guarded by mu_
  bool stopping_ = false;               // guarded by mu_
  Progress progress_;                   // guarded by mu_
  std::thread thread_;
};

}  // namespace jitd::serving
