// absl::Status -> grpc::Status keeps code and message, for every code.
#include <gtest/gtest.h>

#include "rpc/grpc_status.h"

namespace jitd::daemon {
namespace {

TEST(GrpcStatus, OkStaysOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(GrpcStatus, EveryCodeAndTheMessageCarryOver) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "what went wrong");
    const grpc::Status mapped = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(mapped.error_code()), code);
    EXPECT_EQ(mapped.error_message(), "what went wrong");
  }
  EXPECT_EQ(ToGrpcStatus(absl::PermissionDeniedError("x")).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace jitd::daemon
