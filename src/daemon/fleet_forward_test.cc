#include "src/daemon/fleet_forward.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace airlock {
namespace {

TEST(FleetCallerTest, APrincipalAndItsGroupsTravelAsPrintableText) {
  Principal who;
  who.uid = 1000;
  who.gid = 1001;
  who.oidc = "https://issuer.example#caf\xc3\xa9";
  who.api_key = "key-1";
  std::string text = EncodeFleetCaller(who, {"ops", "dev"});
  for (char c : text) EXPECT_TRUE(c >= ' ' && c <= '~') << text;
  std::vector<std::string> groups;
  absl::StatusOr<Principal> back = DecodeFleetCaller(text, &groups);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Name(), who.Name());
  EXPECT_EQ(back->oidc, who.oidc);
  EXPECT_EQ(groups, (std::vector<std::string>{"ops", "dev"}));
  // What the owner decides itself never travels.
  EXPECT_FALSE(back->read_only_operator);
  EXPECT_TRUE(back->via_host.empty());
}

TEST(FleetCallerTest, AnythingElseIsRefused) {
  std::vector<std::string> groups;
  for (const std::string& text :
       {std::string("not json"), std::string("[]"), std::string(R"({"uid":0})"),
        std::string(R"({"uid":-1,"gid":0,"certificate":"","oidc":"","api_key":"","groups":[]})"),
        std::string(
            R"({"uid":4294967296,"gid":0,"certificate":"","oidc":"","api_key":"","groups":[]})"),
        std::string(R"({"uid":0,"gid":0,"certificate":1,"oidc":"","api_key":"","groups":[]})"),
        std::string(R"({"uid":0,"gid":0,"certificate":"","oidc":"","api_key":"","groups":[1]})"),
        R"({"uid":0,"gid":0,"certificate":")" + std::string(2000, 'x') +
            R"(","oidc":"","api_key":"","groups":[]})",
        std::string(9000, ' ')}) {
    EXPECT_FALSE(DecodeFleetCaller(text, &groups).ok()) << text.substr(0, 100);
  }
}

TEST(FleetPeersTest, ACaFileWithoutACertificateIsRefused) {
  absl::StatusOr<std::unique_ptr<FleetPeers>> peers = FleetPeers::Create("not a certificate");
  ASSERT_FALSE(peers.ok());
  EXPECT_NE(peers.status().message().find("--fleet-ca holds no PEM certificate"),
            std::string::npos);
}

}  // namespace
}  // namespace airlock
