// Bash completion for a CLI11 command line, generated from the app itself
// (its subcommands and long options), so that it never lags behind the
// flags: `source <(jitd --completion bash)`, `source <(jitctl --completion
// bash)`. Header-only and a template on the app type, so that jitd_base
// stays free of CLI11; jitd and jitctl instantiate it with CLI::App.
//
// What it completes: at each level, the subcommand names and the long
// options of that command (a subcommand that falls through to its parent,
// as `jitd serve` and jitctl's verbs do, also its parent's); after an
// option that takes a value, file names.
#pragma once

#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace jitd {

namespace cli_completion_detail {

// A bash function-name-safe form of `program` ("jitctl" -> "jitctl").
inline std::string Ident(std::string_view program) {
  std::string out;
  for (char c : program)
    out.push_back((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_');
  return out;
}

template <class App>
void Walk(const App& app, const std::string& path, std::string& words_case, std::string& subs_case,
          std::set<std::string>& valued) {
  std::vector<std::string> words;
  std::vector<std::string> subs;
  for (const App* sub : app.get_subcommands({})) {
    if (sub->get_name().empty() || sub->get_group().empty()) continue;  // hidden
    subs.push_back(sub->get_name());
    words.push_back(sub->get_name());
  }
  for (const App* at = &app; at != nullptr; at = at->get_fallthrough() ? at->get_parent() : nullptr) {
    for (const auto* option : at->get_options()) {
      if (option->get_group().empty()) continue;  // hidden
      for (const std::string& name : option->get_lnames()) {
        words.push_back("--" + name);
        if (option->get_expected_min() > 0) valued.insert("--" + name);
      }
    }
  }
  std::string w, s;
  std::set<std::string> seen;
  for (const std::string& word : words) {
    if (seen.insert(word).second) w += (w.empty() ? "" : " ") + word;
  }
  for (const std::string& sub : subs) s += (s.empty() ? "" : " ") + sub;
  words_case += "    \"" + path + "\") echo \"" + w + "\" ;;\n";
  subs_case += "    \"" + path + "\") echo \"" + s + "\" ;;\n";
  for (const App* sub : app.get_subcommands({})) {
    if (sub->get_name().empty() || sub->get_group().empty()) continue;
    Walk(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), words_case, subs_case, valued);
  }
}

}  // namespace cli_completion_detail

template <class App>
std::string BashCompletion(const App& app, std::string_view program) {
  const std::string id = cli_completion_detail::Ident(program);
  std::string words_case, subs_case;
  std::set<std::string> valued;
  cli_completion_detail::Walk(app, "", words_case, subs_case, valued);
  std::string values;
  for (const std::string& v : valued) values += " " + v;
  std::string out;
  out += "# bash completion for " + std::string(program) + ", made by `" + std::string(program) +
         " --completion bash` from its own flags.\n";
  out += "# Load it with: source <(" + std::string(program) + " --completion bash)\n";
  out += "_" + id + "_words() {\n  case \"$1\" in\n" + words_case + "  esac\n}\n";
  out += "_" + id + "_subs() {\n  case \"$1\" in\n" + subs_case + "  esac\n}\n";
  out += "_" + id + "_valued=\"" + values + " \"\n";
  out += "_" + id + "() {\n";
  out += "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path=\"\" word i\n";
  out += "  if [[ \"$_" + id + "_valued\" == *\" $prev \"* ]]; then\n";
  out += "    COMPREPLY=($(compgen -f -- \"$cur\"))\n    return\n  fi\n";
  out += "  for ((i = 1; i < COMP_CWORD; i++)); do\n    word=${COMP_WORDS[i]}\n";
  out += "    if [[ \" $(_" + id + "_subs \"$path\") \" == *\" $word \"* ]]; then path=${path:+$path }$word; fi\n";
  out += "  done\n";
  out += "  COMPREPLY=($(compgen -W \"$(_" + id + "_words \"$path\")\" -- \"$cur\"))\n}\n";
  out += "complete -F _" + id + " " + std::string(program) + "\n";
  return out;
}

// `--completion SHELL` anywhere on the command line: the script on `out`
// and exit status 0 (bash), or a usage error on `err` and 2; nullopt when
// it is not asked for. Checked before the command line is parsed, so that
// it works whatever else is there.
template <class App>
std::optional<int> CompletionIfAsked(const App& app, int argc, char** argv, std::string_view program, std::ostream& out,
                                     std::ostream& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string_view shell;
    if (arg == "--completion") {
      shell = i + 1 < argc ? std::string_view(argv[i + 1]) : std::string_view();
    } else if (arg.substr(0, 13) == "--completion=") {
      shell = arg.substr(13);
    } else {
      continue;
    }
    if (shell != "bash") {
      err << program << ": --completion: '" << shell << "' is not a shell this prints a script for (bash)\n";
      return 2;
    }
    out << BashCompletion(app, program);
    return 0;
  }
  return std::nullopt;
}

}  // namespace jitd
