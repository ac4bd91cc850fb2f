// jitctl: talks to a running jitd daemon. One verb per invocation; each
// verb lives in its own verb_*.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "jitd/base/cli_completion.h"
#include "jitd/base/text.h"
#include "jitd/client.h"
#include "jitd/client_fallback.h"
#include "jitd/revision.h"
#include "json_output.h"
#include "verb.h"

namespace {

// Exit codes: 0 success; 1 the daemon answered an error (or the answer
// reports problems); 2 the command line is wrong.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// With --json, errors are a JSON object on standard output too, for the
// scripts that read it (the line on standard error stays, for people).
bool json_errors = false;

int Fail(std::string_view verb, const absl::Status& status, int exit_code) {
  std::cerr << "jitctl: " << verb << ": " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << '\n';
  if (json_errors) {
    std::cout << "{\"error\": {\"verb\": " << jitd::jitctl::JsonString(verb)
              << ", \"code\": " << jitd::jitctl::JsonString(absl::StatusCodeToString(status.code()))
              << ", \"message\": " << jitd::jitctl::JsonString(std::string(status.message()))
              << ", \"exit\": " << exit_code << "}}\n";
  }
  return exit_code;
}

// The daemon's refusal of an admin call without a token ("<Action> needs
// the admin token: jitctl --admin-token-file FILE (where); other clients
// send it as 'authorization: Bearer <token>'"), said in jitctl's terms:
// which token file jitctl could not read and why, and what to do; the
// daemon's note on where its token is stays, its note on metadata goes.
// Other statuses pass through.
absl::Status ExplainMissingToken(const absl::Status& refused, const jitd::Client& client) {
  constexpr std::string_view kNeeds = " needs the admin token";
  constexpr std::string_view kFlag = "jitctl --admin-token-file FILE";
  constexpr std::string_view kOthers = "; other clients send it";
  const std::string_view message(refused.message().data(), refused.message().size());
  const size_t cut = message.find(kNeeds);
  if (!absl::IsPermissionDenied(refused) || cut == std::string_view::npos) return refused;
  std::string where;  // " (this daemon's token is in ...)", when the daemon says
  if (const size_t flag = message.find(kFlag); flag != std::string_view::npos) {
    const size_t from = flag + kFlag.size();
    where = std::string(message.substr(from, message.find(kOthers, from) - from));
  }
  const absl::Status& unread = client.socket_token_status();
  std::string why(unread.message());
  if (absl::IsNotFound(unread)) {
    why = jitd::text::Cat("there is no token file beside the socket (", why,
                          "): the daemon was given its token with --admin-token-file");
  } else if (unread.ok()) {
    why = client.endpoint().starts_with("unix:")
              ? "none was given"
              : "none was given, and a HOST:PORT endpoint has no token file beside it";
  }
  return absl::PermissionDeniedError(jitd::text::Cat(
      message.substr(0, cut), " needs the daemon's admin token, and jitctl has none: ", why,
      ". Run jitctl as the user the daemon runs as, or give the token's file with --admin-token-file FILE", where));
}

// The options that take a value, so that their values are not read as
// the verb.
bool TakesValue(const CLI::App& app, std::string_view arg) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_expected_min() == 0) continue;  // a flag
    for (const std::string& name : option->get_lnames()) {
      if (arg == jitd::text::Cat("--", name)) return true;
    }
    for (const std::string& name : option->get_snames()) {
      if (arg == jitd::text::Cat("-", name)) return true;
    }
  }
  return false;
}

// The verb a command line names: its first word that is not a global
// option or an option's value; empty when there is none.
std::string VerbOf(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return i + 1 < argc ? argv[i + 1] : "";
    if (arg.size() > 1 && arg[0] == '-') {
      if (arg.find('=') == std::string_view::npos && TakesValue(app, arg)) ++i;
      continue;
    }
    return std::string(arg);
  }
  return "";
}

// "; did you mean X?" or "".
std::string Suggest(std::string_view word, const std::vector<std::string>& known) {
  const std::vector<std::string> close = jitd::text::CloseMatches(word, known, 2);
  if (close.empty()) return "";
  return jitd::text::Cat("; did you mean ", jitd::text::Join(close, " or "), "?");
}

// Every long option of the app and of `sub`, as "--name".
std::vector<std::string> LongOptions(const CLI::App& app, const CLI::App* sub) {
  std::vector<std::string> names;
  for (const CLI::App* a : {&app, sub}) {
    if (a == nullptr) continue;
    for (const CLI::Option* option : a->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back(jitd::text::Cat("--", name));
    }
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("jitctl: talk to a running jitd daemon (cubins, cache administration)", "jitctl");
  std::string endpoint;
  std::string token_file;
  std::string timeout = "120s";
  std::string fallback_cache_dir;
  bool json = false;
  app.add_option("--endpoint", endpoint,
                 jitd::text::Cat("Daemon address, unix:PATH or HOST:PORT (default: $JITD_ENDPOINT, then ",
                                 jitd::DefaultEndpoint(), ")"))
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
  app.add_option("--timeout", timeout, "Deadline of each call: 30s, 15m, 2h (default: 120s)")->type_name("DURATION");
  app.set_version_flag("--version", jitd::text::Cat("jitctl ", JITD_VERSION, " (git ", JITD_GIT_REVISION,
                                                    "); speaks jitd.v1 (Compiler, CacheAdmin)"));
  app.require_subcommand(1);
  // Global options may follow the verb too (`jitctl stats --json`): the
  // verbs inherit this and hand what they do not know to the app.
  app.fallthrough();
  app.footer(
      "Exit status: 0 success, 1 the daemon answered an error or could not be reached, or a local step failed (get "
      "-o), 2 usage error.\n"
      "Run `jitctl VERB --help` for a verb's options.");

  std::vector<std::unique_ptr<jitd::jitctl::Verb>> verbs = jitd::jitctl::MakeVerbs();
  std::vector<std::pair<CLI::App*, jitd::jitctl::Verb*>> subcommands;
  for (const auto& verb : verbs) subcommands.emplace_back(verb->Register(app), verb.get());

  std::string completion_shell;
  app.add_option("--completion", completion_shell,
                 "Print the bash completion script and exit: source <(jitctl --completion bash)")
      ->type_name("SHELL");
  if (std::optional<int> done = jitd::CompletionIfAsked(app, argc, argv, "jitctl", std::cout, std::cerr)) {
    return *done;
  }

  std::vector<std::string> verb_names;
  for (const auto& [sub, verb] : subcommands) verb_names.push_back(sub->get_name());
  if (const std::string word = VerbOf(app, argc, argv);
      !word.empty() && std::find(verb_names.begin(), verb_names.end(), word) == verb_names.end()) {
    std::cerr << "jitctl: unknown verb '" << word << "'" << Suggest(word, verb_names)
              << " (verbs: " << jitd::text::Join(verb_names, ", ") << "; `jitctl --help` says what each does)\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& error) {
    // An option nobody knows: name the close ones.
    const CLI::App* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front();
    std::cerr << "jitctl: " << error.what();
    // CLI11 lists them after the colon: "... not expected: --jsn --x".
    const std::string what = error.what();
    std::vector<std::string> extras = absl::StrSplit(what.substr(what.find(':') + 1), ' ', absl::SkipEmpty());
    for (const std::string& extra : extras) {
      if (extra.rfind("--", 0) != 0) continue;
      const std::string flag = extra.substr(0, extra.find('='));
      std::cerr << "\njitctl: unknown option " << flag << Suggest(flag, LongOptions(app, sub));
    }
    std::cerr << "\nRun `jitctl " << (sub != nullptr ? jitd::text::Cat(sub->get_name(), " ") : std::string())
              << "--help` for the options.\n";
    return kExitUsage;
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
  json_errors = json;
  if (absl::Status valid = verb->Validate(); !valid.ok()) return Fail(name, valid, kExitUsage);

  jitd::ClientOptions options;
  options.endpoint = endpoint;
  options.fallback_cache_dir = fallback_cache_dir;
  options.open_fallback = jitd::OpenFallbackCache;
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
  if (!exit_code.ok()) {
    return Fail(name, token_file.empty() ? ExplainMissingToken(exit_code.status(), **client) : exit_code.status(),
                kExitFailure);
  }
  return *exit_code;
}
