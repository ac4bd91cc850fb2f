// jitd lint's report formats (commands/lint_report.h) on a report like the
// seed_misses fixture's: the text exactly as it always was, JSON through a
// real parser (google.protobuf.Value), JUnit counts, GitHub Actions
// commands, and every escaper on the characters that break each format.
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <string>

#include "commands/lint_report.h"
#include "manifest/manifest.h"

namespace jitd::daemon {
namespace {

using google::protobuf::Value;
using ::testing::HasSubstr;
using ::testing::Not;

// Two source findings (one kernel skipped for them) and one compile finding
// of a kernel with two instantiations for one arch.
LintReport Sample() {
  LintReport r;
  r.kernels_dir = "kernels";
  r.kernel_namespace = "sglang";
  r.archs = {"sm_90"};
  r.source_files = {"a/bad.cu", "a/good.cu", "b/k.cu"};
  r.compiled = true;
  r.nvrtc_version = "13.0";
  r.compile_s = 1.25;
  r.findings = {
      {LintReport::Check::kSource, {"a/bad.cu", 6, "a.bad", "`namespace x` is not inside namespace sglang"}},
      {LintReport::Check::kSource, {"kernels.toml", 3, "a.bad", "name expression `k` is not in namespace sglang"}},
      {LintReport::Check::kCompile, {"b/k.cu", 0, "b.k", "sm_90 dtype=fp16: does not compile: b/k.cu(3): error\n  x"}},
  };
  r.skipped_kernels = {"a.bad"};
  r.instantiations = {{"a.bad", "", "sm_90", false, true},
                      {"b.k", "dtype=bf16", "sm_90", true, false},
                      {"b.k", "dtype=fp16", "sm_90", false, false}};
  return r;
}

Value Parse(const std::string& json) {
  Value value;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &value);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json;
  return value;
}

const Value& Field(const Value& object, const std::string& name) {
  static const Value kMissing;
  const auto& fields = object.struct_value().fields();
  const auto it = fields.find(name);
  EXPECT_NE(it, fields.end()) << name;
  return it == fields.end() ? kMissing : it->second;
}

TEST(LintReport, TextIsTodaysOutput) {
  const LintReport r = Sample();
  EXPECT_EQ(LintTextSources(r),
            "a/bad.cu:6: [a.bad] `namespace x` is not inside namespace sglang\n"
            "kernels.toml:3: [a.bad] name expression `k` is not in namespace sglang\n"
            "jitd lint: 3 source files in kernels: 2 findings\n");
  EXPECT_EQ(LintTextCompile(r),
            "b/k.cu: [b.k] sm_90 dtype=fp16: does not compile: b/k.cu(3): error\n  x\n"
            "jitd lint: 2 instantiations compiled for 1 arch(s) with NVRTC 13.0 in 1.2 s: 1 compile findings; 1 kernel "
            "not compiled because of the source findings above (fix those, then lint again)\n");
}

TEST(LintReport, SourceFindingsOfATreeWithoutANamespaceLineSayTheRuleIsTheDefault) {
  LintReport r = Sample();
  manifest::Manifest m;
  r.namespace_note = manifest::UndeclaredNamespaceNote(m);
  EXPECT_THAT(LintTextSources(r), ::testing::HasSubstr("2 findings (kernels.toml sets no `namespace`, so the rule is "
                                                       "the default, sglang; for kernels in another, add `namespace = "
                                                       "\"acme\"` (yours) at the top of kernels.toml)"));
  m.namespace_declared = true;
  EXPECT_EQ(manifest::UndeclaredNamespaceNote(m), "");
}

TEST(LintReport, FindingsOfAnInstantiationAreItsOwn) {
  const LintReport r = Sample();
  EXPECT_TRUE(r.FindingsOf(r.instantiations[1]).empty());
  ASSERT_EQ(r.FindingsOf(r.instantiations[2]).size(), 1u);
  EXPECT_EQ(r.CountFindings(LintReport::Check::kSource), 2u);
  EXPECT_EQ(r.CountInstantiations(false, true), 1u);
  EXPECT_EQ(r.CountInstantiations(true, false), 1u);
  EXPECT_EQ(r.CountInstantiations(false, false), 1u);
}

TEST(LintReport, JsonParsesWithEveryField) {
  const Value v = Parse(LintJson(Sample()));
  EXPECT_EQ(Field(v, "tree_dir").string_value(), "kernels");
  EXPECT_EQ(Field(v, "namespace").string_value(), "sglang");
  EXPECT_EQ(Field(v, "nvrtc_version").string_value(), "13.0");
  EXPECT_FALSE(Field(v, "ok").bool_value());
  EXPECT_EQ(Field(Field(v, "counts"), "findings").number_value(), 3);
  EXPECT_EQ(Field(Field(v, "counts"), "source_files").number_value(), 3);
  EXPECT_EQ(Field(Field(v, "counts"), "skipped").number_value(), 1);
  const auto& findings = Field(v, "findings").list_value().values();
  ASSERT_EQ(findings.size(), 3);
  EXPECT_EQ(Field(findings[0], "check").string_value(), "source");
  EXPECT_EQ(Field(findings[0], "file").string_value(), "a/bad.cu");
  EXPECT_EQ(Field(findings[0], "line").number_value(), 6);
  EXPECT_EQ(Field(findings[2], "check").string_value(), "compile");
  EXPECT_EQ(Field(findings[2], "message").string_value(), "sm_90 dtype=fp16: does not compile: b/k.cu(3): error\n  x");
  const auto& insts = Field(v, "instantiations").list_value().values();
  ASSERT_EQ(insts.size(), 3);
  EXPECT_EQ(Field(insts[1], "params").string_value(), "dtype=bf16");
  EXPECT_TRUE(Field(insts[1], "ok").bool_value());
  EXPECT_FALSE(Field(insts[2], "ok").bool_value());
}

TEST(LintReport, JsonOfACleanSourceOnlyLint) {
  LintReport r;
  r.kernels_dir = "k";
  r.archs = {"sm_90"};
  const Value v = Parse(LintJson(r));
  EXPECT_TRUE(Field(v, "ok").bool_value());
  EXPECT_EQ(Field(v, "nvrtc_version").kind_case(), Value::kNullValue);
  EXPECT_EQ(Field(v, "findings").list_value().values_size(), 0);
}

TEST(LintReport, JsonEscapesWhatJsonForbids) {
  EXPECT_EQ(JsonString("a\"b\\c\n\t\x01\x1f"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\"");
  EXPECT_EQ(JsonString("ü€😀"), "\"ü€😀\"");  // UTF-8 passes through
  EXPECT_EQ(JsonString("a\xff"
                       "b"),
            "\"a\xEF\xBF\xBD"
            "b\"");                                                   // invalid bytes become U+FFFD
  EXPECT_EQ(JsonString("\xe2\x82"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // a cut sequence
  EXPECT_EQ(JsonString("\xc0\xaf"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong
  const Value v = Parse("{\"s\": " + JsonString("q\"\\\x02\xfe\r\n") + "}");
  EXPECT_EQ(Field(v, "s").string_value(), "q\"\\\x02\xEF\xBF\xBD\r\n");
}

TEST(LintReport, JunitCountsAndFailures) {
  const std::string xml = LintJunit(Sample());
  EXPECT_THAT(xml, HasSubstr("<testsuites name=\"jitd lint\" tests=\"7\" failures=\"3\" errors=\"0\" skipped=\"1\">"));
  // Three source files and kernels.toml, of which two fail.
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"namespace guard\" tests=\"4\" failures=\"2\" errors=\"0\" "
                             "skipped=\"0\">"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"compile-all\" tests=\"3\" failures=\"1\" errors=\"0\" "
                             "skipped=\"1\" time=\"1.250\">"));
  EXPECT_THAT(xml, HasSubstr("name=\"a/bad.cu\" file=\"kernels/a/bad.cu\">\n      <failure message=\"[a.bad] "
                             "`namespace x` is not inside namespace sglang\" type=\"source\">"));
  EXPECT_THAT(xml,
              HasSubstr("<testcase classname=\"namespace guard\" name=\"a/good.cu\" file=\"kernels/a/good.cu\"/>"));
  EXPECT_THAT(xml, HasSubstr("name=\"b.k{dtype=fp16}@sm_90\">\n      <failure message=\"b/k.cu: [b.k] sm_90 "
                             "dtype=fp16: does not compile: b/k.cu(3): error\" type=\"compile\">"));
  EXPECT_THAT(xml, HasSubstr("error&#10;  x</failure>"));
  EXPECT_THAT(xml, HasSubstr("name=\"a.bad{}@sm_90\">\n      <skipped"));
}

TEST(LintReport, XmlEscapesAndDropsWhatXmlForbids) {
  EXPECT_EQ(XmlEscape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(XmlEscape("t\tn\nr\r"), "t&#9;n&#10;r&#13;");
  // NUL, other C0 controls and U+FFFE are not XML 1.0 characters at all.
  EXPECT_EQ(XmlEscape(std::string("a\0b\x01\x0b\x1f", 6)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(XmlEscape("\xEF\xBF\xBE"), "\xEF\xBF\xBD");
  EXPECT_EQ(XmlEscape("ü😀"), "ü😀");
  EXPECT_EQ(XmlEscape("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a UTF-8 surrogate: 3 bad bytes
}

TEST(LintReport, GithubCommandsOnePerFinding) {
  const std::string out = LintGithub(Sample());
  EXPECT_EQ(out,
            "::error file=kernels/a/bad.cu,line=6,title=jitd lint::[a.bad] `namespace x` is not inside namespace "
            "sglang\n"
            "::error file=kernels/kernels.toml,line=3,title=jitd lint::[a.bad] name expression `k` is not in "
            "namespace sglang\n"
            "::error file=kernels/b/k.cu,title=jitd lint::[b.k] sm_90 dtype=fp16: does not compile: b/k.cu(3): "
            "error%0A  x\n"
            "jitd lint: 3 findings (2 namespace guard, 1 compile-all) in kernels, 3 instantiations\n");
}

TEST(LintReport, GithubEscaping) {
  EXPECT_EQ(GithubData("100% a:b,c\r\n"), "100%25 a:b,c%0D%0A");
  EXPECT_EQ(GithubProperty("100% a:b,c\r\n"), "100%25 a%3Ab%2Cc%0D%0A");
  LintReport r;
  r.kernels_dir = "./dir,with:odd/";
  r.findings = {{LintReport::Check::kSource, {"x.cu", 2, "", "50% bad"}}};
  EXPECT_THAT(LintGithub(r), HasSubstr("::error file=dir%2Cwith%3Aodd/x.cu,line=2,title=jitd lint::50%25 bad\n"));
  EXPECT_THAT(LintGithub(r), Not(HasSubstr("instantiations")));
}

TEST(LintReport, GithubDataEscapesControlsAndKeepsOneLine) {
  EXPECT_EQ(GithubData("a\x1b[31mb\x07"), "a\\x1b[31mb\\x07");
  EXPECT_EQ(GithubData("x::stop-commands::tok"), "x::stop-commands::tok");  // text after the command's "::"
  EXPECT_EQ(GithubData("\n::stop-commands::tok"), "%0A::stop-commands::tok");
  EXPECT_EQ(GithubProperty("a\x1b,b"), "a\\x1b%2Cb");
}

TEST(LintReport, SafeTextShowsControlsAndDefusesWorkflowCommands) {
  EXPECT_EQ(SafeText("plain a::b text"), "plain a::b text");
  EXPECT_EQ(SafeText("esc \x1b[2J bel \x07 del \x7f"), "esc \\x1b[2J bel \\x07 del \\x7f");
  EXPECT_EQ(SafeText("csi \xc2\x9b"), "csi \\x9b");  // a C1 control, as UTF-8
  EXPECT_EQ(SafeText("tab\there\r"), "tab here\\x0d");
  EXPECT_EQ(SafeText("::stop-commands::tok"), "\\x3a:stop-commands::tok");
  EXPECT_EQ(SafeText("x\n  ::error::y\n##[group]z\n#include"), "x\n  \\x3a:error::y\n\\x23#[group]z\n#include");
  EXPECT_EQ(SafeText("ü€"), "ü€");
  EXPECT_EQ(SafeLine("one\n::two"), "one\\x0a::two");  // one line: the newline shown, no command begins
  EXPECT_EQ(SafeLine("::two"), "\\x3a:two");
}

// A lint of names, files and messages that try to write workflow commands
// and escape sequences: the github format writes one ::error line per
// finding and its summary, nothing else; the text format writes no line a
// runner reads as a command, and no ESC.
TEST(LintReport, HostileNamesCannotWriteAWorkflowCommand) {
  const std::string hostile = "\n::stop-commands::tok\n  ::warning::x\r\n\x1b]0;title\x07";
  LintReport r;
  r.kernels_dir = "dir" + hostile;
  r.archs = {"sm_90"};
  r.source_files = {"a" + hostile + ".cu"};
  r.compiled = true;
  r.nvrtc_version = "13.0" + hostile;
  r.findings = {
      {LintReport::Check::kSource, {"a" + hostile + ".cu", 2, "k" + hostile, "bad" + hostile}},
      {LintReport::Check::kCompile, {"b.cu", 0, "k" + hostile, "sm_90: log" + hostile}},
  };
  r.instantiations = {{"k" + hostile, "p=v" + hostile, "sm_90", false, false}};
  const auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      out.push_back(text.substr(start, end - start));
    }
    return out;
  };
  const auto command = [](const std::string& line) {
    const size_t first = line.find_first_not_of(" \t\r");
    return first != std::string::npos && (line.compare(first, 2, "::") == 0 || line.compare(first, 3, "##[") == 0);
  };
  const std::vector<std::string> github = lines(LintGithub(r));
  ASSERT_EQ(github.size(), 3u) << LintGithub(r);
  EXPECT_TRUE(github[0].starts_with("::error file=dir%0A%3A%3Astop-commands%3A%3Atok%0A")) << github[0];
  EXPECT_TRUE(github[1].starts_with("::error file=dir%0A")) << github[1];
  EXPECT_TRUE(github[2].starts_with("jitd lint: 2 findings")) << github[2];
  EXPECT_FALSE(command(github[2])) << github[2];
  for (const std::string& line : github) {
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  }
  for (const std::string& text : {LintTextSources(r), LintTextCompile(r)}) {
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    for (const std::string& line : lines(text)) EXPECT_FALSE(command(line)) << line;
  }
}

}  // namespace
}  // namespace jitd::daemon
