#include "json_output.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "jitd/base/text.h"

namespace jitd::jitctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void AppendString(std::string_view text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
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
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void AppendDouble(double value, std::string& out) {
  // JSON has no NaN or infinity: they go as protobuf's JSON mapping spells
  // them, as strings.
  if (std::isnan(value)) {
    out += "\"NaN\"";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, ec == std::errc() ? end : buffer);
}

void AppendMessage(const Message& message, std::string& out, const std::set<std::string>* omit = nullptr);

// One value of `field` (element `index` of a repeated field, or -1).
void AppendValue(const Message& message, const FieldDescriptor* field, int index, std::string& out) {
  const Reflection* r = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      text::Append(out, repeated ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      text::Append(out, repeated ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      text::Append(out, repeated ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      text::Append(out, repeated ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendDouble(repeated ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field), out);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendDouble(repeated ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field), out);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out += (repeated ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field)) ? "true" : "false";
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = repeated ? r->GetRepeatedEnumValue(message, field, index) : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      if (value != nullptr) {
        AppendString(value->name(), out);
      } else {
        text::Append(out, number);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string text = repeated ? r->GetRepeatedString(message, field, index) : r->GetString(message, field);
      if (field->type() == FieldDescriptor::TYPE_BYTES) {
        AppendString(absl::Base64Escape(text), out);
      } else {
        AppendString(text, out);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(repeated ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field), out);
      break;
  }
}

// A map field as an object: its keys are strings, as JSON wants.
void AppendMap(const Message& message, const FieldDescriptor* field, std::string& out) {
  const Reflection* r = message.GetReflection();
  const FieldDescriptor* key_field = field->message_type()->map_key();
  const FieldDescriptor* value_field = field->message_type()->map_value();
  // Sorted by key, so that the output is the same from run to run.
  std::vector<std::pair<std::string, const Message*>> entries;
  for (int i = 0; i < r->FieldSize(message, field); ++i) {
    const Message& entry = r->GetRepeatedMessage(message, field, i);
    std::string key;
    AppendValue(entry, key_field, -1, key);
    if (key.size() >= 2 && key.front() == '"') key = key.substr(1, key.size() - 2);
    entries.emplace_back(std::move(key), &entry);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    AppendString(entries[i].first, out);
    out += ':';
    AppendValue(*entries[i].second, value_field, -1, out);
  }
  out += '}';
}

void AppendMessage(const Message& message, std::string& out, const std::set<std::string>* omit) {
  const Reflection* r = message.GetReflection();
  const auto* descriptor = message.GetDescriptor();
  if (descriptor->file()->name().rfind("google/protobuf/", 0) == 0) {
    // A well-known type (Struct, Value, Timestamp...) has a JSON form of its
    // own, which protobuf prints.
    std::string json;
    if (google::protobuf::util::MessageToJsonString(message, &json).ok()) {
      out += json;
    } else {
      out += "null";
    }
    return;
  }
  out += '{';
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (omit != nullptr && omit->count(field->name()) > 0) continue;
    // Every field is present (zeros included), except those that are
    // absent by design: an unset message or `optional` field, an unset
    // member of a oneof.
    if (!field->is_repeated() && field->has_presence() && !r->HasField(message, field)) continue;
    if (!first) out += ',';
    first = false;
    AppendString(field->name(), out);
    out += ':';
    if (field->is_map()) {
      AppendMap(message, field, out);
    } else if (field->is_repeated()) {
      out += '[';
      for (int j = 0; j < r->FieldSize(message, field); ++j) {
        if (j > 0) out += ',';
        AppendValue(message, field, j, out);
      }
      out += ']';
    } else {
      AppendValue(message, field, -1, out);
    }
  }
  out += '}';
}

// Re-indents JSON text (compact or indented, nested documents included)
// two spaces a level, one member or element a line.
std::string Indent(std::string_view json) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  auto newline = [&] {
    out += '\n';
    out.append(static_cast<size_t>(2 * depth), ' ');
  };
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < json.size()) {
        out += json[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        out += c;
        break;
      case '{':
      case '[': {
        // An empty object or array stays on its line.
        size_t next = json.find_first_not_of(" \n\r\t", i + 1);
        if (next != std::string_view::npos && json[next] == (c == '{' ? '}' : ']')) {
          out += c;
          out += json[next];
          i = next;
          break;
        }
        out += c;
        ++depth;
        newline();
        break;
      }
      case '}':
      case ']':
        --depth;
        newline();
        out += c;
        break;
      case ',':
        out += c;
        newline();
        break;
      case ':':
        out += ": ";
        break;
      case ' ':
      case '\n':
      case '\r':
      case '\t':
        break;
      default:
        out += c;
    }
  }
  out += '\n';
  return out;
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  AppendMessage(message, json);
  return Indent(json);
}

std::string JsonString(std::string_view text) {
  std::string out;
  AppendString(text, out);
  return out;
}

std::string ToJson(const google::protobuf::Message& message,
                   const std::vector<std::pair<std::string, std::string>>& leading, const std::set<std::string>& omit) {
  std::string body;
  AppendMessage(message, body, &omit);
  std::string json = "{";
  for (const auto& [name, value] : leading) {
    AppendString(name, json);
    json += ':';
    json += value;
    json += ',';
  }
  if (body.size() > 2) {
    json += body.substr(1);
  } else if (json.back() == ',') {
    json.back() = '}';
  } else {
    json += '}';
  }
  return Indent(json);
}

std::string ToJsonArray(const std::vector<std::string>& json_documents) {
  std::string text = "[";
  for (size_t i = 0; i < json_documents.size(); ++i) {
    if (i > 0) text += ',';
    text += json_documents[i];
  }
  text += ']';
  return Indent(text);
}

std::string ToJsonObject(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string text = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) text += ',';
    AppendString(fields[i].first, text);
    text += ':';
    text += fields[i].second;
  }
  text += '}';
  return Indent(text);
}

}  // namespace jitd::jitctl
