// Why a request was refused, in a word a program can match: carried on an
// absl::Status as a payload inside the daemon, and on the wire as the
// reason of an ErrorInfo in the grpc-status-details-bin trailer
// (proto/jitd/v1/error_details.proto lists the reasons).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace jitd {

inline constexpr std::string_view kReasonLockViolation = "LOCK_VIOLATION";
inline constexpr std::string_view kReasonTreeRefused = "TREE_REFUSED";
inline constexpr std::string_view kReasonTreeMismatch = "TREE_MISMATCH";
inline constexpr std::string_view kReasonAdhocNotAllowed = "ADHOC_NOT_ALLOWED";

// `status` with `reason` attached (unchanged when OK).
absl::Status WithReason(absl::Status status, std::string_view reason);
// The reason attached to `status`, or "".
std::string ReasonOf(const absl::Status& status);

}  // namespace jitd
