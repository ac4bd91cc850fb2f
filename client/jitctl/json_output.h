// jitctl's --json output, the shape docs/CONTRACT.md documents: the proto
// field names (snake_case) as they appear in the .proto files, every field
// present (zeros included) so that scripts need no defaults, and numbers
// as JSON numbers, 64-bit ones too (protobuf's own JSON mapping prints
// those as strings, so `jq '.entries + 1'` failed). Enums are their names,
// bytes base64, maps objects sorted by key; an unset `optional` or message
// field is left out.
#pragma once

#include <google/protobuf/message.h>

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jitd::jitctl {

std::string ToJson(const google::protobuf::Message& message);
// The same with `leading` members first (each name and its JSON text), and
// the fields named in `omit` left out.
std::string ToJson(const google::protobuf::Message& message,
                   const std::vector<std::pair<std::string, std::string>>& leading, const std::set<std::string>& omit);
// `text` as a JSON string, quoted and escaped.
std::string JsonString(std::string_view text);

// A JSON array of messages (for streams such as warm's progress).
std::string ToJsonArray(const std::vector<std::string>& json_documents);

// One JSON object of named values, each given as JSON text (a number, a
// ToJson() document, a ToJsonArray()), printed with the same indentation as
// ToJson(). For documents no single message describes (warm's summary).
std::string ToJsonObject(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace jitd::jitctl
