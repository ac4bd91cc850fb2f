#include "jitd/base/error_reason.h"

#include "absl/strings/cord.h"

namespace jitd {
namespace {

constexpr char kReasonPayload[] = "type.jitd.dev/reason";

}  // namespace

absl::Status WithReason(absl::Status status, std::string_view reason) {
  if (!status.ok()) status.SetPayload(kReasonPayload, absl::Cord(std::string(reason)));
  return status;
}

std::string ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonPayload);
  return payload.has_value() ? std::string(*payload) : std::string();
}

}  // namespace jitd
