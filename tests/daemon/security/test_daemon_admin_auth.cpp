// AdminAuth: open without a token; with one, exactly "Bearer <token>".
#include <grpcpp/server_context.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <gtest/gtest.h>

#include "security/admin_auth.h"

namespace jitd::daemon {
namespace {

absl::Status AuthorizeWith(const AdminAuth& auth, const char* header) {
  grpc::ServerContext context;
  grpc::testing::ServerContextTestSpouse spouse(&context);
  if (header != nullptr) spouse.AddClientMetadata("authorization", header);
  return auth.Authorize(context, "Evict");
}

TEST(AdminAuth, WithoutATokenEveryoneIsAllowed) {
  const AdminAuth open;
  EXPECT_FALSE(open.required());
  EXPECT_TRUE(AuthorizeWith(open, nullptr).ok());
  EXPECT_TRUE(AuthorizeWith(open, "Bearer anything").ok());
}

TEST(AdminAuth, WithATokenOnlyTheExactBearerHeaderIsAllowed) {
  const AdminAuth guarded("s3cret-token");
  EXPECT_TRUE(guarded.required());
  EXPECT_TRUE(AuthorizeWith(guarded, "Bearer s3cret-token").ok());
  for (const char* wrong : {"Bearer s3cret-toke", "Bearer s3cret-token2", "s3cret-token", "bearer s3cret-token",
                            "Basic s3cret-token", "Bearer ", ""}) {
    EXPECT_EQ(AuthorizeWith(guarded, wrong).code(), absl::StatusCode::kPermissionDenied) << wrong;
  }
}

TEST(AdminAuth, AMissingHeaderIsDeniedSayingWhatToSend) {
  const absl::Status denied = AuthorizeWith(AdminAuth("t"), nullptr);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("authorization: Bearer"), std::string::npos);
  EXPECT_NE(denied.message().find("Evict"), std::string::npos);
}

}  // namespace
}  // namespace jitd::daemon
