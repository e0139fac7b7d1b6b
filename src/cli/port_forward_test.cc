#include "src/cli/port_forward.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(PortPairTest, RemoteLocalColonRemoteAndAnyFreePort) {
  absl::StatusOr<PortPair> same = ParsePortPair("8000");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->local, 8000);
  EXPECT_EQ(same->remote, 8000);
  absl::StatusOr<PortPair> pair = ParsePortPair("8080:8000");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->local, 8080);
  EXPECT_EQ(pair->remote, 8000);
  absl::StatusOr<PortPair> any = ParsePortPair(":5173");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->local, 0);
  EXPECT_EQ(any->remote, 5173);
  for (const char* bad : {"", "0", "65536", "80:", "a:80", "1:2:3", "-1", "80 ", "8000:0"}) {
    absl::StatusOr<PortPair> refused = ParsePortPair(bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("LOCAL:REMOTE"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace airlock
