#include "src/daemon/workspace_uploads.h"

#include <fcntl.h>
#include <gtest/gtest.h>

namespace airlock {
namespace {

PendingWorkspace Upload(const std::string& tenant) {
  PendingWorkspace p;
  p.tenant = tenant;
  p.image = UniqueFd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  p.base.tree_digest = "sha256:x";
  return p;
}

TEST(WorkspaceUploadsTest, AnUploadIsItsTenantsOnceAndTenantsWaitForAFewAtMost) {
  WorkspaceUploads uploads;
  absl::StatusOr<std::string> token = uploads.Add(Upload("uid:1000"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(token->size(), 32u);
  // Another tenant cannot take it, even knowing the token.
  EXPECT_EQ(uploads.Take("uid:1001", *token).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<PendingWorkspace> taken = uploads.Take("uid:1000", *token);
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(taken->image.valid());
  absl::StatusOr<PendingWorkspace> again = uploads.Take("uid:1000", *token);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(again.status().message().find("run the command again"), std::string::npos);

  for (size_t i = 0; i < WorkspaceUploads::kMaxPerTenant; ++i) {
    ASSERT_TRUE(uploads.Add(Upload("uid:1000")).ok());
  }
  absl::StatusOr<std::string> more = uploads.Add(Upload("uid:1000"));
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(uploads.Add(Upload("uid:1001")).ok());  // others are not held back
}

}  // namespace
}  // namespace airlock
