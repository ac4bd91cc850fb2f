#include "commands/lint_report.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "jitd/base/text.h"

namespace jitd::daemon {
namespace {

using text::Cat;

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Calls `fn` with each code point of `s` and its bytes; an invalid UTF-8
// sequence (NVRTC logs quote source bytes as they are) is one U+FFFD, so
// that every format's output is valid UTF-8 whatever the sources held.
void ForEachCodePoint(std::string_view s, const std::function<void(uint32_t, std::string_view)>& fn) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    bool valid = n > 0 && i + n <= s.size();
    for (size_t k = 1; valid && k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      valid = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    valid = valid && cp >= kMin[n] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!valid) {
      fn(0xFFFD, kReplacement);
      ++i;  // resynchronise on the next byte
      continue;
    }
    fn(cp, s.substr(i, n));
    i += n;
  }
}

std::string Hex4(uint32_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", static_cast<unsigned>(v));
  return buf;
}

std::string Hex2(uint32_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(v & 0xff));
  return buf;
}

// C0 controls, DEL and C1 controls: what can move a terminal's cursor,
// change its colours or title, or (ESC, CSI) start any of that.
bool IsControl(uint32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

const char* CheckName(LintReport::Check check) { return check == LintReport::Check::kSource ? "source" : "compile"; }

// The finding's message without its place: "[kernel] what".
std::string Message(const guard::Finding& f) { return Cat(f.kernel.empty() ? "" : Cat("[", f.kernel, "] "), f.what); }

std::string FirstLine(std::string_view s) { return std::string(s.substr(0, s.find('\n'))); }

std::string JsonStrings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += Cat(i ? ", " : "", JsonString(v[i]));
  return out + "]";
}

std::string JsonCounts(const LintReport& r) {
  return Cat("{\"source_files\": ", r.source_files.size(), ", \"findings\": ", r.findings.size(),
             ", \"source_findings\": ", r.CountFindings(LintReport::Check::kSource),
             ", \"compile_findings\": ", r.CountFindings(LintReport::Check::kCompile),
             ", \"instantiations\": ", r.instantiations.size(),
             ", \"compiled_ok\": ", r.CountInstantiations(true, false),
             ", \"failed\": ", r.CountInstantiations(false, false),
             ", \"skipped\": ", r.CountInstantiations(false, true), "}");
}

std::string Attr(std::string_view name, std::string_view value) {
  return Cat(" ", name, "=\"", XmlEscape(value), "\"");
}

struct Suite {
  std::string xml;
  size_t tests = 0, failures = 0, skipped = 0;
};

std::string SuiteHead(std::string_view name, const Suite& s) {
  return Cat("  <testsuite", Attr("name", name), Attr("tests", std::to_string(s.tests)),
             Attr("failures", std::to_string(s.failures)), Attr("errors", "0"),
             Attr("skipped", std::to_string(s.skipped)));
}

// The "namespace guard" suite: one test per source file (and per other
// file a finding names, kernels.toml for a name expression).
Suite JunitSources(const LintReport& r) {
  std::map<std::string, std::vector<const guard::Finding*>> by_file;
  for (const std::string& file : r.source_files) by_file[file];
  for (const auto& f : r.findings) {
    if (f.check == LintReport::Check::kSource) by_file[f.finding.file].push_back(&f.finding);
  }
  Suite suite;
  suite.tests = by_file.size();
  std::string cases;
  for (const auto& [file, findings] : by_file) {
    suite.failures += !findings.empty();
    cases += Cat("    <testcase", Attr("classname", "namespace guard"), Attr("name", file),
                 Attr("file", (std::filesystem::path(r.kernels_dir) / file).lexically_normal().generic_string()));
    if (findings.empty()) {
      cases += "/>\n";
      continue;
    }
    cases += ">\n";
    for (const guard::Finding* f : findings) {
      cases += Cat("      <failure", Attr("message", Message(*f)), Attr("type", "source"), ">",
                   XmlEscape(f->ToString()), "</failure>\n");
    }
    cases += "    </testcase>\n";
  }
  suite.xml = Cat(SuiteHead("namespace guard", suite), ">\n", cases, "  </testsuite>\n");
  return suite;
}

// The "compile-all" suite: one test per instantiation x arch.
Suite JunitCompiles(const LintReport& r) {
  Suite suite;
  suite.tests = r.instantiations.size();
  std::string cases;
  for (const auto& inst : r.instantiations) {
    cases += Cat("    <testcase", Attr("classname", Cat("compile-all.", inst.arch)),
                 Attr("name", text::Instantiation(inst.kernel, inst.params, inst.arch)));
    if (inst.skipped) {
      ++suite.skipped;
      cases += Cat(">\n      <skipped", Attr("message", "not compiled: its kernel has namespace guard findings"),
                   "/>\n    </testcase>\n");
    } else if (!inst.ok) {
      ++suite.failures;
      std::string body;
      for (const guard::Finding* f : r.FindingsOf(inst)) body += Cat(body.empty() ? "" : "\n", f->ToString());
      if (body.empty()) body = "failed";
      cases += Cat(">\n      <failure", Attr("message", FirstLine(body)), Attr("type", "compile"), ">", XmlEscape(body),
                   "</failure>\n    </testcase>\n");
    } else {
      cases += "/>\n";
    }
  }
  char time[32];
  std::snprintf(time, sizeof time, "%.3f", r.compile_s);
  suite.xml = Cat(SuiteHead("compile-all", suite), Attr("time", time), ">\n", cases, "  </testsuite>\n");
  return suite;
}

// SafeText and SafeLine: `lines` keeps newlines (each line defused).
std::string Safe(std::string_view s, bool lines) {
  std::string out;
  bool line_start = true;  // no character but blanks yet on this line
  ForEachCodePoint(s, [&](uint32_t cp, std::string_view bytes) {
    if (cp == '\n' && lines) {
      out += '\n';
      line_start = true;
      return;
    }
    if (cp == '\t') {
      out += ' ';
      return;
    }
    if (IsControl(cp)) {
      out += Cat("\\x", Hex2(cp));
      line_start = false;
      return;
    }
    if (line_start && (cp == ':' || cp == '#')) {
      // "::" or "##[" first on a line (a runner trims the blanks before
      // it) is a workflow command: its first character goes out escaped.
      const std::string_view rest = s.substr(static_cast<size_t>(bytes.data() - s.data()));
      if (rest.starts_with("::") || rest.starts_with("##[")) {
        out += Cat("\\x", Hex2(cp));
        line_start = false;
        return;
      }
    }
    if (cp != ' ') line_start = false;
    out += bytes;
  });
  return out;
}

// A finding as the text format writes it (Finding::ToString, made safe):
// its place on one line, its message on as many as it has (NVRTC's log).
std::string TextOf(const guard::Finding& f) {
  return SafeLine(
             Cat(f.file, f.line > 0 ? Cat(":", f.line) : "", ": ", f.kernel.empty() ? "" : Cat("[", f.kernel, "] "))) +
         SafeText(f.what);
}

}  // namespace

size_t LintReport::CountFindings(Check check) const {
  size_t n = 0;
  for (const auto& f : findings) n += f.check == check;
  return n;
}

size_t LintReport::CountInstantiations(bool ok_wanted, bool skipped_wanted) const {
  size_t n = 0;
  for (const auto& i : instantiations) n += i.skipped == skipped_wanted && (skipped_wanted || i.ok == ok_wanted);
  return n;
}

std::vector<const guard::Finding*> LintReport::FindingsOf(const Instantiation& inst) const {
  // CompileAll starts each finding's text with "ARCH[ PARAMS]: " (see
  // compile_all.cpp); an unresolved one names no params.
  const std::string where = Cat(inst.arch, inst.params.empty() ? "" : Cat(" ", inst.params), ": ");
  const std::string unresolved = Cat(inst.arch, ": cannot resolve: ");
  std::vector<const guard::Finding*> out;
  for (const auto& f : findings) {
    if (f.check != Check::kCompile || f.finding.kernel != inst.kernel) continue;
    if (f.finding.what.starts_with(where) || f.finding.what.starts_with(unresolved)) out.push_back(&f.finding);
  }
  return out;
}

std::string LintTextSources(const LintReport& r) {
  std::string out;
  for (const auto& f : r.findings) {
    if (f.check == LintReport::Check::kSource) out += Cat(TextOf(f.finding), "\n");
  }
  const size_t findings = r.CountFindings(LintReport::Check::kSource);
  return out +
         SafeLine(Cat("jitd lint: ", r.source_files.size(), " source files in ", r.kernels_dir, ": ", findings,
                      " findings", findings > 0 && !r.namespace_note.empty() ? Cat(" (", r.namespace_note, ")") : "")) +
         "\n";
}

std::string LintTextCompile(const LintReport& r) {
  std::string out;
  for (const auto& f : r.findings) {
    if (f.check == LintReport::Check::kCompile) out += Cat(TextOf(f.finding), "\n");
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", r.compile_s);
  const size_t compiled = r.instantiations.size() - r.CountInstantiations(false, true);
  return out + Cat("jitd lint: ", compiled, " instantiations compiled for ", r.archs.size(), " arch(s) with NVRTC ",
                   SafeLine(r.nvrtc_version), r.modules ? " and nvcc" : "", " in ", seconds,
                   " s: ", r.CountFindings(LintReport::Check::kCompile), " compile findings",
                   r.skipped_kernels.empty()
                       ? ""
                       : Cat("; ", r.skipped_kernels.size(), r.skipped_kernels.size() == 1 ? " kernel" : " kernels",
                             " not compiled because of the source findings above (fix those, then lint again)"),
                   "\n");
}

std::string LintJson(const LintReport& r) {
  std::string out = Cat("{\n  \"tool\": \"jitd lint\",\n  \"tree_dir\": ", JsonString(r.kernels_dir),
                        ",\n  \"namespace\": ", JsonString(r.kernel_namespace),
                        ",\n  \"nvrtc_version\": ", r.compiled ? JsonString(r.nvrtc_version) : "null",
                        ",\n  \"archs\": ", JsonStrings(r.archs), ",\n  \"compiled\": ", r.compiled ? "true" : "false",
                        ",\n  \"counts\": ", JsonCounts(r), ",\n  \"findings\": [");
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const guard::Finding& f = r.findings[i].finding;
    out +=
        Cat(i ? "," : "", "\n    {\"check\": \"", CheckName(r.findings[i].check), "\", \"file\": ", JsonString(f.file),
            ", \"line\": ", f.line, ", \"kernel\": ", JsonString(f.kernel), ", \"message\": ", JsonString(f.what), "}");
  }
  out += Cat(r.findings.empty() ? "" : "\n  ",
             "],\n  \"skipped_kernels\": ", JsonStrings({r.skipped_kernels.begin(), r.skipped_kernels.end()}),
             ",\n  \"instantiations\": [");
  for (size_t i = 0; i < r.instantiations.size(); ++i) {
    const LintReport::Instantiation& inst = r.instantiations[i];
    out += Cat(i ? "," : "", "\n    {\"kernel\": ", JsonString(inst.kernel), ", \"params\": ", JsonString(inst.params),
               ", \"arch\": ", JsonString(inst.arch), ", \"ok\": ", inst.ok ? "true" : "false",
               ", \"skipped\": ", inst.skipped ? "true" : "false", "}");
  }
  return out + Cat(r.instantiations.empty() ? "" : "\n  ", "],\n  \"ok\": ", r.ok() ? "true" : "false", "\n}\n");
}

std::string LintJunit(const LintReport& r) {
  const Suite sources = JunitSources(r);
  const Suite compiles = JunitCompiles(r);
  Suite all;
  all.tests = sources.tests + compiles.tests;
  all.failures = sources.failures + compiles.failures;
  all.skipped = sources.skipped + compiles.skipped;
  return Cat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", Attr("name", "jitd lint"),
             Attr("tests", std::to_string(all.tests)), Attr("failures", std::to_string(all.failures)),
             Attr("errors", "0"), Attr("skipped", std::to_string(all.skipped)), ">\n", sources.xml, compiles.xml,
             "</testsuites>\n");
}

std::string LintGithub(const LintReport& r) {
  std::string out;
  for (const auto& lf : r.findings) {
    const guard::Finding& f = lf.finding;
    const std::string path = (std::filesystem::path(r.kernels_dir) / f.file).lexically_normal().generic_string();
    out += Cat("::error file=", GithubProperty(path), f.line > 0 ? Cat(",line=", f.line) : "",
               ",title=", GithubProperty("jitd lint"), "::", GithubData(Message(f)), "\n");
  }
  return out +
         SafeLine(Cat("jitd lint: ", r.findings.size(), " findings (", r.CountFindings(LintReport::Check::kSource),
                      " namespace guard, ", r.CountFindings(LintReport::Check::kCompile), " compile-all) in ",
                      r.kernels_dir, r.compiled ? Cat(", ", r.instantiations.size(), " instantiations") : "")) +
         "\n";
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  ForEachCodePoint(s, [&](uint32_t cp, std::string_view bytes) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (cp < 0x20) {
          out += Cat("\\u", Hex4(cp));
        } else {
          out += bytes;
        }
    }
  });
  return out + "\"";
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  ForEachCodePoint(s, [&](uint32_t cp, std::string_view bytes) {
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      // As character references, so that attribute values keep them.
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default: {
        // What XML 1.0 allows (its Char production); the rest, which no
        // parser accepts even as a reference, becomes U+FFFD.
        const bool allowed =
            (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
        out += allowed ? bytes : std::string_view(kReplacement);
      }
    }
  });
  return out;
}

std::string GithubData(std::string_view s) {
  std::string out;
  ForEachCodePoint(s, [&](uint32_t cp, std::string_view bytes) {
    if (cp == '%') {
      out += "%25";
    } else if (cp == '\r') {
      out += "%0D";
    } else if (cp == '\n') {
      out += "%0A";
    } else if (IsControl(cp)) {
      out += Cat("\\x", Hex2(cp));
    } else {
      out += bytes;
    }
  });
  return out;
}

std::string GithubProperty(std::string_view s) {
  std::string out;
  for (const char c : GithubData(s)) {
    if (c == ':')
      out += "%3A";
    else if (c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

std::string SafeText(std::string_view s) { return Safe(s, true); }

std::string SafeLine(std::string_view s) { return Safe(s, false); }

}  // namespace jitd::daemon
