#include "src/daemon/operators.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

Principal Uid(uint32_t uid) { return Principal{uid, uid}; }
Principal Cert(const std::string& name) {
  Principal p;
  p.certificate = name;
  return p;
}
Principal Oidc(const std::string& who) {
  Principal p;
  p.oidc = who;
  return p;
}

TEST(OperatorListTest, NamesEachKindOfPrincipal) {
  OperatorList ops;
  ASSERT_TRUE(ops.Add("uid:1000").ok());
  ASSERT_TRUE(ops.Add("cert:dashboard").ok());
  ASSERT_TRUE(ops.Add("oidc:https://idp#alice").ok());
  ASSERT_TRUE(ops.Add("oidc-group:sre").ok());
  EXPECT_TRUE(ops.Names(Uid(1000), {}));
  EXPECT_FALSE(ops.Names(Uid(1001), {}));
  EXPECT_TRUE(ops.Names(Cert("dashboard"), {}));
  EXPECT_FALSE(ops.Names(Cert("dashboard2"), {}));
  EXPECT_TRUE(ops.Names(Oidc("https://idp#alice"), {}));
  EXPECT_FALSE(ops.Names(Oidc("https://other#alice"), {}));
  EXPECT_TRUE(ops.Names(Oidc("https://idp#bob"), {"dev", "sre"}));
  EXPECT_FALSE(ops.Names(Oidc("https://idp#bob"), {"dev"}));
  // Groups come from a verified token only; a certificate's holder has none.
  EXPECT_FALSE(ops.Names(Cert("someone"), {"sre"}));
  // A certificate named like a uid is not that uid.
  EXPECT_FALSE(ops.Names(Cert("1000"), {}));
}

TEST(OperatorListTest, RefusesWhatItCannotMatchAndRoot) {
  OperatorList ops;
  for (const char* bad : {"", "1000", "uid:", "uid:abc", "uid:-1", "cert:", "oidc:no-subject",
                          "oidc-group:", "user:alice", "cert:a\nb"}) {
    absl::Status s = ops.Add(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("write uid:UID"), std::string::npos) << s.message();
  }
  absl::Status root = ops.Add("uid:0");
  EXPECT_NE(root.message().find("root already"), std::string::npos) << root.message();
  EXPECT_TRUE(ops.empty());
  EXPECT_FALSE(ops.Names(Uid(0), {}));
}

}  // namespace
}  // namespace airlock
