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
  if (job.kind == ArtifactKind::kCubin) return d.Hex();  // the digests cubin jobs always had
  const ModuleBuild& m = job.module;
  d.Field("kind", "shared-object");
  d.Field("nvcc", m.nvcc);
  d.Field("host-cxx", m.host_cxx);
  for (const auto* list : {&m.compile_options, &m.link_options, &m.read_roots}) {
    d.Field("list", std::to_string(list->size()));
    for (const std::string& item : *list) d.Field("item", item);
  }
  return d.Hex();
}

}  // namespace jitd::compiler
