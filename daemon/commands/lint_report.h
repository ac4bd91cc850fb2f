// What `jitd lint` found, collected once and written in the format CI wants:
// text (a person reading a terminal or a log), JSON (scripts), JUnit XML
// (test-report tabs of CI systems) or GitHub Actions workflow commands
// (annotations on the pull request's diff). Pure functions of the report, so
// every format is unit-tested without compiling anything.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "guard/namespace_guard.h"

namespace jitd::daemon {

struct LintReport {
  enum class Check { kSource, kCompile };
  struct Finding {
    Check check = Check::kSource;
    guard::Finding finding;
  };
  // One instantiation x arch of the compile-all half.
  struct Instantiation {
    std::string kernel;
    std::string params;  // canonical "k=v,k=v"
    std::string arch;
    bool ok = false;
    // Not compiled: its kernel has source findings, which a compile would
    // only repeat.
    bool skipped = false;
  };

  std::string kernels_dir;  // as given on the command line (or the default)
  std::string kernel_namespace;
  std::string namespace_note;  // manifest::UndeclaredNamespaceNote: "" when kernels.toml declares it
  std::vector<std::string> archs;
  // Every file the namespace guard read (guard::ScannedFiles), relative to
  // kernels_dir.
  std::vector<std::string> source_files;
  bool compiled = false;      // the compile-all half ran (not --source-only)
  std::string nvrtc_version;  // when compiled
  bool modules = false;       // the tree has module kernels, which nvcc builds
  double compile_s = 0;
  size_t parallelism = 0;
  std::vector<Finding> findings;  // the source findings, then the compile ones
  std::vector<Instantiation> instantiations;
  std::set<std::string> skipped_kernels;

  size_t CountFindings(Check check) const;
  size_t CountInstantiations(bool ok, bool skipped) const;
  // The compile findings of one instantiation (its kernel's, for its arch and
  // params; a "cannot resolve" finding, which names no params, counts for
  // every instantiation of its kernel and arch).
  std::vector<const guard::Finding*> FindingsOf(const Instantiation& instantiation) const;
  bool ok() const { return findings.empty(); }
};

// `jitd lint`'s text, as it always was, in two halves so that a person sees
// the source findings before minutes of compiles: the source findings and
// their summary line, then the compile findings and theirs.
std::string LintTextSources(const LintReport& report);
std::string LintTextCompile(const LintReport& report);
// One JSON document (UTF-8; invalid bytes become U+FFFD).
std::string LintJson(const LintReport& report);
// JUnit XML: a "namespace guard" suite of one test per source file and a
// "compile-all" suite of one test per instantiation x arch.
std::string LintJunit(const LintReport& report);
// GitHub Actions workflow commands: one ::error per finding, then a summary
// (SafeText): no other line, and nothing in a finding can start one.
std::string LintGithub(const LintReport& report);

// Text for a person (a terminal, a CI log), one line or several: each
// control character (C0 but the newline, DEL, C1; a tab becomes a space) is
// written as \xNN, so ESC cannot drive a terminal; invalid UTF-8 becomes
// U+FFFD; and a line that would start, after blanks, with "::" or "##[" (a
// workflow command to a GitHub Actions runner, which reads every line of a
// step's output) has its first character written as \x3a or \x23. Every
// human-readable line `jitd lint` writes goes through it: the text format,
// the github format's summary, the progress lines on stderr.
std::string SafeText(std::string_view s);
// SafeText of one line: a newline too is written as \x0a.
std::string SafeLine(std::string_view s);

// Exposed for tests: the escapers the writers use.
std::string JsonString(std::string_view s);  // with the quotes
std::string XmlEscape(std::string_view s);   // text and attribute values
// A workflow command's message, by the runner's rules: '%', CR and LF as
// %25, %0D, %0A (so a message is one line, and no text in it can start a
// command); other control characters as \xNN. A "::" inside a message is
// text: the runner reads a command only at the start of a line.
std::string GithubData(std::string_view s);
// A property value: GithubData, and ':' and ',' as %3A and %2C.
std::string GithubProperty(std::string_view s);

}  // namespace jitd::daemon
