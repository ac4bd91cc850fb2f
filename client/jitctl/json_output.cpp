#include "json_output.h"

#include <google/protobuf/struct.pb.h>
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

std::string ToJsonObject(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string text = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) text += ",";
    text += "\"" + fields[i].first + "\":" + fields[i].second;
  }
  text += "}";
  // Parsed into a google.protobuf.Value and printed again, so that the
  // nested documents are indented as one.
  google::protobuf::Value value;
  if (!google::protobuf::util::JsonStringToMessage(text, &value).ok()) return text + "\n";
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(value, &json, options).ok()) return text + "\n";
  return json;
}

}  // namespace jitd::jitctl
