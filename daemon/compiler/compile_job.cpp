#include "compiler/compile_job.h"

#include <cstdint>
#include <string_view>

#include "jitd/keys/field_digest.h"

namespace jitd::compiler {
std::string JobDigest(const CompileJob& job) {
  keys::FieldDigest d;
  d.Field("jitd-compile-job", "1");
  d.Field("program", job.program_name);
  d.Field("source", job.source);
  d.Field("headers", std::to_string(job.headers.size()));
  for (const CompileHeader& header : job.headers) {
    d.Field("header-name", header.name);
    d.Field("header-path", header.path);
    d.Field("header", header.content);
  }
  d.Field("options", std::to_string(job.options.size()));
  for (const std::string& option : job.options) d.Field("option", option);
  d.Field("exprs", std::to_string(job.name_expressions.size()));
  for (const std::string& expr : job.name_expressions) d.Field("expr", expr);
  d.Field("log-root", job.log_root);
  return d.Hex();
}

}  // namespace jitd::compiler
