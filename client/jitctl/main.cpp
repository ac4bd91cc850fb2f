// jitctl: talks to a running jitd daemon. One verb per invocation; each
// verb lives in its own verb_*.cpp.
#include <CLI/CLI.hpp>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "jitd/client.h"
#include "verb.h"

namespace {

// Exit codes: 0 success; 1 the daemon answered an error (or the answer
// reports problems); 2 the command line is wrong.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Fail(std::string_view verb, const absl::Status& status, int exit_code) {
  std::cerr << "jitctl: " << verb << ": " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << '\n';
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("jitctl: talk to a running jitd daemon (cubins, cache administration)", "jitctl");
  std::string endpoint;
  std::string token_file;
  std::string timeout = "120s";
  std::string fallback_cache_dir;
  bool json = false;
  app.add_option(
         "--endpoint", endpoint,
         "Daemon address, unix:PATH or HOST:PORT (default: $JITD_ENDPOINT, then " + jitd::DefaultEndpoint() + ")")
      ->type_name("ADDR");
  app.add_flag("--json", json, "Print one JSON document instead of a table");
  app.add_option("--admin-token-file", token_file,
                 "File holding the admin token, for evict and verify --repair (default: SOCKET.admin-token, "
                 "when this user may read it)")
      ->type_name("FILE");
  std::string tls_ca, tls_cert, tls_key;
  app.add_option("--tls-ca", tls_ca, "For a HOST:PORT endpoint: PEM CA of the daemon's TLS certificate")
      ->type_name("FILE");
  app.add_option("--tls-cert", tls_cert, "For a HOST:PORT endpoint: this client's PEM certificate (mutual TLS)")
      ->type_name("FILE");
  app.add_option("--tls-key", tls_key, "The PEM key of --tls-cert")->type_name("FILE");
  app.add_option("--fallback-cache-dir", fallback_cache_dir,
                 "For get: a warmed cache directory to read (read-only) when the daemon cannot be reached "
                 "(default: $JITD_FALLBACK_CACHE_DIR)")
      ->type_name("DIR");
  app.add_option("--timeout", timeout, "Deadline of each call (30s, 15m, 2h)")
      ->capture_default_str()
      ->type_name("DURATION");
  app.set_version_flag("--version", JITD_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success, 1 the daemon answered an error, 2 usage error.\n"
      "Run `jitctl VERB --help` for a verb's options.");

  std::vector<std::unique_ptr<jitd::jitctl::Verb>> verbs = jitd::jitctl::MakeVerbs();
  std::vector<std::pair<CLI::App*, jitd::jitctl::Verb*>> subcommands;
  for (const auto& verb : verbs) subcommands.emplace_back(verb->Register(app), verb.get());

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }

  CLI::App* chosen = app.get_subcommands().front();
  jitd::jitctl::Verb* verb = nullptr;
  for (const auto& [sub, candidate] : subcommands) {
    if (sub == chosen) verb = candidate;
  }
  const std::string name = chosen->get_name();
  if (absl::Status valid = verb->Validate(); !valid.ok()) return Fail(name, valid, kExitUsage);

  jitd::ClientOptions options;
  options.endpoint = endpoint;
  options.fallback_cache_dir = fallback_cache_dir;
  options.tls_ca_file = tls_ca;
  options.tls_cert_file = tls_cert;
  options.tls_key_file = tls_key;
  absl::StatusOr<std::chrono::seconds> call_timeout = jitd::ParseDuration(timeout);
  if (!call_timeout.ok()) return Fail("--timeout", call_timeout.status(), kExitUsage);
  options.call_timeout = *call_timeout;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = jitd::ReadAdminTokenFile(token_file);
    if (!token.ok()) return Fail("--admin-token-file", token.status(), kExitUsage);
    options.admin_token = *token;
  }

  absl::StatusOr<std::unique_ptr<jitd::Client>> client = jitd::Client::Connect(options);
  if (!client.ok()) return Fail(name, client.status(), kExitFailure);
  absl::StatusOr<int> exit_code = verb->Run(**client, {std::cout, json});
  if (!exit_code.ok()) return Fail(name, exit_code.status(), kExitFailure);
  return *exit_code;
}
