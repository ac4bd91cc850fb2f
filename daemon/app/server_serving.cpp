#include <spdlog/spdlog.h>

#include <algorithm>

#include "app/server_impl.h"
#include "jitd/base/admin_token.h"
#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "security/signing_key.h"

namespace jitd::daemon {
namespace {

using text::Cat;

// What a remote lookup's reply holds besides the value: RESP framing and
// the failure marker (a status message of at most a few KiB).
constexpr uint64_t kRemoteReplyOverheadBytes = 64 << 10;

}  // namespace

absl::Status Server::Impl::OpenCache() {
  JITD_ASSIGN_OR_RETURN(std::unique_ptr<CacheDirLock> locked, CacheDirLock::Acquire(config.cache_dir, config.listen));
  dir_lock = std::move(locked);
  cache::CacheOptions options;
  options.dir = config.cache_dir;
  options.max_bytes = config.max_cache_bytes;
  absl::StatusOr<std::unique_ptr<cache::Cache>> opened = cache::Cache::Open(options);
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        Cat("cannot open the cache in ", config.cache_dir.string(), ": ", opened.status().message()));
  }
  cache = *std::move(opened);
  SweepOldKernelSnapshots(cache->dir());
  if (cache->rebuilt_index()) {
    spdlog::warn("the cache index in {} was unreadable and has been rebuilt from the blob files",
                 config.cache_dir.string());
  }
  return absl::OkStatus();
}

absl::Status Server::Impl::LoadAdminToken() {
  if (config.admin_token_file.empty()) {
    JITD_ASSIGN_OR_RETURN(std::string token, NewAdminToken());
    generated_token = token;
    auth = AdminAuth(std::move(token),
                     "this daemon's token is in SOCKET.admin-token beside its Unix socket, readable by the "
                     "daemon's user, and jitd clients of that user read it by themselves");
    return absl::OkStatus();
  }
  JITD_ASSIGN_OR_RETURN(std::string token, ReadAdminTokenFile(config.admin_token_file));
  auth = AdminAuth(std::move(token));
  return absl::OkStatus();
}

absl::Status Server::Impl::MountBundles() {
  std::string key;
  if (!config.bundles.empty() && !config.remote_signing_key_file.empty()) {
    JITD_ASSIGN_OR_RETURN(key, ReadSigningKeyFile(config.remote_signing_key_file, "--remote-signing-key-file"));
  }
  for (const std::filesystem::path& path : config.bundles) {
    absl::StatusOr<std::unique_ptr<cache::Bundle>> opened = cache::Bundle::Open(path, key);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          Cat("cannot mount --bundle ", path.string(), ": ", opened.status().message(),
                              key.empty() ? ""
                                          : " (a daemon with --remote-signing-key-file mounts only bundles "
                                            "signed with that key)"));
    }
    const cache::Bundle& b = **opened;
    spdlog::info("bundle {}: {} entries, {}, mounted read-only (seal {})", path.string(), b.size(),
                 cache::BundleSealName(b.seal()), b.seal_hex().substr(0, 12));
    bundles.push_back(*std::move(opened));
  }
  return absl::OkStatus();
}

std::optional<std::string> Server::Impl::RememberToolkit(const std::string& identity) {
  const std::filesystem::path file = cache->dir() / kToolkitRecord;
  absl::StatusOr<std::string> before = files::ReadWholeFile(file);
  if (absl::Status written = files::WriteFileAtomically(file, identity); !written.ok()) {
    spdlog::warn("cannot remember the toolkit in {}: {}", file.string(), written.ToString());
  }
  if (!before.ok()) return std::nullopt;
  return *before;
}

std::vector<std::string> Server::Impl::BundledModuleBuilders() const {
  std::vector<std::string> builders;
  for (const auto& bundle : bundles) {
    for (const std::string& builder : bundle->module_builders()) builders.push_back(builder);
  }
  return builders;
}

absl::Status Server::Impl::StartServing() {
  JITD_RETURN_IF_ERROR(MountBundles());
  JITD_ASSIGN_OR_RETURN(std::shared_ptr<compiler::ToolkitWatch> watch, WatchToolkit(config.cuda_include, cache->dir()));
  toolkit = std::move(watch);
  JITD_ASSIGN_OR_RETURN(manifest::Toolchain detected, manifest::Toolchain::FromIdentity(toolkit->identity()));
  toolchain = std::move(detected);
  toolchain.modules = ModuleToolchainOf(config, cache->dir(), BundledModuleBuilders());
  spdlog::info("toolkit: NVRTC {}, {} (identity {})", toolchain.nvrtc_version, toolkit->identity().Describe(),
               toolchain.identity.substr(0, 12));
  trees = std::make_unique<serving::KernelTrees>(
      serving::KernelTrees::Options{.sources = config.kernels,
                                    .locks = config.locks,
                                    .allow_guard_findings = config.allow_guard_findings,
                                    .default_arch = config.arch});
  JITD_ASSIGN_OR_RETURN(serving::KernelTrees::Loaded loaded, trees->Load(toolchain, nullptr));
  const std::shared_ptr<const manifest::Resolver>* resolver = &loaded.resolver;
  spdlog::info("kernels: {}; NVRTC {}", serving::KernelTrees::Describe(**resolver), toolchain.nvrtc_version);

  absl::StatusOr<CompileStack> started =
      StartCompileStack(*resolver, config.workers, config.max_queue, toolkit,
                        [this](const compiler::CompileJob& job) { return CheckModuleBuild(job); });
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        Cat("cannot start ", config.workers, " compile workers: ", started.status().message()));
  }
  stack = *std::move(started);

  JITD_RETURN_IF_ERROR(OpenRemote());
  for (const std::string& arch : config.fleet_archs) {
    if (absl::Status valid = manifest::ValidateArch(arch, toolchain); !valid.ok()) {
      return absl::InvalidArgumentError(Cat("--fleet-archs: ", valid.message()));
    }
  }
  serving::KernelService::Options options;
  options.fleet_archs = config.fleet_archs;
  options.explain_not_found = [trees = trees.get()](const std::string& kernel, absl::Status not_found) {
    return trees->ExplainNotFound(kernel, std::move(not_found));
  };
  options.hot_cache_bytes = config.hot_cache_bytes;
  options.negative_ttl = config.negative_ttl;
  options.max_queue = config.max_queue;
  options.max_compiles_per_peer = serving::Admission::PeerFlightShare(config.workers, config.max_queue);
  options.max_calls_per_peer = config.max_calls_per_peer;
  if (!config.metrics_listen.empty()) {
    JITD_ASSIGN_OR_RETURN(std::unique_ptr<DaemonMetrics> made, DaemonMetrics::Create());
    metrics = std::move(made);
    options.on_compile = [m = metrics.get()](std::string_view result, std::chrono::duration<double> wall) {
      m->ObserveCompile(result, wall);
    };
  }
  std::vector<const cache::Bundle*> mounted;
  for (const auto& bundle : bundles) mounted.push_back(bundle.get());
  service = std::make_unique<serving::KernelService>(*resolver, cache.get(), stack.pool.get(), options, remote.get(),
                                                     std::move(mounted));
  stack.resolver.reset();
  // A toolkit other than the one this cache was last served with: an
  // upgrade while the daemon was stopped.
  const std::optional<std::string> before = RememberToolkit(toolkit->identity().fingerprint);
  if (config.rewarm_count > 0) {
    rewarmer = std::make_unique<serving::Rewarmer>(
        *service, *cache,
        serving::Rewarmer::Options{
            .count = config.rewarm_count, .budget = config.rewarm_seconds, .concurrency = config.workers});
    if (before.has_value() && *before != toolkit->identity().fingerprint) {
      rewarmer->Trigger("start on a new toolkit");
    } else {
      rewarmer->CheckAtStart();  // kernels edited, renamed or served anew since the last start
    }
  }
  toolkit_listener = toolkit->AddListener(
      [this](const compiler::ToolkitIdentity& now, const compiler::ToolkitIdentity&) { OnToolkitChanged(now); });
  compiler = std::make_unique<CompilerRpc>(
      *service, calls,
      CompilerRpc::Options{.workers = config.workers,
                           .log_hits = config.log_hits,
                           .peer_of = [a = acceptor.get()](const std::string& p) { return a->PeerOf(p); },
                           .metrics = metrics.get()});
  return StartMetrics();
}

absl::Status Server::Impl::StartMetrics() {
  if (metrics == nullptr) return absl::OkStatus();
  metrics->Collect({.cache = cache.get(),
                    .service = service.get(),
                    .pool = stack.pool.get(),
                    .remote = remote.get(),
                    .rewarmer = rewarmer.get(),
                    .trees = trees.get(),
                    .version = JITD_VERSION,
                    .nvrtc_version = toolchain.nvrtc_version});
  metrics::MetricsHttpServer::Options options;
  options.address = config.metrics_listen;
  options.render = [m = metrics.get()] { return m->Render(); };
  metrics_server = std::make_unique<metrics::MetricsHttpServer>(std::move(options));
  if (absl::Status started = metrics_server->Start(); !started.ok()) {
    return absl::Status(started.code(), Cat("--metrics-listen: ", started.message()));
  }
  return absl::OkStatus();
}

absl::Status Server::Impl::OpenRemote() {
  if (config.remote.empty()) return absl::OkStatus();
  JITD_ASSIGN_OR_RETURN(cache::RemoteUrl url, cache::ParseRemoteUrl(config.remote));
  cache::RemoteOptions options;
  options.io_timeout = config.remote_timeout;
  options.connect_timeout = std::min(config.remote_timeout, std::chrono::milliseconds(1000));
  options.tls_ca = config.remote_tls_ca;
  options.tls_cert = config.remote_tls_cert;
  options.tls_key = config.remote_tls_key;
  // One lookup reads a value and a (small) failure marker: reading stops
  // past the value cap, before the value is buffered whole.
  options.max_reply_bytes = config.remote_max_value_bytes + kRemoteReplyOverheadBytes;
  if (!config.remote_password_file.empty()) {
    absl::StatusOr<std::string> text = files::ReadWholeFile(config.remote_password_file);
    if (!text.ok()) return absl::Status(text.status().code(), Cat("--remote-password-file: ", text.status().message()));
    std::string password = text->substr(0, text->find_first_of("\r\n"));
    if (password.empty()) {
      return absl::InvalidArgumentError(
          Cat("--remote-password-file ", config.remote_password_file.string(), ": the first line is empty"));
    }
    options.password = std::move(password);
  }
  JITD_ASSIGN_OR_RETURN(std::unique_ptr<cache::RemoteBackend> backend, cache::OpenRedisBackend(url, options));
  cache::RemoteTierOptions tier_options;
  if (!config.remote_signing_key_file.empty()) {
    JITD_ASSIGN_OR_RETURN(tier_options.signing_key,
                          ReadSigningKeyFile(config.remote_signing_key_file, "--remote-signing-key-file"));
  }
  // A remembered failure is shared as long as it is remembered locally.
  remote = std::make_unique<cache::RemoteTier>(std::move(backend), tier_options);
  if (absl::Status reachable = remote->Check(); reachable.ok()) {
    spdlog::info("remote tier {}: reachable; lease owner {}", remote->Describe(), remote->options().owner);
  } else {
    spdlog::warn("remote tier {} is not reachable now ({}); serving locally until it is", remote->Describe(),
                 reachable.ToString());
  }
  return absl::OkStatus();
}

}  // namespace jitd::daemon
