#include "src/providers/etcd_client.h"

#include <gtest/gtest.h>

namespace airlock::providers {
namespace {

absl::Status CreateWith(EtcdConfig config) {
  return EtcdClient::Create(std::move(config)).status();
}

TEST(EtcdClientTest, Endpoints) {
  for (const char* good : {"http://127.0.0.1:2379", "http://localhost:2379/", "http://[::1]:2379",
                           "https://etcd-1.internal:2379", "https://[fd00::1]:2379"}) {
    EXPECT_TRUE(CreateWith({.endpoints = {good}}).ok()) << good;
  }
  EXPECT_TRUE(CreateWith({.endpoints = {"https://a:2379", "https://b:2379"}}).ok());
  for (const char* bad : {"127.0.0.1:2379", "http://10.0.0.5:2379", "https://a:2379/v3",
                          "https://a:0", "unix:///run/etcd.sock"}) {
    absl::Status s = CreateWith({.endpoints = {"https://ok:2379", bad}});
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
    EXPECT_NE(s.message().find("etcd endpoint"), std::string::npos) << s;
    EXPECT_NE(s.message().find("write https://host[:port]"), std::string::npos) << s;
  }
  absl::Status plain = CreateWith({.endpoints = {"http://etcd.internal:2379"}});
  EXPECT_NE(plain.message().find("control plane's state unencrypted"), std::string::npos) << plain;
  absl::Status none = CreateWith({});
  EXPECT_NE(none.message().find("no etcd endpoint"), std::string::npos) << none;
}

TEST(EtcdClientTest, CertificatesAndNumbers) {
  absl::Status s = CreateWith({.endpoints = {"https://a:2379"}, .ca_file = "/nonexistent/ca.pem"});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("/nonexistent/ca.pem cannot be read"), std::string::npos) << s;
  s = CreateWith({.endpoints = {"https://a:2379"}, .cert_file = "/dev/null"});
  EXPECT_NE(s.message().find("needs its key"), std::string::npos) << s;
  EXPECT_TRUE(
      absl::IsInvalidArgument(CreateWith({.endpoints = {"https://a:2379"}, .attempts = 0})));
}

TEST(EtcdClientTest, ArgumentsAreCheckedBeforeAnythingIsSent) {
  // Nothing listens there, and nothing is tried: the arguments are wrong first.
  absl::StatusOr<std::unique_ptr<EtcdClient>> client =
      EtcdClient::Create({.endpoints = {"http://127.0.0.1:1"}, .attempts = 1});
  ASSERT_TRUE(client.ok()) << client.status();
  EtcdClient& c = **client;
  EXPECT_TRUE(absl::IsInvalidArgument(c.Get("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(c.Get(std::string(kMaxEtcdKey + 1, 'k')).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(c.Put("k", std::string(kMaxEtcdValue + 1, 'v'))));
  EXPECT_TRUE(absl::IsInvalidArgument(c.GetPrefix("p/", 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(c.GetPrefix("p/", kMaxEtcdEntries + 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(c.CompareAndSwap("k", 0, "v").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(c.DeleteIf("k", -1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(c.GrantLease(0).status()));
}

}  // namespace
}  // namespace airlock::providers
