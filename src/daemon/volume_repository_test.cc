#include "src/daemon/volume_repository.h"

#include <gtest/gtest.h>

#include <memory>

#include "src/daemon/quota_admission.h"
#include "src/daemon/state_store.h"
#include "src/daemon/state_store_testing.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

struct Fixture {
  Fixture() {
    auto opened = StateStore::Open(dir.File("state.db"), 1 << 20);
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
  }
  VolumeRecord Volume(const std::string& id, const std::string& name, bool read_only = false) {
    VolumeRecord v{.id = id,
                   .tenant = alice.Tenant(),
                   .name = name,
                   .size_bytes = 1 << 30,
                   .read_only = read_only,
                   .created_ms = 1};
    EXPECT_TRUE(store->volumes().Create(alice, v, "volume.create", "ok").ok());
    return v;
  }
  absl::Status Attach(const std::string& session, const VolumeRecord& v, bool read_only) {
    SessionRecord s = NewSession(session, alice);
    s.volumes.push_back(
        {.volume_id = v.id, .name = v.name, .path = "/data", .read_only = read_only});
    return store->sessions().Create(alice, s);
  }
  testing::TempDir dir;
  std::unique_ptr<StateStore> store;
  Principal alice{1001, 1001};
};

TEST(VolumeRepositoryTest, OneWriterOrAnyReadersDecidedWithTheSessionsInsert) {
  Fixture f;
  VolumeRecord data = f.Volume("00000000000000aa", "data");
  ASSERT_TRUE(f.Attach("aaaaaaaaaaa1", data, /*read_only=*/false).ok());
  absl::Status second = f.Attach("aaaaaaaaaaa2", data, false);
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.message().find("session aaaaaaaaaaa1 (creating, read-write)"), std::string::npos)
      << second;
  EXPECT_EQ(f.Attach("aaaaaaaaaaa3", data, true).code(), absl::StatusCode::kFailedPrecondition);
  // The writer gone (stopped), readers share it, and a writer is refused while they read.
  ASSERT_TRUE(f.store->sessions()
                  .SetState(f.alice, f.alice.Tenant(), "aaaaaaaaaaa1", SessionState::kStopped, "",
                            0, "session.remove")
                  .ok());
  ASSERT_TRUE(f.Attach("aaaaaaaaaaa4", data, true).ok());
  ASSERT_TRUE(f.Attach("aaaaaaaaaaa5", data, true).ok());
  EXPECT_EQ(f.Attach("aaaaaaaaaaa6", data, false).code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<VolumeRecord> got = f.store->volumes().Get(f.alice.Tenant(), "data");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->holders, (std::vector<std::string>{"aaaaaaaaaaa4", "aaaaaaaaaaa5"}));
  EXPECT_FALSE(got->held_read_write);
  // A paused reader still holds it; a failed one does not.
  ASSERT_TRUE(f.store->sessions()
                  .SetState(f.alice, f.alice.Tenant(), "aaaaaaaaaaa4", SessionState::kPaused, "", 0,
                            "session.pause")
                  .ok());
  ASSERT_TRUE(f.store->sessions()
                  .SetState(f.alice, f.alice.Tenant(), "aaaaaaaaaaa5", SessionState::kFailed, "", 0,
                            "session.fail")
                  .ok());
  absl::Status removed = f.store->volumes().Remove(f.alice, f.alice.Tenant(), "data").status();
  EXPECT_EQ(removed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(removed.message().find("session aaaaaaaaaaa4 (paused, read-only)"), std::string::npos)
      << removed;
  // Another tenant's session cannot name it: to that tenant there is no such volume.
  Principal bob{1002, 1002};
  SessionRecord theirs = NewSession("bbbbbbbbbbb1", bob);
  theirs.volumes.push_back({.volume_id = data.id, .name = "data", .path = "/d"});
  EXPECT_TRUE(absl::IsNotFound(f.store->sessions().Create(bob, theirs)));
}

TEST(VolumeRepositoryTest, ASnapshotIsAttachedReadOnlyAndBusyVolumesAreNotAttached) {
  Fixture f;
  VolumeRecord snap = f.Volume("00000000000000bb", "data@v1", /*read_only=*/true);
  absl::Status rw = f.Attach("aaaaaaaaaaa1", snap, false);
  EXPECT_EQ(rw.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(rw.message().find("data@v1:/data:ro"), std::string::npos) << rw;
  EXPECT_TRUE(f.Attach("aaaaaaaaaaa2", snap, true).ok());

  VolumeRecord data = f.Volume("00000000000000cc", "data");
  absl::StatusOr<VolumeRecord> marked =
      f.store->volumes().Mark(f.alice.Tenant(), "data", "import", false);
  ASSERT_TRUE(marked.ok()) << marked.status();
  absl::Status busy = f.Attach("aaaaaaaaaaa3", data, true);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.message().find("busy (import under way)"), std::string::npos) << busy;
  EXPECT_FALSE(f.store->volumes().Mark(f.alice.Tenant(), "data", "snapshot", true).ok());
  ASSERT_TRUE(f.store->volumes().Unmark(f.alice, *marked, true, "volume.import", "ok").ok());
  EXPECT_EQ(f.store->volumes().Get(f.alice.Tenant(), "data")->generation, 1);
  ASSERT_TRUE(f.Attach("aaaaaaaaaaa3", data, true).ok());
  // A snapshot only waits for writers; an import for any holder.
  EXPECT_TRUE(f.store->volumes().Mark(f.alice.Tenant(), "data", "snapshot", true).ok());
  ASSERT_TRUE(f.store->volumes().ClearBusy().ok());
  EXPECT_FALSE(f.store->volumes().Mark(f.alice.Tenant(), "data", "import", false).ok());
}

TEST(VolumeRepositoryTest, AttachmentsAndNamesAreCheckedAndKeptExactly) {
  std::vector<VolumeAttachment> volumes = {
      {.volume_id = "0123456789abcdef", .name = "data", .path = "/data", .generation = 3},
      {.volume_id = "fedcba9876543210", .name = "m@v1", .path = "/a b\tc", .read_only = true}};
  EXPECT_EQ(DecodeVolumeAttachments(EncodeVolumeAttachments(volumes)), volumes);
  EXPECT_TRUE(DecodeVolumeAttachments("").empty());
  SessionRecord s = NewSession("aaaaaaaaaaa1", Principal{1, 1});
  s.volumes = volumes;
  absl::StatusOr<SessionRecord> back = DecodeSessionRecord(EncodeSessionRecord(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->volumes, volumes);
  for (const char* ok : {"data", "pip-cache", "a.b_c", "0"}) {
    EXPECT_TRUE(CheckVolumeName(ok).ok()) << ok;
  }
  for (const std::string& bad :
       {std::string(), std::string("Data"), std::string("-x"), std::string(".x"),
        std::string("a/b"), std::string("a@b"), std::string("a b"), std::string(64, 'a')}) {
    EXPECT_FALSE(CheckVolumeName(bad).ok()) << bad;
  }
  EXPECT_TRUE(CheckVolumeName("data@v1", true).ok());
  EXPECT_FALSE(CheckVolumeName("data", true).ok());
  EXPECT_FALSE(CheckVolumeName("data@", true).ok());
}

TEST(VolumeRepositoryTest, VolumesCountAgainstTheDiskQuota) {
  Fixture f;
  f.Volume("00000000000000dd", "big");  // 1 GiB
  absl::StatusOr<Quotas> quotas = Quotas::Parse("default disk=1536m\n");
  ASSERT_TRUE(quotas.ok()) << quotas.status();
  QuotaAdmission admission(
      *quotas, f.store.get(), [](const std::string&) { return 0; },
      std::make_shared<net::ConnectionLedger>(1000));
  EXPECT_EQ(admission.UsageOf(f.alice.Tenant()).disk_bytes, 1ull << 30);
  absl::StatusOr<QuotaReservations::Hold> hold =
      admission.Admit(f.alice, f.alice.Tenant(), {.disk_bytes = 1ull << 30}, "volume.create more");
  ASSERT_FALSE(hold.ok());
  EXPECT_EQ(hold.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(hold.status().message().find("disk quota"), std::string::npos) << hold.status();
}

}  // namespace
}  // namespace airlock
