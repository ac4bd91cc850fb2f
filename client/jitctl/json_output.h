// jitctl's --json output: protobuf's canonical JSON mapping, with every
// field present (zeros included) so that scripts need no defaults, and the
// proto field names (snake_case) as they appear in the .proto files.
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <utility>
#include <vector>

namespace jitd::jitctl {

std::string ToJson(const google::protobuf::Message& message);

// A JSON array of messages (for streams such as warm's progress).
std::string ToJsonArray(const std::vector<std::string>& json_documents);

// One JSON object of named values, each given as JSON text (a number, a
// ToJson() document, a ToJsonArray()), printed with the same indentation as
// ToJson(). For documents no single message describes (warm's summary).
std::string ToJsonObject(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace jitd::jitctl
