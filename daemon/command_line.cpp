#include "command_line.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jitd/base/endpoint.h"
#include "jitd/base/units.h"
#include "toolkit_watch.h"

namespace jitd::daemon {
namespace {

constexpr char kDescription[] =
    "jitd: JIT compilation daemon for CUDA kernels.\n"
    "Without a subcommand it serves: cubins to clients over gRPC, from its cache.\n"
    "Talk to it with `jitctl` (jitctl --help).";

// The flags as typed; checked and moved into a ConfigLayer after parsing.
struct ServeFlags {
  std::string config_file;
  std::vector<std::string> listen;
  std::string cache_dir;
  std::string kernels_dir;
  std::string cuda_include;
  std::string max_cache_bytes;
  int64_t workers = 0;
  std::string arch;
  std::string remote;
  std::string remote_password_file;
  std::string remote_tls_ca;
  std::string remote_tls_cert;
  std::string remote_tls_key;
  int64_t remote_timeout_ms = 0;
  std::string remote_max_value_bytes;
  std::string remote_signing_key_file;
  std::string metrics_listen;
  std::string admin_token_file;
  int64_t max_queue = 0;
  std::string hot_cache_bytes;
  std::string negative_ttl;
  bool log_hits = false;
  bool no_local_path = false;
  bool allow_guard_findings = false;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool insecure_tcp = false;
  std::string socket_group;
  int64_t max_calls_per_peer = -1;
  int64_t max_connections = -1;
  int64_t max_connections_per_peer = -1;
  std::string listen_probe_interval;
};

// CLI11's ExistingFile without its description, which --help would
// otherwise print after the type name ("FILE:FILE").
const CLI::Validator& ExistingFile() {
  static const CLI::Validator validator = CLI::Validator(CLI::ExistingFile).description("");
  return validator;
}

void AddServeFlags(CLI::App& app, ServeFlags& flags) {
  app.add_option("--config", flags.config_file, "TOML file of settings (keys as these flags, '_' for '-'); flags win")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--listen", flags.listen,
                 "unix:PATH or HOST:PORT, repeatable (default: " + DefaultEndpoint() + "; never TCP unless asked)")
      ->type_name("ADDR");
  app.add_option("--cache-dir", flags.cache_dir, "Cache directory (default: " + DefaultCacheDir().string() + ")")
      ->type_name("DIR");
  app.add_option("--kernels", flags.kernels_dir,
                 "Kernel sources and manifest (default: " + DefaultKernelsDir().string() + ")")
      ->type_name("DIR");
  app.add_option("--cuda-include", flags.cuda_include,
                 absl::StrCat("CUDA toolkit headers NVRTC compiles with; watched for changes (default: ",
                              compiler::kDefaultCudaInclude, ")"))
      ->type_name("DIR");
  app.add_option("--max-cache-bytes", flags.max_cache_bytes,
                 "Cache budget: bytes or 512M, 10G, 1T; 0 = unbounded (default: 10G)")
      ->type_name("N");
  app.add_option("--workers", flags.workers, "Compile workers (default: one per CPU)")->type_name("N");
  app.add_option("--arch", flags.arch,
                 absl::StrCat("Arch for requests that name none (default: ", std::string(kDefaultArch), ")"))
      ->type_name("sm_XX");
  app.add_option("--remote", flags.remote,
                 "Shared tier behind the local cache: redis://HOST:PORT/DB, rediss://HOST:PORT/DB (TLS) or "
                 "unix://PATH (default: none)")
      ->type_name("URL");
  app.add_option("--remote-password-file", flags.remote_password_file,
                 "The remote tier's password (AUTH), first line of FILE (keeps it out of ps and configs)")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--remote-tls-ca", flags.remote_tls_ca,
                 "rediss://: PEM CA bundle for the server's certificate (default: the system's)")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--remote-tls-cert", flags.remote_tls_cert,
                 "rediss://: PEM client certificate, for servers that require one")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--remote-tls-key", flags.remote_tls_key, "rediss://: PEM key of --remote-tls-cert")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--remote-timeout-ms", flags.remote_timeout_ms,
                 absl::StrCat("Longest one remote command may take, plus as long again (at most 1 s) to connect; then "
                              "the request goes local (default: ",
                              kDefaultRemoteTimeout.count(), ")"))
      ->type_name("MS");
  app.add_option("--remote-max-value-bytes", flags.remote_max_value_bytes,
                 "Largest remote value read (bytes or 16M); a bigger one is refused unread and counted "
                 "(default: 64M)")
      ->type_name("N");
  app.add_option("--remote-signing-key-file", flags.remote_signing_key_file,
                 "Secret the fleet shares (>= 16 bytes): remote values are signed with it (HMAC-SHA256) and "
                 "unsigned ones refused, so write access to the store cannot inject cubins")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "HOST:PORT serving Prometheus metrics at /metrics (default: none)")
      ->type_name("HOST:PORT");
  app.add_option("--admin-token-file", flags.admin_token_file,
                 "Admin token for Evict and Verify --repair (authorization: Bearer) from this file (default: a new one "
                 "each start, in SOCKET.admin-token, readable by this user only)")
      ->type_name("FILE");
  app.add_option("--max-queue", flags.max_queue,
                 absl::StrCat("Compiles allowed to wait for a worker; beyond, RESOURCE_EXHAUSTED (default: ",
                              kDefaultMaxQueue, ")"))
      ->type_name("N");
  app.add_option("--hot-cache-bytes", flags.hot_cache_bytes,
                 "Bytes of cubins kept in memory in front of the disk cache (default: 256M)")
      ->type_name("N");
  app.add_option("--negative-ttl", flags.negative_ttl,
                 absl::StrCat("How long a compile failure is answered without recompiling: seconds or 30s, 2m; ",
                              "0 = off (default: ", kDefaultNegativeTtl.count(), "s)"))
      ->type_name("SECONDS");
  app.add_flag("--log-hits", flags.log_hits, "Log one line per cache hit (compiles are always logged)");
  app.add_flag("--no-local-path", flags.no_local_path,
               "Serve gRPC only on the Unix sockets: no local path, jitd's own framing for same-host clients' cached "
               "kernels (docs/CONTRACT.md)");
  app.add_option("--tls-cert", flags.tls_cert, "PEM certificate chain for TCP addresses (TLS)")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert")->check(ExistingFile())->type_name("FILE");
  app.add_option("--tls-client-ca", flags.tls_client_ca,
                 "PEM CA: TCP clients must present a certificate it signed (mutual TLS)")
      ->check(ExistingFile())
      ->type_name("FILE");
  app.add_option("--max-calls-per-peer", flags.max_calls_per_peer,
                 absl::StrCat("GetKernel and Warm calls one client may have in flight; 0 = no bound (default: ",
                              kDefaultMaxCallsPerPeer, "; a peer is a user on the Unix sockets, an address over TCP)"))
      ->type_name("N");
  app.add_option("--max-connections", flags.max_connections,
                 "Connections open at once on the Unix sockets; one more is told why and closed; 0 = no bound "
                 "(default: the file descriptor limit less a reserve, at most 4096)")
      ->type_name("N");
  app.add_option("--max-connections-per-peer", flags.max_connections_per_peer,
                 "Connections one user (uid) may hold open on the Unix sockets; 0 = no bound (default: half of "
                 "--max-connections)")
      ->type_name("N");
  app.add_option("--listen-probe-interval", flags.listen_probe_interval,
                 absl::StrCat("How often jitd checks that its listeners still accept (three unanswered probes in a "
                              "row: exit ",
                              kExitListenerDeaf, ", for the supervisor to restart it); 0 = off (default: ",
                              kDefaultListenProbeInterval.count(), "s)"))
      ->type_name("SECONDS");
  app.add_option("--socket-group", flags.socket_group,
                 "Group of the Unix sockets (mode 0660): its members may call jitd (default: the daemon's group)")
      ->type_name("GROUP");
  app.add_flag("--insecure-tcp", flags.insecure_tcp,
               "Allow TCP addresses without TLS (plaintext; only on a network you trust)");
  app.add_flag("--allow-guard-findings", flags.allow_guard_findings,
               "Serve even when kernel sources fail the namespace guard's check (warns instead of refusing)");
}

// Checks one flag's value; on error prints "jitd: --flag: why".
bool Check(const absl::Status& status, std::string_view flag) {
  if (status.ok()) return true;
  std::cerr << "jitd: " << flag << ": " << status.message() << '\n';
  return false;
}

// Moves the flags that were given into a layer, checking each.
std::optional<ConfigLayer> ToLayer(const CLI::App& app, const ServeFlags& flags) {
  ConfigLayer layer;
  auto given = [&](const char* name) { return app.count(name) > 0; };
  if (given("--listen")) {
    for (const std::string& address : flags.listen) {
      if (!Check(CheckListenAddress(address), "--listen")) return std::nullopt;
    }
    layer.listen = flags.listen;
  }
  if (given("--cache-dir")) layer.cache_dir = std::filesystem::absolute(flags.cache_dir);
  if (given("--kernels")) layer.kernels_dir = std::filesystem::absolute(flags.kernels_dir);
  if (given("--cuda-include")) layer.cuda_include = std::filesystem::absolute(flags.cuda_include);
  if (given("--max-cache-bytes")) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(flags.max_cache_bytes);
    if (!Check(bytes.status(), "--max-cache-bytes")) return std::nullopt;
    layer.max_cache_bytes = *bytes;
  }
  if (given("--workers")) {
    if (!Check(CheckWorkers(flags.workers), "--workers")) return std::nullopt;
    layer.workers = static_cast<uint32_t>(flags.workers);
  }
  if (given("--arch")) {
    if (!Check(CheckArch(flags.arch), "--arch")) return std::nullopt;
    layer.arch = flags.arch;
  }
  if (given("--remote")) {
    if (!Check(CheckRemoteUrl(flags.remote), "--remote")) return std::nullopt;
    layer.remote = flags.remote;
  }
  if (given("--remote-password-file"))
    layer.remote_password_file = std::filesystem::absolute(flags.remote_password_file);
  if (given("--remote-tls-ca")) layer.remote_tls_ca = std::filesystem::absolute(flags.remote_tls_ca);
  if (given("--remote-tls-cert")) layer.remote_tls_cert = std::filesystem::absolute(flags.remote_tls_cert);
  if (given("--remote-tls-key")) layer.remote_tls_key = std::filesystem::absolute(flags.remote_tls_key);
  if (given("--remote-signing-key-file")) {
    layer.remote_signing_key_file = std::filesystem::absolute(flags.remote_signing_key_file);
  }
  if (given("--remote-timeout-ms")) {
    if (!Check(CheckRemoteTimeout(flags.remote_timeout_ms), "--remote-timeout-ms")) return std::nullopt;
    layer.remote_timeout = std::chrono::milliseconds(flags.remote_timeout_ms);
  }
  if (given("--metrics-listen")) {
    if (!Check(CheckMetricsListen(flags.metrics_listen), "--metrics-listen")) return std::nullopt;
    layer.metrics_listen = flags.metrics_listen;
  }
  if (given("--admin-token-file")) {
    layer.admin_token_file = std::filesystem::absolute(flags.admin_token_file);
  }
  if (given("--max-queue")) {
    if (!Check(CheckMaxQueue(flags.max_queue), "--max-queue")) return std::nullopt;
    layer.max_queue = static_cast<uint64_t>(flags.max_queue);
  }
  if (given("--remote-max-value-bytes")) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(flags.remote_max_value_bytes);
    if (!Check(bytes.status(), "--remote-max-value-bytes")) return std::nullopt;
    if (!Check(CheckRemoteMaxValueBytes(*bytes), "--remote-max-value-bytes")) return std::nullopt;
    layer.remote_max_value_bytes = *bytes;
  }
  if (given("--hot-cache-bytes")) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(flags.hot_cache_bytes);
    if (!Check(bytes.status(), "--hot-cache-bytes")) return std::nullopt;
    layer.hot_cache_bytes = *bytes;
  }
  if (given("--negative-ttl")) {
    absl::StatusOr<std::chrono::seconds> ttl = ParseDuration(flags.negative_ttl);
    if (!Check(ttl.status(), "--negative-ttl")) return std::nullopt;
    if (!Check(CheckNegativeTtl(ttl->count()), "--negative-ttl")) return std::nullopt;
    layer.negative_ttl = *ttl;
  }
  if (given("--log-hits")) layer.log_hits = flags.log_hits;
  if (given("--no-local-path")) layer.local_path = !flags.no_local_path;
  if (given("--allow-guard-findings")) layer.allow_guard_findings = flags.allow_guard_findings;
  if (given("--tls-cert")) layer.tls_cert = std::filesystem::absolute(flags.tls_cert);
  if (given("--tls-key")) layer.tls_key = std::filesystem::absolute(flags.tls_key);
  if (given("--tls-client-ca")) layer.tls_client_ca = std::filesystem::absolute(flags.tls_client_ca);
  if (given("--insecure-tcp")) layer.insecure_tcp = flags.insecure_tcp;
  if (given("--max-calls-per-peer")) {
    if (flags.max_calls_per_peer < 0) {
      Check(absl::InvalidArgumentError("must be 0 (no bound) or a positive count"), "--max-calls-per-peer");
      return std::nullopt;
    }
    layer.max_calls_per_peer = static_cast<uint64_t>(flags.max_calls_per_peer);
  }
  for (const auto& [name, value, field] :
       {std::tuple{"--max-connections", flags.max_connections, &ConfigLayer::max_connections},
        std::tuple{"--max-connections-per-peer", flags.max_connections_per_peer,
                   &ConfigLayer::max_connections_per_peer}}) {
    if (!given(name)) continue;
    if (value < 0) {
      Check(absl::InvalidArgumentError("must be 0 (no bound) or a positive count"), name);
      return std::nullopt;
    }
    layer.*field = static_cast<uint64_t>(value);
  }
  if (given("--listen-probe-interval")) {
    absl::StatusOr<std::chrono::seconds> interval = ParseDuration(flags.listen_probe_interval);
    if (!Check(interval.status(), "--listen-probe-interval")) return std::nullopt;
    layer.listen_probe_interval = *interval;
  }
  if (given("--socket-group")) {
    if (!Check(CheckGroupName(flags.socket_group), "--socket-group")) return std::nullopt;
    layer.socket_group = flags.socket_group;
  }
  return layer;
}

struct OfflineFlags {
  std::string kernels_dir;
  std::string cuda_include;
  std::string cache_dir;
  std::vector<std::string> archs;
  bool all = false;
  std::string manifest;
  uint32_t workers = 0;
  bool source_only = false;
};

// What lint and warm compile with: kernels, toolkit, archs, workers.
void AddCompileOptions(CLI::App& sub, OfflineFlags& flags, const std::string& arch_help) {
  sub.add_option("--kernels", flags.kernels_dir,
                 "Kernel sources and manifest (default: " + DefaultKernelsDir().string() + ")")
      ->type_name("DIR");
  sub.add_option(
         "--cuda-include", flags.cuda_include,
         std::string("CUDA toolkit headers NVRTC compiles with (default: ") + compiler::kDefaultCudaInclude + ")")
      ->type_name("DIR");
  sub.add_option("--arch", flags.archs, arch_help)->type_name("ARCH");
  sub.add_option("--workers", flags.workers, "Compile workers (default: one per core)")->type_name("N");
}

void AddOfflineSubcommands(CLI::App& app, OfflineFlags& flags) {
  CLI::App* lint =
      app.add_subcommand("lint", "Check kernel sources against the namespace guard, locally (no daemon needed)");
  AddCompileOptions(*lint, flags, "Arch to check for (repeatable; default sm_90)");
  lint->add_flag("--source-only", flags.source_only, "Only the textual check, no compiles (milliseconds)");
  lint->footer(
      "Exit 0 when every kernel file is in namespace sglang and every instantiation compiles and\n"
      "resolves for every arch; 1 with one finding per problem otherwise.");

  CLI::App* warm = app.add_subcommand("warm", "Fill a cache directory without serving (image builds; no GPU needed)");
  warm->add_option("--cache-dir", flags.cache_dir, "Cache directory to fill")->required()->type_name("DIR");
  warm->add_flag("--all", flags.all, "Every instantiation of the manifest (or --manifest)");
  warm->add_option("--manifest", flags.manifest, "TOML file of [[spec]] tables to warm (or --all)")
      ->check(ExistingFile())
      ->type_name("FILE");
  AddCompileOptions(*warm, flags, "Arch to warm for (repeatable; default sm_90)");
  warm->footer(
      "Safe while a daemon uses the same cache directory. Example:\n"
      "  jitd warm --cache-dir /var/cache/jitd --all --arch sm_90 --arch sm_100a");
}

}  // namespace

std::variant<CommandLine, int> ParseCommandLine(int argc, char** argv) {
  CLI::App app(kDescription, "jitd");
  app.set_version_flag("--version", JITD_VERSION);
  ServeFlags serve_flags;
  AddServeFlags(app, serve_flags);
  // `jitd serve --listen X` and `jitd --listen X` mean the same: the serve
  // flags live on the top level and `serve` passes them through.
  CLI::App* serve = app.add_subcommand("serve", "Serve (the default when no subcommand is given)");
  serve->fallthrough();
  OfflineFlags offline_flags;
  AddOfflineSubcommands(app, offline_flags);
  app.require_subcommand(0, 1);
  app.footer(
      "Examples:\n"
      "  jitd                                    serve on the default socket and cache\n"
      "  jitd --listen unix:/run/jitd.sock --socket-group inference --max-cache-bytes 20G\n"
      "  jitd --listen 10.0.0.5:7070 --tls-cert server.pem --tls-key server.key --tls-client-ca clients.pem\n"
      "  jitd --config /etc/jitd/jitd.toml\n"
      "Ready when grpc.health.v1.Health/Check answers SERVING; SIGTERM drains and exits 0.");

  // `jitd serve --help` shows the serve options, which live on the top
  // level: the whole help, not the subcommand's empty one.
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string_view next = argv[i + 1];
    if (std::string_view(argv[i]) == "serve" && (next == "--help" || next == "-h")) {
      std::cout << app.help();
      return 0;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kExitUsage;
  }

  CommandLine command_line;
  if (app.got_subcommand("lint")) command_line.command = CommandLine::Command::kLint;
  if (app.got_subcommand("warm")) command_line.command = CommandLine::Command::kWarm;
  if (app.count("--config") > 0) command_line.config_file = serve_flags.config_file;
  if (command_line.command != CommandLine::Command::kServe) {
    OfflineOptions& o = command_line.offline;
    o.kernels_dir = offline_flags.kernels_dir;
    if (!offline_flags.cuda_include.empty()) o.cuda_include = std::filesystem::absolute(offline_flags.cuda_include);
    o.cache_dir = offline_flags.cache_dir;
    o.archs = offline_flags.archs;
    o.all = offline_flags.all;
    o.manifest = offline_flags.manifest;
    o.workers = offline_flags.workers;
    o.source_only = offline_flags.source_only;
    for (const auto& arch : o.archs) {
      if (absl::Status s = CheckArch(arch); !s.ok()) {
        std::cerr << "jitd: --arch " << arch << ": " << s.message() << "\n";
        return kExitUsage;
      }
    }
    if (command_line.command == CommandLine::Command::kWarm && !o.all && o.manifest.empty()) {
      std::cerr << "jitd warm: say what to warm: --all (every instantiation) or --manifest FILE\n";
      return kExitUsage;
    }
    if (command_line.command == CommandLine::Command::kWarm && o.all && !o.manifest.empty()) {
      std::cerr << "jitd warm: --all and --manifest exclude each other: give one\n";
      return kExitUsage;
    }
  }
  std::optional<ConfigLayer> layer = ToLayer(app, serve_flags);
  if (!layer.has_value()) return kExitUsage;
  command_line.flags = *std::move(layer);
  return command_line;
}

}  // namespace jitd::daemon
