#include "config/settings.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "compiler/toolkit_watch.h"
#include "jitd/base/endpoint.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "jitd/base/units.h"
#include "manifest/manifest.h"

namespace jitd::daemon {
namespace {

namespace fs = std::filesystem;
using Texts = std::vector<std::string>;
template <typename T>
using Parser = std::function<absl::StatusOr<T>(const Texts& texts, const fs::path& base)>;

// The one text of a single-valued setting.
const std::string& One(const Texts& texts) { return texts.front(); }

absl::StatusOr<int64_t> ParseInteger(const std::string& text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return absl::InvalidArgumentError(text::Cat("'", text, "' is not an integer"));
  return value;
}

// A row's functions, bound to its ConfigLayer field `field` and its
// DaemonConfig field `target`: `parse` reads texts into a T, `decide` turns
// the merged layer's value (set or not) into the DaemonConfig's.
template <typename T, typename D>
Setting Bind(Setting row, std::optional<T> ConfigLayer::*field, D DaemonConfig::*target, Parser<T> parse,
             std::function<D(const std::optional<T>&)> decide) {
  row.read = [field, parse](const Texts& texts, const fs::path& base, ConfigLayer& layer) -> absl::Status {
    if (texts.empty()) return absl::InvalidArgumentError("needs a value");
    JITD_ASSIGN_OR_RETURN(T value, parse(texts, base));
    layer.*field = std::move(value);
    return absl::OkStatus();
  };
  row.overlay = [field](ConfigLayer& into, const ConfigLayer& from) {
    if ((from.*field).has_value()) into.*field = from.*field;
  };
  row.decide = [field, target, decide](const ConfigLayer& merged, DaemonConfig& config) {
    config.*target = decide(merged.*field);
  };
  return row;
}

// The default when unset.
template <typename T>
std::function<T(const std::optional<T>&)> Or(std::function<T()> fallback) {
  return [fallback](const std::optional<T>& value) { return value.has_value() ? *value : fallback(); };
}
template <typename T>
std::function<T(const std::optional<T>&)> Or(T fallback) {
  return [fallback](const std::optional<T>& value) { return value.value_or(fallback); };
}

Setting PathRow(Setting row, std::optional<fs::path> ConfigLayer::*field, fs::path DaemonConfig::*target,
                std::function<fs::path()> fallback) {
  Parser<fs::path> parse = [](const Texts& texts, const fs::path& base) -> absl::StatusOr<fs::path> {
    if (One(texts).empty()) return absl::InvalidArgumentError("must not be empty");
    // An absolute text replaces base.
    return base.empty() ? fs::absolute(One(texts)) : base / One(texts);
  };
  return Bind<fs::path, fs::path>(std::move(row), field, target, parse, Or<fs::path>(std::move(fallback)));
}

// A path that is unset by default: the feature it names is off.
Setting OptionalFileRow(Setting row, std::optional<fs::path> ConfigLayer::*field, fs::path DaemonConfig::*target) {
  row.existing_file = true;
  return PathRow(std::move(row), field, target, [] { return fs::path(); });
}

Setting TextRow(Setting row, std::optional<std::string> ConfigLayer::*field, std::string DaemonConfig::*target,
                std::string fallback, absl::Status (*check)(const std::string&)) {
  Parser<std::string> parse = [check](const Texts& texts, const fs::path&) -> absl::StatusOr<std::string> {
    JITD_RETURN_IF_ERROR(check(One(texts)));
    return One(texts);
  };
  return Bind<std::string, std::string>(std::move(row), field, target, parse, Or<std::string>(std::move(fallback)));
}

Setting BytesRow(Setting row, std::optional<uint64_t> ConfigLayer::*field, uint64_t DaemonConfig::*target,
                 uint64_t fallback, absl::Status (*check)(uint64_t) = nullptr) {
  Parser<uint64_t> parse = [check](const Texts& texts, const fs::path&) -> absl::StatusOr<uint64_t> {
    JITD_ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(One(texts)));
    if (check != nullptr) JITD_RETURN_IF_ERROR(check(bytes));
    return bytes;
  };
  return Bind<uint64_t, uint64_t>(std::move(row), field, target, parse, Or<uint64_t>(fallback));
}

Parser<uint64_t> ParseCount() {
  return [](const Texts& texts, const fs::path&) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<int64_t> count = ParseInteger(One(texts));
    if (!count.ok() || *count < 0) return absl::InvalidArgumentError("must be 0 (no bound) or a positive count");
    return static_cast<uint64_t>(*count);
  };
}

// An integer in the range `check` allows, stored as a T.
template <typename T>
Setting IntegerRow(Setting row, std::optional<T> ConfigLayer::*field, T DaemonConfig::*target,
                   std::function<T()> fallback, absl::Status (*check)(int64_t)) {
  Parser<T> parse = [check](const Texts& texts, const fs::path&) -> absl::StatusOr<T> {
    JITD_ASSIGN_OR_RETURN(int64_t value, ParseInteger(One(texts)));
    JITD_RETURN_IF_ERROR(check(value));
    return static_cast<T>(value);
  };
  return Bind<T, T>(std::move(row), field, target, parse, Or<T>(std::move(fallback)));
}

// A duration in seconds; `check` (if any) sees the count of seconds.
Setting SecondsRow(Setting row, std::optional<std::chrono::seconds> ConfigLayer::*field,
                   std::chrono::seconds DaemonConfig::*target, std::chrono::seconds fallback,
                   absl::Status (*check)(int64_t)) {
  Parser<std::chrono::seconds> parse = [check](const Texts& texts,
                                               const fs::path&) -> absl::StatusOr<std::chrono::seconds> {
    JITD_ASSIGN_OR_RETURN(std::chrono::seconds duration, ParseDuration(One(texts)));
    if (check != nullptr) JITD_RETURN_IF_ERROR(check(duration.count()));
    return duration;
  };
  return Bind<std::chrono::seconds, std::chrono::seconds>(std::move(row), field, target, parse,
                                                          Or<std::chrono::seconds>(fallback));
}

Setting SwitchRow(Setting row, std::optional<bool> ConfigLayer::*field, bool DaemonConfig::*target, bool fallback) {
  Parser<bool> parse = [](const Texts& texts, const fs::path&) -> absl::StatusOr<bool> {
    if (One(texts) == "true") return true;
    if (One(texts) == "false") return false;
    return absl::InvalidArgumentError(text::Cat("'", One(texts), "' is neither true nor false"));
  };
  return Bind<bool, bool>(std::move(row), field, target, parse, Or<bool>(fallback));
}

absl::Status CheckNotNegative(int64_t seconds) {
  if (seconds < 0) return absl::InvalidArgumentError("must be 0 (off) or a positive duration");
  return absl::OkStatus();
}

// Paths, relative ones against `base`.
absl::StatusOr<std::vector<fs::path>> ParsePaths(const Texts& texts, const fs::path& base) {
  std::vector<fs::path> paths;
  for (const std::string& text : texts) {
    if (text.empty()) return absl::InvalidArgumentError("must not be empty");
    paths.push_back(base.empty() ? fs::absolute(text) : base / text);
  }
  return paths;
}

// "[NAME=]DIR" each: a text whose part before the first '=' is a tree name
// names the tree; otherwise the whole text is the directory.
absl::StatusOr<std::vector<KernelTreeSource>> ParseKernelTrees(const Texts& texts, const fs::path& base) {
  std::vector<KernelTreeSource> trees;
  for (const std::string& text : texts) {
    KernelTreeSource tree;
    std::string dir = text;
    if (size_t eq = text.find('='); eq != std::string::npos && manifest::ValidateTreeName(text.substr(0, eq)).ok()) {
      tree.name = text.substr(0, eq);
      dir = text.substr(eq + 1);
    }
    JITD_ASSIGN_OR_RETURN(std::vector<fs::path> paths, ParsePaths({dir}, base));
    tree.dir = paths.front();
    for (const KernelTreeSource& other : trees) {
      if (other.name == tree.name) {
        return absl::InvalidArgumentError(tree.name.empty() ? "several trees: name each, NAME=DIR"
                                                            : text::Cat("two trees are named ", tree.name));
      }
    }
    trees.push_back(std::move(tree));
  }
  if (trees.size() > 1 && std::any_of(trees.begin(), trees.end(), [](const auto& t) { return t.name.empty(); })) {
    return absl::InvalidArgumentError("several trees: name each, NAME=DIR (its kernels are then NAME/kernel)");
  }
  return trees;
}

// The kernel trees and their locks.
void AddKernelRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(Bind<std::vector<KernelTreeSource>, std::vector<KernelTreeSource>>(
      S{.key = "kernels",
        .flag = "--kernels",
        .kind = K::kFiles,
        .value_name = "[NAME=]DIR",
        .help = text::Cat("Kernel tree (sources and kernels.toml); NAME=DIR names it and its kernels NAME/kernel; "
                          "repeatable, each named (default: ",
                          DefaultKernelsDir().string(), ")"),
        .example = "sglang=/usr/share/jitd/kernels"},
      &ConfigLayer::kernels, &DaemonConfig::kernels, ParseKernelTrees,
      [](const std::optional<std::vector<KernelTreeSource>>& value) {
        return value.has_value() && !value->empty() ? *value : std::vector<KernelTreeSource>{{"", DefaultKernelsDir()}};
      }));
  Setting lock_row{.key = "lock",
                   .flag = "--lock",
                   .kind = K::kFiles,
                   .value_name = "FILE",
                   .help =
                       "Lock file (jitd lint --write-lock) of the tree it names: that tree serves exactly the "
                       "instantiations and keys it lists, others are FAILED_PRECONDITION; repeatable (default: none)",
                   .example = "/etc/jitd/sglang.lock",
                   .existing_file = true};
  rows.push_back(Bind<std::vector<fs::path>, std::vector<fs::path>>(
      std::move(lock_row), &ConfigLayer::locks, &DaemonConfig::locks, ParsePaths,
      Or<std::vector<fs::path>>(std::vector<fs::path>{})));
}

// Module kernels' toolchain (kind = "module"): found when unset
// (manifest::DetectModuleToolchain), on the first module request.
void AddModuleToolRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(PathRow(S{.key = "nvcc",
                           .flag = "--nvcc",
                           .kind = K::kPath,
                           .value_name = "PATH",
                           .help = "nvcc for module kernels (default: bin/nvcc of the toolkit of --cuda-include)",
                           .example = "/usr/local/cuda/bin/nvcc"},
                         &ConfigLayer::nvcc, &DaemonConfig::nvcc, [] { return fs::path(); }));
  rows.push_back(PathRow(S{.key = "host_cxx",
                           .flag = "--host-cxx",
                           .kind = K::kPath,
                           .value_name = "PATH",
                           .help = "Host C++ compiler nvcc uses for module kernels (default: g++ on PATH)",
                           .example = "/usr/bin/g++-12"},
                         &ConfigLayer::host_cxx, &DaemonConfig::host_cxx, [] { return fs::path(); }));
  rows.push_back(PathRow(S{.key = "tvm_ffi_root",
                           .flag = "--tvm-ffi-root",
                           .kind = K::kPath,
                           .value_name = "DIR",
                           .help = "tvm_ffi package directory (include/, lib/libtvm_ffi.so) module kernels link "
                                   "against (default: $JITD_TVM_FFI_ROOT, the one found at build time, or "
                                   "python3's)",
                           .example = "/opt/jitd/tvm-ffi/lib/python3.11/site-packages/tvm_ffi"},
                         &ConfigLayer::tvm_ffi_root, &DaemonConfig::tvm_ffi_root, [] { return fs::path(); }));
}

// Where the daemon listens, keeps its cache and finds its kernels, and what it compiles with.
void AddWhereRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(Bind<std::vector<std::string>, std::vector<std::string>>(
      S{.key = "listen",
        .flag = "--listen",
        .kind = K::kAddresses,
        .value_name = "ADDR",
        .help =
            text::Cat("unix:PATH or HOST:PORT, repeatable (default: ", DefaultEndpoint(), "; never TCP unless asked)"),
        .example = "unix:/run/jitd/jitd.sock"},
      &ConfigLayer::listen, &DaemonConfig::listen,
      [](const Texts& texts, const fs::path& base) -> absl::StatusOr<std::vector<std::string>> {
        std::vector<std::string> addresses = texts;
        for (std::string& address : addresses) {
          if (!base.empty() && absl::StartsWith(address, "unix:") && address.size() > 5 && address[5] != '/') {
            address = text::Cat("unix:", (base / address.substr(5)).string());
          }
          JITD_RETURN_IF_ERROR(CheckListenAddress(address));
        }
        return addresses;
      },
      [](const std::optional<std::vector<std::string>>& value) {
        std::vector<std::string> listen = value.value_or(std::vector<std::string>{});
        if (listen.empty()) listen.push_back(DefaultEndpoint());
        return listen;
      }));
  rows.push_back(PathRow(S{.key = "cache_dir",
                           .flag = "--cache-dir",
                           .kind = K::kPath,
                           .value_name = "DIR",
                           .help = text::Cat("Cache directory (default: ", DefaultCacheDir().string(), ")"),
                           .example = "/var/cache/jitd"},
                         &ConfigLayer::cache_dir, &DaemonConfig::cache_dir, DefaultCacheDir));
  AddKernelRows(rows);
  rows.push_back(PathRow(S{.key = "cuda_include",
                           .flag = "--cuda-include",
                           .kind = K::kPath,
                           .value_name = "DIR",
                           .help = text::Cat("CUDA toolkit headers NVRTC compiles with; watched for changes (default: ",
                                             compiler::kDefaultCudaInclude, ")"),
                           .example = "/usr/local/cuda/include"},
                         &ConfigLayer::cuda_include, &DaemonConfig::cuda_include,
                         [] { return fs::path(compiler::kDefaultCudaInclude); }));
  AddModuleToolRows(rows);
  rows.push_back(BytesRow(S{.key = "max_cache_bytes",
                            .flag = "--max-cache-bytes",
                            .kind = K::kBytes,
                            .value_name = "N",
                            .help = "Cache budget: bytes or 512M, 10G, 1T; 0 = unbounded (default: 10G)",
                            .example = "20G"},
                          &ConfigLayer::max_cache_bytes, &DaemonConfig::max_cache_bytes, kDefaultMaxCacheBytes));
  rows.push_back(IntegerRow<uint32_t>(
      S{.key = "workers",
        .flag = "--workers",
        .kind = K::kInteger,
        .value_name = "N",
        .help = "Compile workers (default: one per CPU)",
        .example = "8"},
      &ConfigLayer::workers, &DaemonConfig::workers, [] { return std::max(1u, std::thread::hardware_concurrency()); },
      CheckWorkers));
}

// What requests compile for.
void AddArchRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(TextRow(S{.key = "arch",
                           .flag = "--arch",
                           .kind = K::kText,
                           .value_name = "sm_XX",
                           .help = text::Cat("Arch for requests that name none (default: ", kDefaultArch, ")"),
                           .example = "sm_90a"},
                         &ConfigLayer::arch, &DaemonConfig::arch, std::string(kDefaultArch), CheckArch));
  rows.push_back(Bind<std::vector<std::string>, std::vector<std::string>>(
      S{.key = "fleet_archs",
        .flag = "--fleet-archs",
        .kind = K::kText,
        .value_name = "LIST",
        .help = "The fleet's GPU archs, comma-separated: a fleet request gets a fatbin of SASS for each plus the PTX "
                "of the lowest; requests for other archs are counted as misses (default: none)",
        .example = "sm_90a,sm_100a,sm_120"},
      &ConfigLayer::fleet_archs, &DaemonConfig::fleet_archs,
      [](const Texts& texts, const fs::path&) { return ParseFleetArchs(One(texts)); },
      Or<std::vector<std::string>>(std::vector<std::string>{})));
}

// Toolkit upgrades without a cold start (serving/rewarm.h).
void AddRewarmRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(Bind<uint64_t, uint64_t>(
      S{.key = "rewarm_count",
        .flag = "--rewarm-count",
        .kind = K::kCount,
        .value_name = "N",
        .help = "After a toolkit change (running, or since the last start), compile the N most used instantiations of "
                "the cache under "
                "the toolkit in use now, in the background, before clients ask; 0 = off (default: 64)",
        .example = "128"},
      &ConfigLayer::rewarm_count, &DaemonConfig::rewarm_count, ParseCount(), Or<uint64_t>(64)));
  rows.push_back(SecondsRow(S{.key = "rewarm_seconds",
                              .flag = "--rewarm-seconds",
                              .kind = K::kSeconds,
                              .value_name = "SECONDS",
                              .help = "Longest one such recompile may run; what is left then compiles when asked "
                                      "for (default: 10m)",
                              .example = "5m"},
                            &ConfigLayer::rewarm_seconds, &DaemonConfig::rewarm_seconds, std::chrono::minutes(10),
                            CheckNotNegative));
}

// The shared tier behind the local cache.
void AddRemoteRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(TextRow(S{.key = "remote",
                           .flag = "--remote",
                           .kind = K::kText,
                           .value_name = "URL",
                           .help = "Shared tier behind the local cache: redis://HOST:PORT/DB, rediss://HOST:PORT/DB "
                                   "(TLS) or unix://PATH (default: none)",
                           .example = "redis://cache.internal:6379/0"},
                         &ConfigLayer::remote, &DaemonConfig::remote, "", CheckRemoteUrl));
  rows.push_back(OptionalFileRow(
      S{.key = "remote_password_file",
        .flag = "--remote-password-file",
        .kind = K::kPath,
        .value_name = "FILE",
        .help = "The remote tier's password (AUTH), first line of FILE (keeps it out of ps and configs)",
        .example = "/etc/jitd/redis-password"},
      &ConfigLayer::remote_password_file, &DaemonConfig::remote_password_file));
  rows.push_back(OptionalFileRow(S{.key = "remote_tls_ca",
                                   .flag = "--remote-tls-ca",
                                   .kind = K::kPath,
                                   .value_name = "FILE",
                                   .help = "rediss://: PEM CA bundle for the server's certificate (default: the "
                                           "system's)",
                                   .example = "/etc/jitd/redis-ca.pem"},
                                 &ConfigLayer::remote_tls_ca, &DaemonConfig::remote_tls_ca));
  rows.push_back(OptionalFileRow(S{.key = "remote_tls_cert",
                                   .flag = "--remote-tls-cert",
                                   .kind = K::kPath,
                                   .value_name = "FILE",
                                   .help = "rediss://: PEM client certificate, for servers that require one",
                                   .example = "/etc/jitd/redis-client.pem"},
                                 &ConfigLayer::remote_tls_cert, &DaemonConfig::remote_tls_cert));
  rows.push_back(OptionalFileRow(S{.key = "remote_tls_key",
                                   .flag = "--remote-tls-key",
                                   .kind = K::kPath,
                                   .value_name = "FILE",
                                   .help = "rediss://: PEM key of --remote-tls-cert",
                                   .example = "/etc/jitd/redis-client.key"},
                                 &ConfigLayer::remote_tls_key, &DaemonConfig::remote_tls_key));
  rows.push_back(Bind<std::chrono::milliseconds, std::chrono::milliseconds>(
      S{.key = "remote_timeout_ms",
        .flag = "--remote-timeout-ms",
        .kind = K::kMilliseconds,
        .value_name = "MS",
        .help = text::Cat("Longest one remote command may take, plus as long again (at most 1 s) to connect; then "
                          "the request goes local (default: ",
                          kDefaultRemoteTimeout.count(), ")"),
        .example = "250"},
      &ConfigLayer::remote_timeout, &DaemonConfig::remote_timeout,
      [](const Texts& texts, const fs::path&) -> absl::StatusOr<std::chrono::milliseconds> {
        JITD_ASSIGN_OR_RETURN(int64_t ms, ParseInteger(One(texts)));
        JITD_RETURN_IF_ERROR(CheckRemoteTimeout(ms));
        return std::chrono::milliseconds(ms);
      },
      Or<std::chrono::milliseconds>(kDefaultRemoteTimeout)));
  rows.push_back(BytesRow(S{.key = "remote_max_value_bytes",
                            .flag = "--remote-max-value-bytes",
                            .kind = K::kBytes,
                            .value_name = "N",
                            .help = "Largest remote value read (bytes or 16M); a bigger one is refused unread and "
                                    "counted (default: 64M)",
                            .example = "16M"},
                          &ConfigLayer::remote_max_value_bytes, &DaemonConfig::remote_max_value_bytes,
                          kDefaultRemoteMaxValueBytes, CheckRemoteMaxValueBytes));
  rows.push_back(OptionalFileRow(
      S{.key = "remote_signing_key_file",
        .flag = "--remote-signing-key-file",
        .kind = K::kPath,
        .value_name = "FILE",
        .help = "Secret the fleet shares (>= 16 bytes): remote values are signed with it (HMAC-SHA256) and unsigned "
                "ones refused, so write access to the store cannot inject cubins",
        .example = "/etc/jitd/fleet-key"},
      &ConfigLayer::remote_signing_key_file, &DaemonConfig::remote_signing_key_file));
}

// What is served read-only below the cache.
void AddBundleRows(std::vector<Setting>& rows) {
  using K = SettingKind;
  Setting bundle_row{.key = "bundle",
                     .flag = "--bundle",
                     .kind = K::kFiles,
                     .value_name = "FILE",
                     .help =
                         "Sealed seed bundle (jitd bundle create) to serve from, read-only, below the cache; "
                         "repeatable, asked in order; verified whole at start (default: none)",
                     .example = "/opt/jitd/seed.jitdbundle",
                     .existing_file = true};
  rows.push_back(Bind<std::vector<fs::path>, std::vector<fs::path>>(
      std::move(bundle_row), &ConfigLayer::bundles, &DaemonConfig::bundles, ParsePaths,
      Or<std::vector<fs::path>>(std::vector<fs::path>{})));
}

// Metrics, the admin token, and how compiles and hits are served.
void AddServingRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(TextRow(S{.key = "metrics_listen",
                           .flag = "--metrics-listen",
                           .kind = K::kText,
                           .value_name = "HOST:PORT",
                           .help = "HOST:PORT serving Prometheus metrics at /metrics (default: none)",
                           .example = "127.0.0.1:9464"},
                         &ConfigLayer::metrics_listen, &DaemonConfig::metrics_listen, "", CheckMetricsListen));
  // Not required to exist: the daemon writes it when it is missing.
  rows.push_back(PathRow(S{.key = "admin_token_file",
                           .flag = "--admin-token-file",
                           .kind = K::kPath,
                           .value_name = "FILE",
                           .help = "Admin token for Evict and Verify --repair (authorization: Bearer) from this file "
                                   "(default: a new one each start, in SOCKET.admin-token, readable by this user "
                                   "only)",
                           .example = "/etc/jitd/admin-token"},
                         &ConfigLayer::admin_token_file, &DaemonConfig::admin_token_file, [] { return fs::path(); }));
  rows.push_back(IntegerRow<uint64_t>(
      S{.key = "max_queue",
        .flag = "--max-queue",
        .kind = K::kInteger,
        .value_name = "N",
        .help = text::Cat(
            "Compiles allowed to wait for a worker; beyond, RESOURCE_EXHAUSTED (default: ", kDefaultMaxQueue, ")"),
        .example = "64"},
      &ConfigLayer::max_queue, &DaemonConfig::max_queue, [] { return kDefaultMaxQueue; }, CheckMaxQueue));
  rows.push_back(BytesRow(S{.key = "hot_cache_bytes",
                            .flag = "--hot-cache-bytes",
                            .kind = K::kBytes,
                            .value_name = "N",
                            .help = "Bytes of cubins kept in memory in front of the disk cache (default: 256M)",
                            .example = "128M"},
                          &ConfigLayer::hot_cache_bytes, &DaemonConfig::hot_cache_bytes, kDefaultHotCacheBytes));
  rows.push_back(SecondsRow(S{.key = "negative_ttl",
                              .flag = "--negative-ttl",
                              .kind = K::kSeconds,
                              .value_name = "SECONDS",
                              .help = text::Cat("How long a compile failure is answered without recompiling: seconds "
                                                "or 30s, 2m; 0 = off (default: ",
                                                kDefaultNegativeTtl.count(), "s)"),
                              .example = "2m"},
                            &ConfigLayer::negative_ttl, &DaemonConfig::negative_ttl, kDefaultNegativeTtl,
                            CheckNegativeTtl));
  rows.push_back(SwitchRow(S{.key = "log_hits",
                             .flag = "--log-hits",
                             .kind = K::kSwitch,
                             .value_name = "",
                             .help = "Log one line per cache hit (compiles are always logged)",
                             .example = "true"},
                           &ConfigLayer::log_hits, &DaemonConfig::log_hits, false));
  rows.push_back(SwitchRow(S{.key = "local_path",
                             .flag = "--no-local-path",
                             .kind = K::kSwitch,
                             .value_name = "",
                             .help = "Serve gRPC only on the Unix sockets: no local path, jitd's own framing for "
                                     "same-host clients' cached kernels (docs/CONTRACT.md)",
                             .example = "false",
                             .switch_value = false},
                           &ConfigLayer::local_path, &DaemonConfig::local_path, true));
}

// TLS for TCP addresses, and what one peer may cost.
void AddBoundRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(OptionalFileRow(S{.key = "tls_cert",
                                   .flag = "--tls-cert",
                                   .kind = K::kPath,
                                   .value_name = "FILE",
                                   .help = "PEM certificate chain for TCP addresses (TLS)",
                                   .example = "/etc/jitd/server.pem"},
                                 &ConfigLayer::tls_cert, &DaemonConfig::tls_cert));
  rows.push_back(OptionalFileRow(S{.key = "tls_key",
                                   .flag = "--tls-key",
                                   .kind = K::kPath,
                                   .value_name = "FILE",
                                   .help = "PEM private key of --tls-cert",
                                   .example = "/etc/jitd/server.key"},
                                 &ConfigLayer::tls_key, &DaemonConfig::tls_key));
  rows.push_back(OptionalFileRow(S{.key = "tls_client_ca",
                                   .flag = "--tls-client-ca",
                                   .kind = K::kPath,
                                   .value_name = "FILE",
                                   .help = "PEM CA: TCP clients must present a certificate it signed (mutual TLS)",
                                   .example = "/etc/jitd/clients-ca.pem"},
                                 &ConfigLayer::tls_client_ca, &DaemonConfig::tls_client_ca));
  rows.push_back(Bind<uint64_t, uint64_t>(
      S{.key = "max_calls_per_peer",
        .flag = "--max-calls-per-peer",
        .kind = K::kCount,
        .value_name = "N",
        .help =
            text::Cat("GetKernel, Warm and ListKernels calls one client may have in flight; 0 = no bound (default: ",
                      kDefaultMaxCallsPerPeer, "; a peer is a user on the Unix sockets, an address over TCP)"),
        .example = "512"},
      &ConfigLayer::max_calls_per_peer, &DaemonConfig::max_calls_per_peer, ParseCount(),
      Or<uint64_t>(kDefaultMaxCallsPerPeer)));
  // Unset: decided at start from the descriptor limit (fd_limit.h).
  auto unset = [](const std::optional<uint64_t>& value) { return value; };
  rows.push_back(Bind<uint64_t, std::optional<uint64_t>>(
      S{.key = "max_connections",
        .flag = "--max-connections",
        .kind = K::kCount,
        .value_name = "N",
        .help = "Connections open at once on the Unix sockets; one more is told why and closed; 0 = no bound "
                "(default: the file descriptor limit less a reserve, at most 4096)",
        .example = "2048"},
      &ConfigLayer::max_connections, &DaemonConfig::max_connections, ParseCount(), unset));
  rows.push_back(Bind<uint64_t, std::optional<uint64_t>>(
      S{.key = "max_connections_per_peer",
        .flag = "--max-connections-per-peer",
        .kind = K::kCount,
        .value_name = "N",
        .help = "Connections one user (uid) may hold open on the Unix sockets; 0 = no bound (default: half of "
                "--max-connections)",
        .example = "1024"},
      &ConfigLayer::max_connections_per_peer, &DaemonConfig::max_connections_per_peer, ParseCount(), unset));
}

// Keeping the daemon reachable and its callers and kernels checked.
void AddGuardRows(std::vector<Setting>& rows) {
  using S = Setting;
  using K = SettingKind;
  rows.push_back(SecondsRow(
      S{.key = "listen_probe_interval",
        .flag = "--listen-probe-interval",
        .kind = K::kSeconds,
        .value_name = "SECONDS",
        .help = text::Cat("How often jitd checks that its listeners still accept (three unanswered probes in a row: "
                          "exit ",
                          kExitListenerDeaf, ", for the supervisor to restart it); 0 = off (default: ",
                          kDefaultListenProbeInterval.count(), "s)"),
        .example = "30s"},
      &ConfigLayer::listen_probe_interval, &DaemonConfig::listen_probe_interval, kDefaultListenProbeInterval,
      CheckNotNegative));
  rows.push_back(TextRow(S{.key = "socket_group",
                           .flag = "--socket-group",
                           .kind = K::kText,
                           .value_name = "GROUP",
                           .help = "Group of the Unix sockets (mode 0660): its members may call jitd (default: the "
                                   "daemon's group)",
                           .example = "inference"},
                         &ConfigLayer::socket_group, &DaemonConfig::socket_group, "", CheckGroupName));
  rows.push_back(SwitchRow(S{.key = "insecure_tcp",
                             .flag = "--insecure-tcp",
                             .kind = K::kSwitch,
                             .value_name = "",
                             .help = "Allow TCP addresses without TLS (plaintext; only on a network you trust)",
                             .example = "true"},
                           &ConfigLayer::insecure_tcp, &DaemonConfig::insecure_tcp, false));
  rows.push_back(SwitchRow(S{.key = "allow_guard_findings",
                             .flag = "--allow-guard-findings",
                             .kind = K::kSwitch,
                             .value_name = "",
                             .help = "Serve even when kernel sources fail the namespace guard's check (warns instead "
                                     "of refusing)",
                             .example = "true"},
                           &ConfigLayer::allow_guard_findings, &DaemonConfig::allow_guard_findings, false));
}

std::vector<Setting> MakeSettings() {
  std::vector<Setting> rows;
  AddWhereRows(rows);
  AddArchRows(rows);
  AddRewarmRows(rows);
  AddRemoteRows(rows);
  AddBundleRows(rows);
  AddServingRows(rows);
  AddBoundRows(rows);
  AddGuardRows(rows);
  return rows;
}

}  // namespace

absl::StatusOr<std::vector<KernelTreeSource>> ParseKernelTreeFlags(const std::vector<std::string>& texts) {
  return ParseKernelTrees(texts, fs::current_path());
}

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> settings = MakeSettings();
  return settings;
}

const Setting* FindSetting(std::string_view key) {
  for (const Setting& setting : Settings()) {
    if (setting.key == key) return &setting;
  }
  return nullptr;
}

}  // namespace jitd::daemon
