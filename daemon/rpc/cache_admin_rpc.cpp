#include "rpc/cache_admin_rpc.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "jitd/base/text.h"
#include "manifest/manifest.h"
#include "manifest/module_kernel.h"
#include "rpc/grpc_status.h"

namespace jitd::daemon {
namespace {

void ToProto(const cache::EntryInfo& from, v1::EntryInfo* to) {
  to->set_key(from.key);
  to->set_kernel(from.kernel);
  to->set_params(from.params);
  to->set_arch(from.arch);
  to->set_size_bytes(from.size_bytes);
  to->set_created_unix_ms(from.created_unix_ms);
  to->set_last_used_unix_ms(from.last_used_unix_ms);
  to->set_hits(from.hits);
  to->set_pinned(from.pinned);
  to->set_nvrtc_version(from.nvrtc_version);
  to->set_compile_ms(from.compile_ms);
  for (const std::string& option : from.options) to->add_options(option);
  // A module's entry names its builder (manifest::ModuleBuilder) where a
  // cubin's names NVRTC: the kind follows from it without reading the blob.
  if (manifest::ServeOnlyToolchain(from.nvrtc_version).has_value()) {
    to->set_kind("module");
  } else {
    to->set_kind(from.arch.rfind("compute_", 0) == 0 ? "ptx" : "cubin");
  }
}

cache::EvictFilter FromProto(const v1::EvictRequest& request) {
  cache::EvictFilter filter;
  filter.keys.assign(request.keys().begin(), request.keys().end());
  filter.kernel_glob = request.kernel_glob();
  filter.arch = request.arch();
  if (request.older_than_s() > 0) {
    // uint64 on the wire; beyond int64 seconds is "older than anything" too.
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    filter.older_than = std::chrono::seconds(static_cast<int64_t>(std::min(request.older_than_s(), kMax)));
  }
  if (request.has_max_bytes()) filter.max_bytes = request.max_bytes();
  filter.dry_run = request.dry_run();
  filter.include_pinned = request.include_pinned();
  return filter;
}

}  // namespace

CacheAdminRpc::CacheAdminRpc(cache::Cache& cache, const AdminAuth& auth, InFlightCalls& calls,
                             std::chrono::steady_clock::time_point started, ServingStats serving_stats,
                             EvictedHook on_evicted)
    : cache_(cache),
      auth_(auth),
      calls_(calls),
      started_(started),
      serving_stats_(std::move(serving_stats)),
      on_evicted_(std::move(on_evicted)) {}

grpc::Status CacheAdminRpc::Stats(grpc::ServerContext*, const v1::StatsRequest*, v1::StatsResponse* response) {
  const InFlightCalls::Scope in_flight(calls_);
  absl::StatusOr<cache::CacheStats> stats = cache_.Stats();
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  response->set_entries(stats->entries);
  response->set_bytes(stats->bytes);
  response->set_max_bytes(stats->max_bytes);
  response->set_high_watermark_bytes(stats->high_watermark_bytes);
  response->set_low_watermark_bytes(stats->low_watermark_bytes);
  response->set_pinned_entries(stats->pinned_entries);
  response->set_pinned_bytes(stats->pinned_bytes);
  response->set_hits(stats->hits);
  response->set_misses(stats->misses);
  response->set_evictions(stats->evictions);
  response->set_corrupt(stats->corrupt);
  response->set_publishes(stats->publishes);
  response->set_publish_failures(stats->publish_failures);
  response->set_cache_dir(std::filesystem::absolute(cache_.dir()).string());
  response->set_uptime_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  if (serving_stats_) serving_stats_(response);
  return grpc::Status::OK;
}

grpc::Status CacheAdminRpc::ListEntries(grpc::ServerContext*, const v1::ListEntriesRequest* request,
                                        v1::ListEntriesResponse* response) {
  const InFlightCalls::Scope in_flight(calls_);
  // Listed without the limit so that `total` counts every match; the index
  // rows are small (no blob is read), so this costs little even for large
  // caches.
  if (!request->arch().empty()) {
    if (absl::StatusOr<manifest::ArchName> arch = manifest::ParseArchName(request->arch()); !arch.ok()) {
      return ToGrpcStatus(arch.status());
    }
  }
  cache::ListFilter filter;
  filter.kernel_glob = request->kernel_glob();
  filter.arch = request->arch();
  absl::StatusOr<std::vector<cache::EntryInfo>> entries = cache_.List(filter);
  if (!entries.ok()) return ToGrpcStatus(entries.status());
  response->set_total(entries->size());
  const size_t shown = request->limit() == 0 ? entries->size() : std::min<size_t>(request->limit(), entries->size());
  for (size_t i = 0; i < shown; ++i) ToProto((*entries)[i], response->add_entries());
  return grpc::Status::OK;
}

grpc::Status CacheAdminRpc::Evict(grpc::ServerContext* context, const v1::EvictRequest* request,
                                  v1::EvictResponse* response) {
  const InFlightCalls::Scope in_flight(calls_);
  // A dry run removes nothing: it reads, as ListEntries does.
  if (!request->dry_run()) {
    if (absl::Status allowed = auth_.Authorize(*context, "Evict"); !allowed.ok()) return ToGrpcStatus(allowed);
  }
  if (!request->arch().empty()) {
    if (absl::StatusOr<manifest::ArchName> arch = manifest::ParseArchName(request->arch()); !arch.ok()) {
      return ToGrpcStatus(arch.status());
    }
  }
  absl::StatusOr<cache::EvictResult> result = cache_.Evict(FromProto(*request));
  if (!result.ok()) return ToGrpcStatus(result.status());
  for (const cache::EntryInfo& entry : result->evicted) ToProto(entry, response->add_evicted());
  response->set_evicted_entries(result->evicted.size());
  response->set_evicted_bytes(result->evicted_bytes);
  response->set_dry_run(result->dry_run);
  response->set_remaining_entries(result->remaining_entries);
  response->set_remaining_bytes(result->remaining_bytes);
  if (!result->dry_run && !result->evicted.empty() && on_evicted_) {
    std::vector<std::string> keys;
    for (const cache::EntryInfo& entry : result->evicted) keys.push_back(entry.key);
    on_evicted_(keys);
  }
  if (!result->dry_run && !result->evicted.empty()) {
    spdlog::info("evicted {} entries ({} bytes) on request from {}", result->evicted.size(), result->evicted_bytes,
                 context->peer());
  }
  return grpc::Status::OK;
}

grpc::Status CacheAdminRpc::Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                                   v1::VerifyResponse* response) {
  const InFlightCalls::Scope in_flight(calls_);
  if (request->repair()) {
    if (absl::Status allowed = auth_.Authorize(*context, "Verify with repair"); !allowed.ok()) {
      return ToGrpcStatus(allowed);
    }
  }
  const bool admin = !auth_.required() || auth_.Authorize(*context, "Verify").ok();
  if (absl::Status admitted = AdmitVerify(admin); !admitted.ok()) return ToGrpcStatus(admitted);
  struct Done {
    CacheAdminRpc* self;
    ~Done() {
      std::lock_guard lock(self->verify_mu_);
      self->verify_running_ = false;
    }
  } done{this};
  absl::StatusOr<cache::VerifyReport> report = cache_.Verify(request->repair());
  if (!report.ok()) return ToGrpcStatus(report.status());
  response->set_checked(report->checked);
  response->set_ok(report->ok);
  response->set_corrupt(report->corrupt);
  response->set_missing_blobs(report->missing_blobs);
  response->set_orphan_blobs(report->orphan_blobs);
  response->set_repaired(report->repaired);
  for (const std::string& problem : report->problems) response->add_problems(problem);
  response->set_index_integrity(report->index_integrity);
  return grpc::Status::OK;
}

absl::Status CacheAdminRpc::AdmitVerify(bool admin) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(verify_mu_);
  if (verify_running_) {
    return absl::ResourceExhaustedError(
        "a verify is running already (it re-reads every blob; one runs at a time): retry when it has finished");
  }
  if (!admin) {
    if (last_open_verify_ && now - *last_open_verify_ < kOpenVerifyInterval) {
      const auto wait = std::chrono::ceil<std::chrono::seconds>(kOpenVerifyInterval - (now - *last_open_verify_));
      return absl::ResourceExhaustedError(text::Cat(
          "a verify ran less than ", kOpenVerifyInterval.count(), " s ago; without the admin token one may run per ",
          kOpenVerifyInterval.count(), " s: retry in ", wait.count(), " s, or send the admin token"));
    }
    last_open_verify_ = now;
  }
  verify_running_ = true;
  return absl::OkStatus();
}

}  // namespace jitd::daemon
