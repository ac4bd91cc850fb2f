#include "config/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/toolkit_watch.h"
#include "config/config_file.h"
#include "config/settings.h"
#include "jitd/base/cli_completion.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "manifest/manifest.h"

namespace jitd::daemon {
namespace {

constexpr char kDescription[] =
    "jitd: JIT compilation daemon for CUDA kernels.\n"
    "Without a subcommand it serves: cubins to clients over gRPC, from its cache.\n"
    "Talk to it with `jitctl` (jitctl --help).";

// The serve flags as typed, one slot per row of Settings(); read into a
// ConfigLayer by the rows after parsing.
struct ServeFlags {
  struct Slot {
    std::string text;                // a single value
    std::vector<std::string> texts;  // kAddresses, kFiles: every value
    bool on = false;                 // kSwitch
  };
  std::string config_file;
  std::vector<Slot> slots = std::vector<Slot>(Settings().size());
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
  const std::vector<Setting>& settings = Settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& setting = settings[i];
    ServeFlags::Slot& slot = flags.slots[i];
    if (setting.kind == SettingKind::kSwitch) {
      app.add_flag(setting.flag, slot.on, setting.help);
      continue;
    }
    const bool repeats = setting.kind == SettingKind::kAddresses || setting.kind == SettingKind::kFiles;
    CLI::Option* option = repeats ? app.add_option(setting.flag, slot.texts, setting.help)
                                  : app.add_option(setting.flag, slot.text, setting.help);
    option->type_name(setting.value_name);
    if (setting.existing_file) option->check(ExistingFile());
  }
}

// Reads the flags that were given into a layer, each through its row; on
// an error prints "jitd: --flag: why".
std::optional<ConfigLayer> ToLayer(const CLI::App& app, const ServeFlags& flags) {
  ConfigLayer layer;
  const std::vector<Setting>& settings = Settings();
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& setting = settings[i];
    if (app.count(setting.flag) == 0) continue;
    const ServeFlags::Slot& slot = flags.slots[i];
    std::vector<std::string> texts;
    switch (setting.kind) {
      case SettingKind::kAddresses:
      case SettingKind::kFiles:
        texts = slot.texts;
        break;
      case SettingKind::kSwitch:
        texts = {setting.switch_value ? "true" : "false"};
        break;
      default:
        texts = {slot.text};
    }
    if (absl::Status read = setting.read(texts, std::filesystem::path(), layer); !read.ok()) {
      std::cerr << "jitd: " << setting.flag << ": " << read.message() << '\n';
      return std::nullopt;
    }
  }
  return layer;
}

struct OfflineFlags {
  std::vector<std::string> kernels;
  std::string cuda_include;
  std::string nvcc;
  std::string host_cxx;
  std::string tvm_ffi_root;
  std::string cache_dir;
  std::vector<std::string> archs;
  bool all = false;
  std::string manifest;
  std::vector<std::string> locks;
  uint32_t workers = 0;
  bool source_only = false;
  std::string format = "text";
  std::string write_lock;
  std::filesystem::path output;
  std::filesystem::path bundle_file;
  std::filesystem::path signing_key_file;
  std::string fleet_archs;
  bool fleet = false;
  std::string fleet_config;
};

// What lint and warm compile with: kernels, toolkit, archs, workers (lint
// calls them --jobs, as make and ninja do, and keeps --workers, hidden, for
// the scripts that used it).
void AddCompileOptions(CLI::App& sub, OfflineFlags& flags, const std::string& arch_help, bool jobs = false) {
  sub.add_option("--kernels", flags.kernels,
                 text::Cat("Kernel tree (sources and kernels.toml); NAME=DIR names it as the daemon serves it, "
                           "as its lock does (default: ",
                           DefaultKernelsDir().string(), ")"))
      ->type_name("[NAME=]DIR");
  sub.add_option("--cuda-include", flags.cuda_include,
                 text::Cat("CUDA toolkit headers NVRTC compiles with (default: ", compiler::kDefaultCudaInclude, ")"))
      ->type_name("DIR");
  sub.add_option("--arch", flags.archs, arch_help)->type_name("ARCH");
  sub.add_option("--nvcc", flags.nvcc, "nvcc for module kernels (default: bin/nvcc beside --cuda-include)")
      ->type_name("PATH");
  sub.add_option("--host-cxx", flags.host_cxx, "Host C++ compiler for module kernels (default: g++ on PATH)")
      ->type_name("PATH");
  sub.add_option("--tvm-ffi-root", flags.tvm_ffi_root,
                 "tvm_ffi package directory module kernels link against (default: found)")
      ->type_name("DIR");
  if (jobs) {
    sub.add_option("-j,--jobs", flags.workers, "Compiles at once (default: one per core)")->type_name("N");
    sub.add_option("--workers", flags.workers, "The same as --jobs")->group("");
    return;
  }
  sub.add_option("--workers", flags.workers, "Compile workers (default: one per core)")->type_name("N");
}

constexpr char kLintFooter[] =
    "Checks that every kernel file is in the tree's namespace (kernels.toml `namespace`, default sglang)\n"
    "and that every instantiation compiles and resolves for every arch; one finding per problem.\n"
    "Exit codes: 0 clean; 1 findings; 2 cannot run (bad flags, unreadable tree, no CUDA toolkit, a lock\n"
    "file that cannot be written).\n"
    "--format: text (people), json (one document), junit (JUnit XML for CI test reports), github\n"
    "(GitHub Actions annotations); json and junit write only the document on stdout, progress on stderr.\n"
    "Examples, in CI:\n"
    "  jitd lint --kernels kernels --arch sm_90 --format github\n"
    "  jitd lint --kernels kernels --arch sm_90 --arch sm_100a --format junit > lint.xml\n"
    "  jitd lint --kernels kernels --arch sm_90 --write-lock kernels.lock   (then: jitd --lock kernels.lock)";

void AddLintSubcommand(CLI::App& app, OfflineFlags& flags) {
  CLI::App* lint =
      app.add_subcommand("lint", "Check kernel sources against the namespace guard, locally (no daemon needed)");
  AddCompileOptions(*lint, flags, "Arch to check for (repeatable; default sm_90)", true);
  lint->add_flag("--source-only", flags.source_only, "Only the textual check, no compiles (milliseconds)");
  lint->add_option("--format", flags.format, "How findings are written: text, json, junit or github (default: text)")
      ->check(CLI::IsMember({"text", "json", "junit", "github"}).description(""))
      ->type_name("FORMAT");
  lint->add_option("--write-lock", flags.write_lock,
                   "After a clean lint, write every instantiation x arch and its content key to FILE (a lock "
                   "`jitd --lock FILE` serves exactly); nothing is written when there are findings")
      ->type_name("FILE");
  lint->footer(kLintFooter);
}

constexpr char kFleetHelp[] =
    "The fleet set, as the daemon's --fleet-archs: each arch and the PTX of the lowest, what fleet requests ask for";

// --fleet, --fleet-archs and --config: what fleet requests will ask for.
void AddFleetOptions(CLI::App& sub, OfflineFlags& flags) {
  sub.add_flag("--fleet", flags.fleet,
               "For the fleet set too: --fleet-archs, else the fleet_archs of --config FILE (the daemon's config)");
  sub.add_option("--fleet-archs", flags.fleet_archs, kFleetHelp)->type_name("LIST");
  sub.add_option("--config", flags.fleet_config,
                 "The daemon's config file: its kernel trees, locks, toolkit, module tools, arch and (with --fleet) "
                 "fleet_archs, where no flag here gives them, so that what is warmed is what it serves")
      ->check(ExistingFile())
      ->type_name("FILE");
}

// The fleet set --fleet asks for; empty without --fleet or --fleet-archs.
absl::StatusOr<std::vector<std::string>> OfflineFleet(const OfflineFlags& flags) {
  if (!flags.fleet_archs.empty()) return ParseFleetArchs(flags.fleet_archs);
  if (!flags.fleet) return std::vector<std::string>{};
  if (flags.fleet_config.empty()) {
    return absl::InvalidArgumentError(
        "--fleet needs the fleet set: --fleet-archs LIST, or --config FILE (the daemon's, with fleet_archs)");
  }
  JITD_ASSIGN_OR_RETURN(ConfigLayer layer, ReadConfigFile(flags.fleet_config));
  if (!layer.fleet_archs.has_value() || layer.fleet_archs->empty()) {
    return absl::InvalidArgumentError(text::Cat(flags.fleet_config, " sets no fleet_archs"));
  }
  return *layer.fleet_archs;
}

void AddOfflineSubcommands(CLI::App& app, OfflineFlags& flags) {
  AddLintSubcommand(app, flags);

  CLI::App* warm = app.add_subcommand("warm", "Fill a cache directory without serving (image builds; no GPU needed)");
  warm->add_option("--cache-dir", flags.cache_dir, "Cache directory to fill")->required()->type_name("DIR");
  warm->add_flag("--all", flags.all, "Every instantiation of the manifest (or --manifest, --lock)");
  warm->add_option("--manifest", flags.manifest, "TOML file of [[spec]] tables to warm (or --all, --lock)")
      ->check(ExistingFile())
      ->type_name("FILE");
  warm->add_option("--lock", flags.locks,
                   "Exactly the instantiations of a lock `jitd lint --write-lock` wrote, each checked against its "
                   "key (repeatable, one per tree; or --all, --manifest)")
      ->check(ExistingFile())
      ->type_name("FILE");
  AddCompileOptions(*warm, flags, "Arch to warm for (repeatable; default sm_90)");
  AddFleetOptions(*warm, flags);
  warm->footer(
      "Safe while a daemon uses the same cache directory. Examples:\n"
      "  jitd warm --cache-dir /var/cache/jitd --all --arch sm_90 --arch sm_100a\n"
      "  jitd warm --cache-dir /var/cache/jitd --lock kernels.lock   (what jitd --lock kernels.lock serves)");

  CLI::App* bundle = app.add_subcommand("bundle", "Sealed seed bundles: one read-only file of verified entries");
  bundle->require_subcommand(1);
  const std::string key_help =
      "The fleet's key (the daemon's --remote-signing-key-file): sign with it (default: a SHA-256 digest seal)";
  CLI::App* create = bundle->add_subcommand(
      "create", "Write a bundle: the entries of a cache directory, or instantiations compiled now");
  create->add_option("--cache-dir", flags.cache_dir, "Cache directory to bundle, as jitd warm filled it (or --all)")
      ->type_name("DIR");
  create->add_flag("--all", flags.all, "Compile every instantiation of the manifest, then bundle them");
  create->add_option("--manifest", flags.manifest, "Compile the [[spec]] tables of FILE, then bundle them")
      ->check(ExistingFile())
      ->type_name("FILE");
  AddCompileOptions(*create, flags, "With --all or --manifest: arch to compile for (repeatable; default sm_90)");
  AddFleetOptions(*create, flags);
  create->add_option("-o,--output", flags.output, "Bundle file to write (replaced whole, read-only)")
      ->required()
      ->type_name("FILE");
  create->add_option("--signing-key-file", flags.signing_key_file, key_help)->check(ExistingFile())->type_name("FILE");
  create->footer(
      "Examples, for an image:\n"
      "  jitd bundle create --all --arch sm_90 --arch sm_100a -o seed.jitdbundle\n"
      "  jitd bundle create --cache-dir /var/cache/jitd -o seed.jitdbundle --signing-key-file fleet.key");
  CLI::App* verify = bundle->add_subcommand("verify", "Check a bundle: every entry, then its seal or signature");
  verify->add_option("bundle", flags.bundle_file, "Bundle file")->required()->type_name("FILE");
  verify->add_option("--signing-key-file", flags.signing_key_file, "The fleet's key, for a signed bundle")
      ->check(ExistingFile())
      ->type_name("FILE");
  verify->footer(
      "Exit 0 when it verifies; 1 with the first bad entry or a seal that does not match; 2 when unreadable.");
}

// The trees, locks, toolkit and archs of an offline command: its flags,
// then what --config FILE (the daemon's) gives where no flag did.
absl::Status TakeTrees(const OfflineFlags& flags, OfflineOptions& o) {
  ConfigLayer config;
  if (!flags.fleet_config.empty()) {
    JITD_ASSIGN_OR_RETURN(config, ReadConfigFile(flags.fleet_config));
  }
  if (!flags.kernels.empty()) {
    // [NAME=]DIR, as the daemon's --kernels: a lock names its tree, so lint
    // and warm a tree under the name it is served by.
    JITD_ASSIGN_OR_RETURN(o.trees, ParseKernelTreeFlags(flags.kernels));
  } else if (config.kernels.has_value() && !config.kernels->empty()) {
    o.trees = *config.kernels;
  } else {
    o.trees = {manifest::TreeSource{"", DefaultKernelsDir()}};
  }
  o.kernels_name = o.trees.front().name;
  o.kernels_dir = o.trees.front().dir;
  for (const std::string& lock : flags.locks) o.locks.push_back(std::filesystem::absolute(lock));
  if (o.locks.empty() && config.locks.has_value()) o.locks = *config.locks;
  const auto take = [](const std::string& flag, const std::optional<std::filesystem::path>& from_config,
                       std::filesystem::path& out) {
    if (!flag.empty()) {
      out = std::filesystem::absolute(flag);
    } else if (from_config.has_value()) {
      out = *from_config;
    }
  };
  take(flags.cuda_include, config.cuda_include, o.cuda_include);
  take(flags.nvcc, config.nvcc, o.module_tools.nvcc);
  take(flags.host_cxx, config.host_cxx, o.module_tools.host_cxx);
  take(flags.tvm_ffi_root, config.tvm_ffi_root, o.module_tools.tvm_ffi_root);
  o.archs = flags.archs;
  if (o.archs.empty() && config.arch.has_value() && !config.arch->empty()) o.archs = {*config.arch};
  return absl::OkStatus();
}

// What an offline command was given, copied into `command_line` and
// checked: 0, or kExitUsage after a usage error (printed).
int TakeOfflineOptions(const OfflineFlags& flags, CommandLine* command_line) {
  OfflineOptions& o = command_line->offline;
  if (absl::Status taken = TakeTrees(flags, o); !taken.ok()) {
    std::cerr << "jitd: " << taken.message() << "\n";
    return kExitUsage;
  }
  if (command_line->command == CommandLine::Command::kLint && o.trees.size() > 1) {
    std::cerr << "jitd lint: one tree at a time (--kernels [NAME=]DIR once); run it for each tree\n";
    return kExitUsage;
  }
  o.cache_dir = flags.cache_dir;
  o.all = flags.all || !flags.locks.empty();  // warm --lock FILE: exactly the lock's instantiations
  o.manifest = flags.manifest;
  o.workers = flags.workers;
  o.source_only = flags.source_only;
  const std::map<std::string, LintFormat> formats = {{"text", LintFormat::kText},
                                                     {"json", LintFormat::kJson},
                                                     {"junit", LintFormat::kJunit},
                                                     {"github", LintFormat::kGithub}};
  o.format = formats.at(flags.format);  // CLI11 let only these through
  o.write_lock = flags.write_lock;
  o.output = flags.output;
  o.bundle_file = flags.bundle_file;
  o.signing_key_file = flags.signing_key_file;
  for (const auto& arch : o.archs) {
    if (absl::StatusOr<manifest::ArchName> s = manifest::ParseArchName(arch); !s.ok()) {
      std::cerr << "jitd: --arch " << arch << ": " << s.status().message() << "\n";
      return kExitUsage;
    }
  }
  absl::StatusOr<std::vector<std::string>> fleet = OfflineFleet(flags);
  if (!fleet.ok()) {
    std::cerr << "jitd: --fleet: " << fleet.status().message() << "\n";
    return kExitUsage;
  }
  for (const std::string& arch : manifest::FleetTargets(*fleet)) {
    if (std::find(o.archs.begin(), o.archs.end(), arch) == o.archs.end()) o.archs.push_back(arch);
  }
  if (command_line->command == CommandLine::Command::kWarm) {
    // Locks from --config only narrow what --all or --manifest warms.
    const int sources = (flags.all ? 1 : 0) + (o.manifest.empty() ? 0 : 1) + (flags.locks.empty() ? 0 : 1);
    if (sources == 0) {
      std::cerr << "jitd warm: say what to warm: --all (every instantiation), --manifest FILE or --lock FILE\n";
      return kExitUsage;
    }
    if (sources > 1) {
      std::cerr << "jitd warm: --all, --manifest and --lock exclude each other: give one\n";
      return kExitUsage;
    }
  }
  if (command_line->command == CommandLine::Command::kLint && o.source_only && !o.write_lock.empty()) {
    std::cerr << "jitd lint: --write-lock needs the compiles (the keys are of what compiled): drop --source-only\n";
    return kExitUsage;
  }
  if (command_line->command == CommandLine::Command::kBundleCreate) {
    const int sources = (o.cache_dir.empty() ? 0 : 1) + (o.all ? 1 : 0) + (o.manifest.empty() ? 0 : 1);
    if (sources != 1) {
      std::cerr << "jitd bundle create: say where the entries come from, once: --cache-dir DIR (a warmed "
                   "cache), --all or --manifest FILE (compiled now)\n";
      return kExitUsage;
    }
  }
  return 0;
}

// The deepest subcommand the parse reached, or `app`.
const CLI::App* Chosen(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return at;
}

// A usage error said with what was probably meant: an unknown option gets
// the close long options of the command it was given to (and its parents),
// a word that is not a verb the close verbs. Returns kExitUsage.
int UsageError(const CLI::App& app, const CLI::ParseError& error) {
  std::cerr << "jitd: " << error.what() << "\n";
  const CLI::App* chosen = Chosen(app);
  std::vector<std::string> options;
  // The serve flags live on the top level: they are the offline commands'
  // only when the command is serving.
  for (const CLI::App* at = chosen; at != nullptr; at = chosen == &app ? nullptr : at->get_parent()) {
    if (at == &app && chosen != &app && chosen->get_name() != "serve") break;
    for (const CLI::Option* option : at->get_options()) {
      for (const std::string& name : option->get_lnames()) options.push_back("--" + name);
    }
  }
  std::vector<std::string> verbs;
  for (const CLI::App* sub : chosen->get_subcommands({})) verbs.push_back(sub->get_name());
  const std::string what = error.what();
  const size_t colon = what.find(": ");
  std::vector<std::string> extras;
  for (std::string_view rest = colon == std::string::npos ? "" : std::string_view(what).substr(colon + 2);
       !rest.empty();) {
    const size_t space = rest.find(' ');
    extras.emplace_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? "" : rest.substr(space + 1);
  }
  for (const std::string& extra : extras) {
    const bool option = extra.rfind("--", 0) == 0;
    const std::string word = option ? extra.substr(0, extra.find('=')) : extra;
    const std::vector<std::string> close = text::CloseMatches(word, option ? options : verbs, 2);
    if (close.empty()) continue;
    std::cerr << "jitd: " << (option ? "unknown option " : "unknown command ") << word << "; did you mean "
              << text::Join(close, " or ") << "?\n";
  }
  std::cerr << "Run `jitd" << (chosen == &app ? std::string() : " " + chosen->get_name()) << " --help` for "
            << (verbs.empty() ? "the options" : "the commands and options") << ".\n";
  return kExitUsage;
}

}  // namespace

std::variant<CommandLine, int> ParseCommandLine(int argc, char** argv, const std::string& version) {
  CLI::App app(kDescription, "jitd");
  app.set_version_flag("--version", version.empty() ? std::string(JITD_VERSION) : version);
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

  std::string completion_shell;
  app.add_option("--completion", completion_shell,
                 "Print the bash completion script and exit: source <(jitd --completion bash)")
      ->type_name("SHELL");
  if (std::optional<int> done = CompletionIfAsked(app, argc, argv, "jitd", std::cout, std::cerr)) return *done;
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
  } catch (const CLI::ExtrasError& error) {
    return UsageError(app, error);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kExitUsage;
  }

  CommandLine command_line;
  if (app.got_subcommand("lint")) command_line.command = CommandLine::Command::kLint;
  if (app.got_subcommand("warm")) command_line.command = CommandLine::Command::kWarm;
  if (CLI::App* bundle = app.get_subcommand("bundle"); bundle->parsed()) {
    command_line.command =
        bundle->got_subcommand("create") ? CommandLine::Command::kBundleCreate : CommandLine::Command::kBundleVerify;
  }
  if (app.count("--config") > 0) command_line.config_file = serve_flags.config_file;
  if (command_line.command != CommandLine::Command::kServe) {
    if (const int refused = TakeOfflineOptions(offline_flags, &command_line); refused != 0) return refused;
  }
  std::optional<ConfigLayer> layer = ToLayer(app, serve_flags);
  if (!layer.has_value()) return kExitUsage;
  command_line.flags = *std::move(layer);
  return command_line;
}

}  // namespace jitd::daemon
