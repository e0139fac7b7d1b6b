#include "src/providers/etcd_json.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace airlock::providers {
namespace {

// Answers as etcd 3.4.23's gateway wrote them.
constexpr char kHeader[] =
    R"("header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709",)"
    R"("revision":"9","raft_term":"2"})";

TEST(EtcdJsonTest, ParsesARange) {
  absl::StatusOr<EtcdRangeAnswer> a = ParseEtcdRange(absl::StrCat(
      "{", kHeader,
      R"(,"kvs":[{"key":"Yi8x","create_revision":"7","mod_revision":"8","version":"2",)"
      R"("value":"eA==","lease":"4111120391537091609"},)"
      R"({"key":"Yi8y","create_revision":"8","mod_revision":"8","version":"1"}],)"
      R"("more":true,"count":"3"})"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->revision, 9);
  EXPECT_TRUE(a->more);
  EXPECT_EQ(a->count, 3);
  ASSERT_EQ(a->kvs.size(), 2u);
  EXPECT_EQ(a->kvs[0].key, "b/1");
  EXPECT_EQ(a->kvs[0].value, "x");
  EXPECT_EQ(a->kvs[0].create_revision, 7);
  EXPECT_EQ(a->kvs[0].mod_revision, 8);
  EXPECT_EQ(a->kvs[0].version, 2);
  EXPECT_EQ(a->kvs[0].lease, 4111120391537091609);
  EXPECT_EQ(a->kvs[1].key, "b/2");
  EXPECT_EQ(a->kvs[1].value, "");  // proto3 leaves an empty value out
  EXPECT_EQ(a->kvs[1].lease, 0);
}

TEST(EtcdJsonTest, AnEmptyRangeLeavesEverythingOut) {
  absl::StatusOr<EtcdRangeAnswer> a = ParseEtcdRange(absl::StrCat("{", kHeader, "}"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->kvs.empty());
  EXPECT_FALSE(a->more);
  EXPECT_EQ(a->count, 0);
}

TEST(EtcdJsonTest, IntegersMayBeNumbersToo) {
  absl::StatusOr<EtcdRangeAnswer> a = ParseEtcdRange(
      R"({"header":{"revision":12},"kvs":[{"key":"YQ==","create_revision":5,"mod_revision":6}],)"
      R"("count":1})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->revision, 12);
  EXPECT_EQ(a->kvs[0].mod_revision, 6);
}

TEST(EtcdJsonTest, ParsesWritesTransactionsAndLeases) {
  EXPECT_EQ(*ParseEtcdHeaderRevision(absl::StrCat("{", kHeader, "}")), 9);
  EXPECT_EQ(*ParseEtcdDeleteRange(absl::StrCat("{", kHeader, R"(,"deleted":"1"})")), 1);
  EXPECT_EQ(*ParseEtcdDeleteRange(absl::StrCat("{", kHeader, "}")), 0);
  EXPECT_TRUE(*ParseEtcdTxn(absl::StrCat(
      "{", kHeader,
      R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"4"}}}]})")));
  EXPECT_FALSE(*ParseEtcdTxn(absl::StrCat(
      "{", kHeader, R"(,"responses":[{"response_range":{"header":{"revision":"4"}}}]})")));

  absl::StatusOr<EtcdLeaseAnswer> grant =
      ParseEtcdLeaseGrant(absl::StrCat("{", kHeader, R"(,"ID":"4111120391537091594","TTL":"2"})"));
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->id, 4111120391537091594);
  EXPECT_EQ(grant->ttl, 2);

  absl::StatusOr<EtcdLeaseAnswer> alive = ParseEtcdKeepAlive(
      absl::StrCat(R"({"result":{)", kHeader, R"(,"ID":"4111120391537091609","TTL":"5"}})", "\n"));
  ASSERT_TRUE(alive.ok()) << alive.status();
  EXPECT_EQ(alive->id, 4111120391537091609);
  EXPECT_EQ(alive->ttl, 5);
  // An expired lease: the TTL is left out.
  absl::StatusOr<EtcdLeaseAnswer> expired =
      ParseEtcdKeepAlive(absl::StrCat(R"({"result":{)", kHeader, R"(,"ID":"1"}})", "\n"));
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->ttl, 0);
}

TEST(EtcdJsonTest, ParsesErrors) {
  std::optional<EtcdError> e = ParseEtcdError(
      R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested )"
      R"(lease not found","code":5})");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, 5);
  EXPECT_EQ(e->message, "etcdserver: requested lease not found");
  // On a stream.
  e = ParseEtcdError(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader\u001b[31m",)"
      R"("http_status":"Service Unavailable"}})");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, 14);
  EXPECT_EQ(e->message, "etcdserver: no leader?[31m");
  e = ParseEtcdError(
      absl::StrCat(R"({"error":"x","code":3,"message":")", std::string(5000, 'm'), R"("})"));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message.size(), kMaxEtcdMessage);

  EXPECT_FALSE(ParseEtcdError("404 page not found\n").has_value());
  EXPECT_FALSE(ParseEtcdError(absl::StrCat("{", kHeader, "}")).has_value());
  EXPECT_FALSE(ParseEtcdError(R"({"error":"x","code":99})").has_value());
  EXPECT_FALSE(ParseEtcdError(R"({"error":7,"code":3})").has_value());
}

TEST(EtcdJsonTest, RefusesHostileRanges) {
  for (std::string body : {
           std::string(""),
           std::string("null"),
           std::string("[]"),
           std::string("not json"),
           std::string(R"({"kvs":{}})"),
           std::string(R"({"kvs":[1]})"),
           std::string(R"({"kvs":[{"key":"YQ==","create_revision":"1","mod_revision":"1"}]})"),
           std::string(R"({"count":"1","kvs":[{"create_revision":"1","mod_revision":"1"}]})"),
           std::string(R"({"count":"1","kvs":[{"key":"!!","create_revision":"1",)"
                       R"("mod_revision":"1"}]})"),
           std::string(R"({"count":"1","kvs":[{"key":"YQ==","create_revision":"0",)"
                       R"("mod_revision":"1"}]})"),
           std::string(R"({"count":"1","kvs":[{"key":"YQ==","create_revision":"5",)"
                       R"("mod_revision":"4"}]})"),
           std::string(R"({"count":"-1"})"),
           std::string(R"({"count":"1.5"})"),
           std::string(R"({"count":1.5})"),
           std::string(R"({"count":"99999999999999999999"})"),
           std::string(R"({"count":18446744073709551615})"),
           std::string(R"({"count":"0x10"})"),
           std::string(R"({"count":" 1"})"),
           std::string(R"({"count":true})"),
           std::string(R"({"more":"true"})"),
           std::string(R"({"header":"x"})"),
           std::string(R"({"header":{"revision":"-3"}})"),
           std::string(R"({"header":{"revision":{}}})"),
       }) {
    absl::StatusOr<EtcdRangeAnswer> a = ParseEtcdRange(body);
    EXPECT_FALSE(a.ok()) << body;
    EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << body;
  }
}

TEST(EtcdJsonTest, RefusesWhatIsTooLargeOrTooDeep) {
  std::string big_key =
      absl::StrCat(R"({"count":"1","kvs":[{"key":")", std::string((kMaxEtcdKey + 3) / 3 * 4, 'Q'),
                   R"(","create_revision":"1","mod_revision":"1"}]})");
  EXPECT_FALSE(ParseEtcdRange(big_key).ok());

  std::string many = R"({"count":"20000","kvs":[)";
  for (size_t i = 0; i <= kMaxEtcdEntries; ++i) {
    absl::StrAppend(&many, i ? "," : "",
                    R"({"key":"YQ==","create_revision":"1","mod_revision":"1"})");
  }
  many += "]}";
  absl::StatusOr<EtcdRangeAnswer> a = ParseEtcdRange(many);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("more than"), std::string::npos) << a.status();

  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(ParseEtcdRange(absl::StrCat(R"({"x":)", deep, "}")).ok());
  EXPECT_FALSE(ParseEtcdError(absl::StrCat(R"({"error":)", deep, "}")).has_value());

  std::string huge = absl::StrCat(R"({"x":")", std::string(kMaxEtcdResponseBody, 'a'), R"("})");
  a = ParseEtcdRange(huge);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("larger than"), std::string::npos) << a.status();
}

TEST(EtcdJsonTest, RefusesHostileLeasesAndTransactions) {
  EXPECT_FALSE(ParseEtcdLeaseGrant(R"({"ID":"0","TTL":"2"})").ok());
  EXPECT_FALSE(ParseEtcdLeaseGrant(R"({"ID":"5"})").ok());
  EXPECT_FALSE(ParseEtcdLeaseGrant(R"({"ID":"5","TTL":"-1"})").ok());
  absl::StatusOr<EtcdLeaseAnswer> refused =
      ParseEtcdLeaseGrant(R"({"ID":"5","TTL":"2","error":"lease already exists"})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lease already exists"), std::string::npos);

  EXPECT_FALSE(ParseEtcdKeepAlive("").ok());
  EXPECT_FALSE(ParseEtcdKeepAlive(R"({"ID":"5","TTL":"2"})").ok());  // not in "result"
  EXPECT_FALSE(ParseEtcdKeepAlive(R"({"result":[]})").ok());
  EXPECT_FALSE(
      ParseEtcdKeepAlive("{\"result\":{\"ID\":\"5\",\"TTL\":\"2\"}}\n{\"result\":{}}\n").ok());

  EXPECT_FALSE(ParseEtcdTxn(R"({"succeeded":"true"})").ok());
  EXPECT_FALSE(ParseEtcdTxn(R"({"succeeded":1})").ok());
  EXPECT_FALSE(ParseEtcdTxn(R"({"succeeded":true,"responses":{}})").ok());
  EXPECT_FALSE(ParseEtcdDeleteRange(R"({"deleted":"-1"})").ok());
  EXPECT_FALSE(ParseEtcdHeaderRevision("{").ok());
}

}  // namespace
}  // namespace airlock::providers
