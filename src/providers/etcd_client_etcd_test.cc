// EtcdClient and HostLease against a real etcd: Debian's etcd-server on loopback (installed by
// scripts/setup.sh), one member with its data in a temporary directory. Leases here are given
// etcd's smallest TTL (2 s with its default heartbeat and election timeout; it grants that when
// asked for less), so the tests that wait for one to expire take a few seconds each.
#include <gtest/gtest.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/providers/etcd_client.h"
#include "src/providers/host_lease.h"
#include "src/testing/etcd_server.h"
#include "src/testing/test_util.h"

namespace airlock::providers {
namespace {

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.running());
    absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(
        {.endpoints = {server_.Endpoint()}, .retry_delay = absl::Milliseconds(20)});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // Waits until key is gone (a lease's TTL, and etcd's check of expiries every 500 ms).
  bool GoneWithin(const std::string& key, absl::Duration limit) {
    absl::Time until = absl::Now() + limit;
    while (absl::Now() < until) {
      absl::StatusOr<std::optional<EtcdKeyValue>> got = client_->Get(key);
      if (got.ok() && !got->has_value()) return true;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return false;
  }

  std::unique_ptr<HostLease> Host(const std::string& id, int64_t ttl = 2) {
    absl::StatusOr<std::unique_ptr<HostLease>> host =
        HostLease::Start(client_.get(), {.prefix = "/fleet",
                                         .host_id = id,
                                         .ttl_seconds = ttl,
                                         .capacity_json = R"({"vcpus":8,"memory_mib":16384})"});
    EXPECT_TRUE(host.ok()) << host.status();
    return host.ok() ? std::move(*host) : nullptr;
  }

  testing::TempDir scratch_;
  testing::EtcdServer server_{AIRLOCK_ETCD, scratch_.File("etcd")};
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdTest, PutGetPrefixDelete) {
  EXPECT_FALSE(client_->Get("a/1")->has_value());
  std::string binary("v\0\xff\n", 4);
  ASSERT_TRUE(client_->Put("a/1", "one").ok());
  ASSERT_TRUE(client_->Put("a/2", binary).ok());
  ASSERT_TRUE(client_->Put("a/3", "").ok());
  ASSERT_TRUE(client_->Put("a0", "outside").ok());
  ASSERT_TRUE(client_->Put("a", "outside too").ok());

  absl::StatusOr<std::optional<EtcdKeyValue>> one = client_->Get("a/1");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ((*one)->value, "one");
  EXPECT_GT((*one)->mod_revision, 0);
  EXPECT_EQ((*one)->create_revision, (*one)->mod_revision);
  EXPECT_EQ((*one)->lease, 0);
  EXPECT_EQ((*client_->Get("a/2"))->value, binary);

  absl::StatusOr<std::vector<EtcdKeyValue>> all = client_->GetPrefix("a/", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].key, "a/1");
  EXPECT_EQ((*all)[1].key, "a/2");
  EXPECT_EQ((*all)[2].key, "a/3");
  EXPECT_EQ((*all)[2].value, "");
  absl::StatusOr<std::vector<EtcdKeyValue>> two = client_->GetPrefix("a/", 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->size(), 2u);

  ASSERT_TRUE(client_->Delete("a/1").ok());
  EXPECT_TRUE(client_->Delete("a/1").ok());  // gone already: fine
  EXPECT_FALSE(client_->Get("a/1")->has_value());
  EXPECT_EQ(client_->GetPrefix("a/", 100)->size(), 2u);
}

TEST_F(EtcdTest, PrefixReadsGoPastOnePage) {
  for (int i = 0; i < 1203; ++i) {
    ASSERT_TRUE(client_->Put(absl::StrCat("many/", 10000 + i), "x").ok());
  }
  absl::StatusOr<std::vector<EtcdKeyValue>> all = client_->GetPrefix("many/", kMaxEtcdEntries);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1203u);
  EXPECT_EQ(all->back().key, "many/11202");
  EXPECT_EQ(client_->GetPrefix("many/", 700)->size(), 700u);
}

TEST_F(EtcdTest, CreateIfAbsentOnlyOnce) {
  absl::StatusOr<bool> first = client_->CreateIfAbsent("once", "first");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  absl::StatusOr<bool> second = client_->CreateIfAbsent("once", "second");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);
  EXPECT_EQ((*client_->Get("once"))->value, "first");
}

TEST_F(EtcdTest, CompareAndSwapRefusesAStaleRevision) {
  ASSERT_TRUE(client_->Put("cas", "v1").ok());
  int64_t seen = (*client_->Get("cas"))->mod_revision;
  EXPECT_TRUE(*client_->CompareAndSwap("cas", seen, "v2"));
  // Another writer got there first: seen is stale now.
  EXPECT_FALSE(*client_->CompareAndSwap("cas", seen, "v3"));
  EXPECT_EQ((*client_->Get("cas"))->value, "v2");
  EXPECT_FALSE(*client_->CompareAndSwap("missing", seen, "v"));
  EXPECT_FALSE(client_->Get("missing")->has_value());

  int64_t now = (*client_->Get("cas"))->mod_revision;
  EXPECT_FALSE(*client_->DeleteIf("cas", seen));
  EXPECT_TRUE(client_->Get("cas")->has_value());
  EXPECT_TRUE(*client_->DeleteIf("cas", now));
  EXPECT_FALSE(client_->Get("cas")->has_value());
}

TEST_F(EtcdTest, PutWhileWritesOnlyWhileTheGuardHoldsItsValue) {
  ASSERT_TRUE(client_->Put("owner", "host-a").ok());
  EXPECT_TRUE(*client_->PutWhile("owner", "host-a", "index", "from a"));
  // Another host holds it now: a's late write is dropped.
  ASSERT_TRUE(client_->Put("owner", "host-b").ok());
  EXPECT_FALSE(*client_->PutWhile("owner", "host-a", "index", "stale, from a"));
  EXPECT_EQ((*client_->Get("index"))->value, "from a");
  // Nobody holds it: nobody's guarded write lands.
  ASSERT_TRUE(client_->Delete("owner").ok());
  EXPECT_FALSE(*client_->PutWhile("owner", "host-b", "index", "from b"));
  EXPECT_EQ((*client_->Get("index"))->value, "from a");
}

TEST_F(EtcdTest, ALeaseNotKeptAliveExpiresWithItsKeys) {
  absl::StatusOr<EtcdLease> lease = client_->GrantLease(1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ttl_seconds, 2) << "etcd's smallest TTL with its default timing";
  ASSERT_TRUE(client_->Put("leased/a", "x", lease->id).ok());
  EXPECT_TRUE(*client_->CreateIfAbsent("leased/b", "y", lease->id));
  EXPECT_EQ((*client_->Get("leased/a"))->lease, lease->id);
  absl::StatusOr<int64_t> left = client_->KeepAlive(lease->id);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(*left, 2);

  EXPECT_TRUE(GoneWithin("leased/a", absl::Seconds(6)));
  EXPECT_TRUE(client_->GetPrefix("leased/", 10)->empty());
  absl::StatusOr<int64_t> expired = client_->KeepAlive(lease->id);
  EXPECT_TRUE(absl::IsNotFound(expired.status())) << expired.status();
  absl::Status put = client_->Put("leased/c", "z", lease->id);
  EXPECT_TRUE(absl::IsNotFound(put)) << put;
  EXPECT_NE(put.message().find("requested lease not found"), std::string::npos) << put;
  EXPECT_TRUE(client_->RevokeLease(lease->id).ok());  // gone already: fine
}

TEST_F(EtcdTest, ARevokedLeaseTakesItsKeysAtOnce) {
  absl::StatusOr<EtcdLease> lease = client_->GrantLease(60);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("revoked", "x", lease->id).ok());
  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  EXPECT_FALSE(client_->Get("revoked")->has_value());
}

TEST_F(EtcdTest, OneOwnerPerSessionAndTakeoverAfterTheTtl) {
  std::unique_ptr<HostLease> a = Host("host-a");
  std::unique_ptr<HostLease> b = Host("host-b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*client_->Get("/fleet/hosts/host-a"))->value, R"({"vcpus":8,"memory_mib":16384})");

  absl::StatusOr<bool> claimed = a->ClaimSession("s1");
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_TRUE(*claimed);
  EXPECT_TRUE(*a->ClaimSession("s1"));  // already its own
  EXPECT_FALSE(*b->ClaimSession("s1"));
  EXPECT_EQ(*b->Owner("s1"), "host-a");

  // Past several TTLs, A's keepalive holds its claim.
  absl::SleepFor(absl::Seconds(5));
  EXPECT_FALSE(a->lost());
  EXPECT_FALSE(*b->ClaimSession("s1"));

  // A dies: nobody keeps its lease alive, nobody revokes it.
  a->Abandon();
  EXPECT_TRUE(GoneWithin(a->OwnerKey("s1"), absl::Seconds(6)));
  EXPECT_FALSE(client_->Get("/fleet/hosts/host-a")->has_value());
  EXPECT_TRUE(*b->ClaimSession("s1"));
  EXPECT_EQ(*b->Owner("s1"), "host-b");
  absl::StatusOr<bool> again = a->ClaimSession("s1");
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
}

TEST_F(EtcdTest, ReleaseAndCleanStop) {
  std::unique_ptr<HostLease> a = Host("host-a", 30);
  std::unique_ptr<HostLease> b = Host("host-b", 30);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(*a->ClaimSession("s1"));
  ASSERT_TRUE(*a->ClaimSession("s2"));
  EXPECT_TRUE(b->ReleaseSession("s1").ok());  // not B's: nothing happens
  EXPECT_EQ(*a->Owner("s1"), "host-a");
  ASSERT_TRUE(a->ReleaseSession("s1").ok());
  EXPECT_FALSE(a->Owner("s1")->has_value());
  EXPECT_TRUE(*b->ClaimSession("s1"));

  // A stops cleanly: its lease is revoked, so s2 is free at once, not after 30 s.
  a.reset();
  EXPECT_FALSE(b->Owner("s2")->has_value());
  EXPECT_TRUE(*b->ClaimSession("s2"));
}

TEST_F(EtcdTest, AHostIdInUseIsRefused) {
  std::unique_ptr<HostLease> a = Host("host-a");
  ASSERT_TRUE(a);
  absl::StatusOr<std::unique_ptr<HostLease>> twin =
      HostLease::Start(client_.get(), {.prefix = "/fleet", .host_id = "host-a"});
  EXPECT_TRUE(absl::IsFailedPrecondition(twin.status())) << twin.status();
  EXPECT_NE(twin.status().message().find("another airlockd uses the same id"), std::string::npos)
      << twin.status();
  absl::StatusOr<std::unique_ptr<HostLease>> bad =
      HostLease::Start(client_.get(), {.prefix = "/fleet", .host_id = "a/b"});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_TRUE(absl::IsInvalidArgument(a->ClaimSession("../x").status()));
}

TEST_F(EtcdTest, LosingTheLeaseIsReported) {
  std::atomic<int> calls{0};
  absl::StatusOr<std::unique_ptr<HostLease>> host =
      HostLease::Start(client_.get(), {.prefix = "/fleet",
                                       .host_id = "host-a",
                                       .ttl_seconds = 2,
                                       .on_lost = [&](const absl::Status&) { ++calls; }});
  ASSERT_TRUE(host.ok()) << host.status();
  // Someone (an operator, etcd's own recovery) ends the lease under the host.
  ASSERT_TRUE(client_->RevokeLease((*host)->lease_id()).ok());
  absl::Time until = absl::Now() + absl::Seconds(5);
  while (!(*host)->lost() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE((*host)->lost());
  EXPECT_EQ(calls.load(), 1);
  absl::StatusOr<bool> claim = (*host)->ClaimSession("s1");
  EXPECT_TRUE(absl::IsFailedPrecondition(claim.status())) << claim.status();
  EXPECT_NE(claim.status().message().find("lost its etcd lease"), std::string::npos)
      << claim.status();
}

TEST(EtcdUnreachableTest, SaysToStartEtcd) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(
      {.endpoints = {"http://127.0.0.1:1"}, .attempts = 2, .retry_delay = absl::Milliseconds(1)});
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::optional<EtcdKeyValue>> got = (*client)->Get("k");
  ASSERT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("cannot reach etcd at http://127.0.0.1:1"),
            std::string::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("is etcd running there?"), std::string::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("after 2 tries"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace airlock::providers
