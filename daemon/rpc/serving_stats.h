// What the request path (serving::KernelService) and the compile workers
// (compiler::WorkerPool) report in CacheAdmin.Stats, next to the cache's own
// counters. Field meanings and units are documented in cache_admin.proto.
#pragma once

#include <cstdint>
#include <filesystem>

#include "compiler/worker_pool.h"
#include "jitd/v1/cache_admin.pb.h"
#include "serving/kernel_service.h"
#include "serving/kernel_trees.h"
#include "serving/rewarm.h"

namespace jitd::daemon {

struct ServingStatsSources {
  const serving::KernelService* service = nullptr;
  const compiler::WorkerPool* pool = nullptr;
  uint64_t max_queue = 0;
  const serving::KernelTrees* trees = nullptr;
  const cache::RemoteTier* remote = nullptr;    // null: no remote tier
  const serving::Rewarmer* rewarmer = nullptr;  // null: --rewarm-count 0
};

// Sets the serving fields of `response` (16 and up); thread-safe (every
// source takes its own snapshot).
void AddServingStats(const ServingStatsSources& sources, v1::StatsResponse* response);

}  // namespace jitd::daemon
