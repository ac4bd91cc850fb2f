#include "json_output.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_join.h"

namespace jitd::jitctl {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a well-formed message cannot fail; an empty object is the
  // honest fallback should it ever.
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}\n";
  return json;
}

std::string ToJsonArray(const std::vector<std::string>& json_documents) {
  return "[\n" + absl::StrJoin(json_documents, ",\n") + "]\n";
}

}  // namespace jitd::jitctl
