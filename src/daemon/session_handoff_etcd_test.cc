// SessionHandoff between two hosts of one process: a blob store directory they share and a real
// etcd on loopback (Debian's etcd-server, as airlock_etcd_tests). What travels, what is refused
// (a record or a blob changed in the store, a host with another key), and who may resume.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/daemon/session_handoff.h"
#include "src/daemon/state_store_testing.h"
#include "src/image/image_store.h"
#include "src/providers/blob_store.h"
#include "src/providers/etcd_client.h"
#include "src/testing/etcd_server.h"
#include "src/testing/test_util.h"
#include "src/vm/snapshot.h"
#include "src/vm/snapshot_manifest.h"

namespace airlock {
namespace {

constexpr char kId[] = "0123456789ab";

class SessionHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.running()) << etcd_.Log();
    std::string tar = dir_.File("rootfs.tar");
    testing::WriteTar(tar, {{.name = "etc/os-release", .data = "ID=test\n"}});
    absl::StatusOr<ImageInfo> image =
        ImageStore(dir_.File("images-a")).ImportRootfsTar(tar, "base:1");
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = *image;
  }

  std::unique_ptr<SessionHandoff> Host(const std::string& id, const std::string& key) {
    auto blobs = providers::OpenBlobStore({.url = "file://" + dir_.File("blobs")});
    EXPECT_TRUE(blobs.ok()) << blobs.status();
    auto etcd = providers::EtcdClient::Create({.endpoints = {etcd_.Endpoint()}});
    EXPECT_TRUE(etcd.ok()) << etcd.status();
    auto handoff = SessionHandoff::Start(
        *std::move(blobs), *std::move(etcd),
        {.host_id = id, .ttl_seconds = 2, .generations_dir = dir_.File("generations-" + id)}, key);
    EXPECT_TRUE(handoff.ok()) << handoff.status();
    return handoff.ok() ? *std::move(handoff) : nullptr;
  }

  // A paused session's snapshot: a state file, a sparse disk, and their signed manifest.
  std::string Snapshot(const std::string& key) {
    std::string snapshot = dir_.File("a-snapshot");
    EXPECT_EQ(mkdir(snapshot.c_str(), 0700), 0);
    EXPECT_TRUE(WriteFileAtomically(snapshot + "/state", std::string(300000, 's'), 0600).ok());
    int fd = open((snapshot + "/disk.ext4").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_EQ(pwrite(fd, "data", 4, 64 << 20), 4);
    EXPECT_EQ(ftruncate(fd, 1 << 30), 0);
    close(fd);
    SnapshotManifest m;
    m.session_id = kId;
    m.image_digest = "sha256:00";
    m.vcpus = 1;
    m.memory_bytes = 512 << 20;
    for (const char* name : {"state", "disk.ext4"})
      m.files.push_back(*DescribeFile(snapshot, name));
    EXPECT_TRUE(WriteFileAtomically(snapshot + "/manifest.json", SignManifest(m, key), 0600).ok());
    return snapshot;
  }

  // The same record every call.
  SessionRecord Record() {
    SessionRecord s = NewSession(kId, Principal{1001, 1001});
    s.created_ms = s.last_used_ms = 1;
    s.egress = {{.rule = "pypi.org:443", .source = "create"}};
    s.image = image_.name;
    s.image_digest = image_.digest;
    return s;
  }

  testing::TempDir dir_;
  testing::EtcdServer etcd_{"/usr/bin/etcd", dir_.File("etcd")};
  std::string key_ = std::string(kHostKeyBytes, 'k');
  ImageInfo image_;  // host A's
};

TEST_F(SessionHandoffTest, APublishedSnapshotIsFetchedWholeOnAnotherHost) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(absl::IsNotFound(b->Find(kId).status()));
  std::string snapshot = Snapshot(key_);
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  absl::StatusOr<SessionHandoff::Published> published = b->Find(kId);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(published->host, "host-a");
  EXPECT_EQ(EncodeSessionRecord(published->record), EncodeSessionRecord(Record()));
  std::string fetched = dir_.File("b-snapshot");
  ASSERT_TRUE(b->Fetch(*published, fetched).ok());
  absl::StatusOr<SnapshotManifest> opened = OpenSnapshot(fetched, key_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  struct stat st;
  ASSERT_EQ(stat((fetched + "/disk.ext4").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 30);
  EXPECT_LT(st.st_blocks * 512, 1 << 20);  // only its data travelled, and it is sparse again
  // Published again (a fork's, a later pause's): blobs already stored are not stored twice.
  auto blobs = providers::OpenBlobStore({.url = "file://" + dir_.File("blobs")});
  size_t stored = (*blobs)->List()->size();
  EXPECT_EQ(stored, 5u);  // state, disk, manifest, the image's root filesystem and metadata
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  EXPECT_EQ((*blobs)->List()->size(), stored);

  // B has no such image: it installs A's from the store, under the same digest, byte for byte.
  ImageStore b_images(dir_.File("images-b"));
  EXPECT_TRUE(absl::IsNotFound(b_images.ResolveDigest("base:1", image_.digest).status()));
  ASSERT_TRUE(b->FetchImage(*published, b_images).ok());
  absl::StatusOr<ImageInfo> installed = b_images.ResolveDigest("base:1", image_.digest);
  ASSERT_TRUE(installed.ok()) << installed.status();
  EXPECT_EQ(*ReadFileToString(installed->rootfs_path, 64 << 20),
            *ReadFileToString(image_.rootfs_path, 64 << 20));
  EXPECT_EQ(installed->created, image_.created);

  // One host at a time: B claims it, A is told who runs it; released, A may.
  ASSERT_TRUE(b->Claim(kId).ok());
  absl::Status refused = a->Claim(kId);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("runs on host host-b"), std::string::npos) << refused;
  ASSERT_TRUE(b->Release(kId).ok());
  EXPECT_TRUE(a->Claim(kId).ok());
  // Hosts lists both, with the session under A.
  absl::StatusOr<std::vector<SessionHandoff::HostInfo>> hosts = b->Hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].id, "host-a");
  EXPECT_EQ((*hosts)[0].sessions, std::vector<std::string>{kId});
  EXPECT_TRUE((*hosts)[1].sessions.empty());
  // Forgotten (removed): nothing to resume anywhere.
  ASSERT_TRUE(a->Forget(kId).ok());
  EXPECT_TRUE(absl::IsNotFound(b->Find(kId).status()));

  // A later run of airlockd publishing the same image does not hash its root filesystem again.
  auto again = Host("host-a-again", key_);
  ASSERT_TRUE(again);
  uint64_t hashed = SnapshotBytesHashed();
  ASSERT_TRUE(again->Publish(Record(), snapshot, image_).ok());
  EXPECT_EQ(SnapshotBytesHashed(), hashed);
}

// A session's volumes are published with it: each disk under its digest, fetched whole and
// sparse on another host, refused when its blob was changed, and named for the collection.
TEST_F(SessionHandoffTest, TheVolumesOfAPublishedSessionTravelWithIt) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  ASSERT_TRUE(a && b);
  std::string snapshot = Snapshot(key_);
  std::string disk = dir_.File("volume.ext4");
  int fd = open(disk.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_EQ(pwrite(fd, "volume data", 11, 4096), 11);
  EXPECT_EQ(ftruncate(fd, 1ll << 40), 0);
  close(fd);
  SessionRecord record = Record();
  record.volumes = {{.volume_id = "00112233445566ff", .name = "data", .path = "/data"}};
  // A publishing must be given every volume the session attaches.
  EXPECT_FALSE(a->Publish(record, snapshot, image_).ok());
  ASSERT_TRUE(a->Publish(record, snapshot, image_, {{.path = disk, .size_bytes = 64 << 20}}).ok());
  absl::StatusOr<SessionHandoff::Published> published = b->Find(kId);
  ASSERT_TRUE(published.ok()) << published.status();
  ASSERT_EQ(published->volumes.size(), 1u);
  EXPECT_EQ(published->volumes[0].size_bytes, 64u << 20);
  EXPECT_FALSE(published->volumes[0].snapshot);
  std::string fetched = dir_.File("fetched.ext4");
  ASSERT_TRUE(b->FetchVolume(*published, 0, fetched).ok());
  struct stat st;
  ASSERT_EQ(stat(fetched.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1ll << 40);
  EXPECT_LT(st.st_blocks * 512, 1 << 20);
  char got[11];
  fd = open(fetched.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(pread(fd, got, sizeof got, 4096), 11);
  close(fd);
  EXPECT_EQ(std::string(got, 11), "volume data");
  // The collection keeps its blob: no record-less blob is marked.
  absl::StatusOr<SessionHandoff::BlobCollection> gc = a->CollectBlobs(absl::Hours(1), true);
  ASSERT_TRUE(gc.ok()) << gc.status();
  EXPECT_TRUE(gc->marked.empty()) << gc->marked.front();
  // A changed blob is refused, and nothing is left where it was to go.
  std::string hex = published->volumes[0].digest.substr(strlen("sha256:"));
  std::string blob = dir_.File(absl::StrCat("blobs/sha256/", hex.substr(0, 2), "/", hex));
  std::string packed = *ReadFileToString(blob, 1 << 20);
  size_t at = packed.find("volume data");
  ASSERT_NE(at, std::string::npos);
  fd = open(blob.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_EQ(pwrite(fd, "V", 1, static_cast<off_t>(at)), 1);
  close(fd);
  std::string refused = dir_.File("refused.ext4");
  absl::Status fetch = b->FetchVolume(*published, 0, refused);
  EXPECT_TRUE(absl::IsDataLoss(fetch)) << fetch;
  EXPECT_NE(access(refused.c_str(), F_OK), 0);
}

TEST_F(SessionHandoffTest, ARecordOrBlobChangedInTheStoresOrSignedWithAnotherKeyIsRefused) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  auto stranger = Host("host-c", std::string(kHostKeyBytes, 'x'));
  ASSERT_TRUE(a && b && stranger);
  std::string snapshot = Snapshot(key_);
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  absl::Status other_key = stranger->Find(kId).status();
  EXPECT_TRUE(absl::IsDataLoss(other_key)) << other_key;
  EXPECT_NE(other_key.message().find("host.key"), std::string::npos) << other_key;

  // The record, changed in etcd (another tenant's session, say).
  auto etcd = providers::EtcdClient::Create({.endpoints = {etcd_.Endpoint()}});
  std::string key = absl::StrCat("/airlock/sessions/", kId, "/snapshot");
  std::string value = (*(*etcd)->Get(key))->value;
  std::string changed = value;
  changed.replace(changed.find("uid:1001"), 8, "uid:1002");
  ASSERT_TRUE((*etcd)->Put(key, changed).ok());
  EXPECT_TRUE(absl::IsDataLoss(b->Find(kId).status()));
  ASSERT_TRUE((*etcd)->Put(key, value).ok());

  // A blob changed in the store: the fetch fails, and what was there stays.
  absl::StatusOr<SessionHandoff::Published> published = b->Find(kId);
  ASSERT_TRUE(published.ok()) << published.status();
  std::string fetched = dir_.File("b-snapshot");
  ASSERT_EQ(mkdir(fetched.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFileAtomically(fetched + "/kept", "x", 0600).ok());
  absl::StatusOr<SnapshotFile> state = DescribeFile(snapshot, "state");
  std::string hex = state->sha256;
  std::string blob = dir_.File(absl::StrCat("blobs/sha256/", hex.substr(0, 2), "/", hex));
  int fd = open(blob.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << blob;
  ASSERT_EQ(pwrite(fd, "S", 1, 5000), 1);
  close(fd);
  absl::Status fetch = b->Fetch(*published, fetched);
  EXPECT_TRUE(absl::IsDataLoss(fetch)) << fetch;
  EXPECT_TRUE(ReadFileToString(fetched + "/kept", 16).ok());
  EXPECT_NE(access((fetched + ".fetch").c_str(), F_OK), 0);
}

TEST_F(SessionHandoffTest, TheIndexHoldsWhatTheHolderWroteLastAndNothingForged) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  ASSERT_TRUE(a && b);
  SessionRecord s = Record();
  s.state = SessionState::kRunning;
  ASSERT_TRUE(a->Claim(kId).ok());
  ASSERT_TRUE(a->Index(s).ok());
  absl::StatusOr<std::vector<SessionHandoff::IndexEntry>> seen = b->ReadIndex(s.tenant);
  ASSERT_TRUE(seen.ok()) << seen.status();
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ((*seen)[0].host, "host-a");
  EXPECT_EQ((*seen)[0].record.state, SessionState::kRunning);
  EXPECT_EQ((*seen)[0].record.egress.size(), 1u);
  EXPECT_TRUE(b->ReadIndex("uid:1002")->empty());  // another tenant's view
  EXPECT_EQ(b->ReadIndex("")->size(), 1u);         // every tenant's

  // Paused on A, taken over by B: A's late write changes nothing, nor does its removal.
  s.state = SessionState::kPaused;
  s.reason = "paused by uid:1001";
  ASSERT_TRUE(a->Index(s).ok());
  ASSERT_TRUE(a->Release(kId).ok());
  ASSERT_TRUE(b->Claim(kId).ok());
  s.state = SessionState::kRunning;
  s.reason.clear();
  ASSERT_TRUE(b->Index(s).ok());
  SessionRecord stale = s;
  stale.state = SessionState::kPaused;
  ASSERT_TRUE(a->Index(stale).ok());
  ASSERT_TRUE(a->Unindex(s.tenant, kId).ok());
  absl::StatusOr<SessionHandoff::IndexEntry> one = a->ReadIndex(s.tenant, kId);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->host, "host-b");
  EXPECT_EQ(one->record.state, SessionState::kRunning);
  EXPECT_TRUE(absl::IsNotFound(a->ReadIndex("uid:1002", kId).status()));

  // An entry changed in etcd is left out of lists and refused by id.
  auto etcd = providers::EtcdClient::Create({.endpoints = {etcd_.Endpoint()}});
  std::string key = absl::StrCat("/airlock/index/", "7569643a31303031/", kId);  // "uid:1001"
  absl::StatusOr<std::optional<providers::EtcdKeyValue>> kv = (*etcd)->Get(key);
  ASSERT_TRUE(kv.ok() && kv->has_value()) << key;
  std::string changed = (*kv)->value;
  changed.replace(changed.find("running"), 7, "stopped");
  ASSERT_TRUE((*etcd)->Put(key, changed).ok());
  EXPECT_TRUE(a->ReadIndex(s.tenant)->empty());
  EXPECT_TRUE(absl::IsDataLoss(a->ReadIndex(s.tenant, kId).status()));
  // Copied under another tenant's key, a true entry is not that tenant's.
  ASSERT_TRUE((*etcd)->Put(key, (*kv)->value).ok());
  ASSERT_TRUE(
      (*etcd)->Put("/airlock/index/7569643a31303032/" + std::string(kId), (*kv)->value).ok());
  EXPECT_EQ(a->ReadIndex("")->size(), 1u);
  EXPECT_TRUE(absl::IsDataLoss(a->ReadIndex("uid:1002", kId).status()));

  // Removed by its holder: gone.
  ASSERT_TRUE(b->Unindex(s.tenant, kId).ok());
  EXPECT_TRUE(absl::IsNotFound(a->ReadIndex(s.tenant, kId).status()));
}

// A signed record put back in etcd after a newer one is refused by every host that saw the
// newer one (wrote it or read it), and one of a removed session by the host that removed it.
TEST_F(SessionHandoffTest, AnOlderSignedRecordPutBackIsRefusedByHostsThatSawANewerOne) {
  auto a = Host("host-a", key_), b = Host("host-b", key_), c = Host("host-c", key_);
  ASSERT_TRUE(a && b && c);
  std::string snapshot = Snapshot(key_);
  auto etcd = providers::EtcdClient::Create({.endpoints = {etcd_.Endpoint()}});
  std::string key = absl::StrCat("/airlock/sessions/", kId, "/snapshot");
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  std::string first = (*(*etcd)->Get(key))->value;
  EXPECT_EQ(b->Find(kId)->generation, 1u);  // B read the first
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  EXPECT_EQ(b->Find(kId)->generation, 2u);
  std::string second = (*(*etcd)->Get(key))->value;

  ASSERT_TRUE((*etcd)->Put(key, first).ok());
  for (SessionHandoff* host : {a.get(), b.get()}) {
    absl::Status refused = host->Find(kId).status();
    EXPECT_TRUE(absl::IsDataLoss(refused)) << refused;
    EXPECT_NE(refused.message().find("older than the one this host saw (generation 1, this host "
                                     "saw 2)"),
              std::string::npos)
        << refused;
  }
  // A host that never saw the newer one cannot tell (the limit SECURITY.md states).
  EXPECT_EQ(c->Find(kId)->generation, 1u);
  ASSERT_TRUE((*etcd)->Put(key, second).ok());
  EXPECT_EQ(b->Find(kId)->generation, 2u);
  EXPECT_EQ(c->Find(kId)->generation, 2u);
  // The next publishing, by whichever host, is newer than all.
  ASSERT_TRUE(b->Publish(Record(), snapshot, image_).ok());
  EXPECT_EQ(a->Find(kId)->generation, 3u);

  // Removed: its last record put back is refused where it was removed.
  std::string last = (*(*etcd)->Get(key))->value;
  ASSERT_TRUE(b->Forget(kId).ok());
  ASSERT_TRUE((*etcd)->Put(key, last).ok());
  EXPECT_TRUE(absl::IsDataLoss(b->Find(kId).status()));
}

// The index the same way: an entry written before the session's latest publishing, put back
// after, is left out by the hosts that saw that publishing, and refused by id.
TEST_F(SessionHandoffTest, AnOlderIndexEntryPutBackIsLeftOutByHostsThatSawANewerRecord) {
  auto a = Host("host-a", key_), b = Host("host-b", key_), c = Host("host-c", key_);
  ASSERT_TRUE(a && b && c);
  std::string snapshot = Snapshot(key_);
  auto etcd = providers::EtcdClient::Create({.endpoints = {etcd_.Endpoint()}});
  std::string key = absl::StrCat("/airlock/index/", "7569643a31303031/", kId);  // "uid:1001"
  SessionRecord s = Record();
  s.state = SessionState::kRunning;
  ASSERT_TRUE(a->Claim(kId).ok());
  ASSERT_TRUE(a->Index(s).ok());
  std::string running = (*(*etcd)->Get(key))->value;
  EXPECT_EQ(b->ReadIndex(s.tenant, kId)->generation, 0u);
  // Paused and published (generation 1), then taken over by B, which reads it.
  s.state = SessionState::kPaused;
  ASSERT_TRUE(a->Publish(s, snapshot, image_).ok());
  ASSERT_TRUE(a->Index(s).ok());
  ASSERT_TRUE(a->Release(kId).ok());
  EXPECT_EQ(b->Find(kId)->generation, 1u);
  ASSERT_TRUE(b->Claim(kId).ok());
  s.state = SessionState::kRunning;
  ASSERT_TRUE(b->Index(s).ok());
  absl::StatusOr<SessionHandoff::IndexEntry> now = c->ReadIndex(s.tenant, kId);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->host, "host-b");
  EXPECT_EQ(now->generation, 1u);

  // A's first entry put back: A and B saw generation 1 and leave it out; C cannot tell.
  ASSERT_TRUE((*etcd)->Put(key, running).ok());
  for (SessionHandoff* host : {a.get(), b.get()}) {
    EXPECT_TRUE(host->ReadIndex(s.tenant)->empty());
    absl::Status refused = host->ReadIndex(s.tenant, kId).status();
    EXPECT_TRUE(absl::IsDataLoss(refused)) << refused;
    EXPECT_NE(refused.message().find("older than the session this host saw (generation 0, this "
                                     "host saw 1)"),
              std::string::npos)
        << refused;
  }
  EXPECT_EQ(c->ReadIndex(s.tenant, kId)->host, "host-a");
  // The holder's next write puts it right.
  ASSERT_TRUE(b->Index(s).ok());
  EXPECT_EQ(a->ReadIndex(s.tenant, kId)->host, "host-b");
}

// A host whose VM of a session ran on while it was away claims it back only if no other host
// published the session since: one that took it over, ran it and paused it is newer.
TEST_F(SessionHandoffTest, AHostThatWasAwayClaimsItsSessionBackOnlyIfNobodyPublishedItSince) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  ASSERT_TRUE(a && b);
  std::string snapshot = Snapshot(key_);
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  EXPECT_TRUE(a->ClaimAsItWas(kId).ok());  // nobody published since
  ASSERT_TRUE(a->Release(kId).ok());
  ASSERT_TRUE(b->Claim(kId).ok());
  ASSERT_TRUE(b->Find(kId).ok());
  ASSERT_TRUE(b->Publish(Record(), snapshot, image_).ok());
  ASSERT_TRUE(b->Release(kId).ok());
  absl::Status behind = a->ClaimAsItWas(kId);
  EXPECT_TRUE(absl::IsFailedPrecondition(behind)) << behind;
  EXPECT_NE(behind.message().find("taken over by host host-b"), std::string::npos) << behind;
  EXPECT_TRUE(b->Claim(kId).ok());  // given up again
}

TEST_F(SessionHandoffTest, ADrainMarkIsSeenByEveryHostAndOutlivesTheHost) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->SetDraining("host-b", true, "root").ok());
  EXPECT_TRUE(*b->Draining("host-b"));
  EXPECT_FALSE(*b->Draining("host-a"));
  // A host that is down is listed while it is drained.
  ASSERT_TRUE(a->SetDraining("host-gone", true, "root").ok());
  absl::StatusOr<std::vector<SessionHandoff::HostInfo>> hosts = b->Hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  std::map<std::string, std::pair<bool, bool>> seen;  // draining, up
  for (const SessionHandoff::HostInfo& h : *hosts) seen[h.id] = {h.draining, h.up};
  EXPECT_EQ(seen["host-a"], std::make_pair(false, true));
  EXPECT_EQ(seen["host-b"], std::make_pair(true, true));
  EXPECT_EQ(seen["host-gone"], std::make_pair(true, false));
  b.reset();  // its lease goes; the mark stays
  EXPECT_TRUE(*a->Draining("host-b"));
  ASSERT_TRUE(a->SetDraining("host-b", false, "root").ok());
  EXPECT_FALSE(*a->Draining("host-b"));
}

// Blobs no published record names are marked by one collection and removed by a later one past
// the grace; what a record names, or a pause is uploading, is kept; a removal in progress holds
// a publishing back until it has ended; a record that cannot be verified stops the collection.
TEST_F(SessionHandoffTest, CollectionRemovesOnlyBlobsNoRecordNamesPastTheGrace) {
  auto a = Host("host-a", key_), b = Host("host-b", key_);
  ASSERT_TRUE(a && b);
  auto store = providers::OpenBlobStore({.url = "file://" + dir_.File("blobs")});
  ASSERT_TRUE(store.ok());
  auto etcd = providers::EtcdClient::Create({.endpoints = {etcd_.Endpoint()}});
  ASSERT_TRUE(etcd.ok());
  auto put_blob = [&](const std::string& bytes) {
    std::string digest = "sha256:" + Sha256Hex(bytes);
    std::string path = dir_.File("blob-" + Sha256Hex(bytes));
    EXPECT_TRUE(WriteFileAtomically(path, bytes, 0600).ok());
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_TRUE((*store)->Put(digest, fd, bytes.size()).ok());
    close(fd);
    return digest;
  };
  std::string snapshot = Snapshot(key_);
  ASSERT_TRUE(a->Publish(Record(), snapshot, image_).ok());
  std::string stray = put_blob("left by a pause that failed");

  // A dry run changes nothing; a run marks the stray blob only; within the grace it stays.
  absl::StatusOr<SessionHandoff::BlobCollection> run = b->CollectBlobs(absl::Hours(1), true);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->blobs, 6u);
  EXPECT_EQ(run->referenced, 5u);
  EXPECT_EQ(run->records, 1u);
  EXPECT_EQ(run->marked, std::vector<std::string>{stray});
  run = b->CollectBlobs(absl::Hours(1), false);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->marked, std::vector<std::string>{stray});  // the dry run marked nothing
  run = a->CollectBlobs(absl::Hours(1), false);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->marked.empty());
  EXPECT_EQ(run->waiting, 1u);
  EXPECT_TRUE(run->removed.empty());
  EXPECT_TRUE((*store)->Stat(stray).ok());

  // Past the grace, but a pause is uploading it (pinned): kept. Unpinned: removed.
  std::string pin = "/airlock/blob-pins/" + stray + "/host-c-1";
  ASSERT_TRUE((*etcd)->Put(pin, "host-c").ok());
  run = a->CollectBlobs(absl::ZeroDuration(), false);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->pinned, 1u);
  EXPECT_TRUE(run->removed.empty());
  ASSERT_TRUE((*etcd)->Delete(pin).ok());
  run = a->CollectBlobs(absl::ZeroDuration(), false);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->removed.size(), 1u);
  EXPECT_EQ(run->removed[0].digest, stray);
  EXPECT_EQ(run->removed[0].bytes, 27u);
  EXPECT_TRUE(absl::IsNotFound((*store)->Stat(stray).status()));
  EXPECT_EQ((*store)->List()->size(), 5u);  // the published session's, all there

  // One collector at a time.
  ASSERT_TRUE((*etcd)->Put("/airlock/blob-gc/lock", "host-c").ok());
  absl::Status busy = a->CollectBlobs(absl::ZeroDuration(), false).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(busy)) << busy;
  EXPECT_NE(busy.message().find("a blob collection runs now (host-c)"), std::string::npos) << busy;
  ASSERT_TRUE((*etcd)->Delete("/airlock/blob-gc/lock").ok());

  // A publishing that finds a blob it needs being removed waits for the removal to end, and
  // then uploads it again.
  ASSERT_TRUE(a->Forget(kId).ok());
  ASSERT_TRUE(a->CollectBlobs(absl::ZeroDuration(), false).ok());  // marks all five
  std::vector<std::string> all = *(*store)->List();
  ASSERT_EQ(all.size(), 5u);
  std::string removing = "/airlock/blob-gc/removing/" + all[0];
  ASSERT_TRUE((*etcd)->Put(removing, "host-c").ok());
  ASSERT_TRUE((*store)->Delete(all[0]).ok());
  std::atomic<bool> removal_ended = false;
  std::thread remover([&] {
    absl::SleepFor(absl::Milliseconds(500));
    removal_ended = true;
    EXPECT_TRUE((*etcd)->Delete(removing).ok());
  });
  ASSERT_TRUE(b->Publish(Record(), snapshot, image_).ok());
  EXPECT_TRUE(removal_ended);  // it waited
  remover.join();
  EXPECT_EQ(*(*store)->List(), all);                   // and sent the removed one again
  run = a->CollectBlobs(absl::ZeroDuration(), false);  // named again: the marks go
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->referenced, 5u);
  EXPECT_TRUE(run->removed.empty());
  EXPECT_TRUE((*etcd)->GetPrefix("/airlock/blob-gc/marks/", 100)->empty());
  EXPECT_TRUE((*etcd)->GetPrefix("/airlock/blob-pins/", 100)->empty());  // unpinned

  // A record that cannot be verified: nothing is removed, and the error says what to do.
  ASSERT_TRUE((*etcd)->Put("/airlock/sessions/0123456789ac/snapshot", "forged").ok());
  ASSERT_TRUE(b->Forget(kId).ok());
  ASSERT_TRUE(a->CollectBlobs(absl::ZeroDuration(), false).status().code() ==
              absl::StatusCode::kDataLoss);
  absl::Status refused = a->CollectBlobs(absl::ZeroDuration(), false).status();
  EXPECT_TRUE(absl::IsDataLoss(refused)) << refused;
  EXPECT_NE(refused.message().find("airlock rm 0123456789ac"), std::string::npos) << refused;
  EXPECT_EQ((*store)->List()->size(), 5u);
  // Removed, they go: marked by one run, removed by the next.
  ASSERT_TRUE((*etcd)->Delete("/airlock/sessions/0123456789ac/snapshot").ok());
  ASSERT_TRUE(a->CollectBlobs(absl::ZeroDuration(), false).ok());
  run = a->CollectBlobs(absl::ZeroDuration(), false);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->removed.size(), 5u);
  EXPECT_TRUE((*store)->List()->empty());
}

}  // namespace
}  // namespace airlock
