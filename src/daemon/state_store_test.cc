#include "src/daemon/state_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "src/daemon/state_store_testing.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

TEST(StateStoreTest, SessionsAreScopedByTenantAndAudited) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  struct stat st;
  ASSERT_EQ(stat(dir.File("state.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Principal alice{1001, 1001}, bob{1002, 1002};
  ASSERT_TRUE((*store)->sessions().Create(alice, NewSession("s-a", alice)).ok());
  ASSERT_TRUE((*store)->sessions().Create(bob, NewSession("s-b", bob)).ok());
  EXPECT_EQ((*store)->sessions().List(alice.Tenant())->size(), 1u);
  EXPECT_TRUE((*store)->sessions().Get(alice.Tenant(), "s-a").ok());
  EXPECT_TRUE(absl::IsNotFound((*store)->sessions().Get(alice.Tenant(), "s-b").status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->sessions().SetState(alice, alice.Tenant(), "s-b",
                                                             SessionState::kStopped, "", 0, "rm")));
  ASSERT_TRUE(
      (*store)
          ->sessions()
          .SetState(alice, alice.Tenant(), "s-a", SessionState::kRunning, "", 42, "session.boot")
          .ok());
  EXPECT_EQ((*store)->sessions().Get(alice.Tenant(), "s-a")->pid, 42);
  auto audit = (*store)->audit().ForTenant(alice.Tenant());
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].action, "session.create");
  EXPECT_EQ((*audit)[0].principal, "uid:1001/gid:1001");
  EXPECT_EQ((*audit)[1].outcome, "running");
  // Alice asked for bob's session: not found for her, and on bob's record, once for many asks.
  for (int i = 0; i < 5; ++i) (*store)->sessions().Get(alice.Tenant(), "s-b").IgnoreError();
  auto bobs = (*store)->audit().ForTenant(bob.Tenant());
  ASSERT_TRUE(bobs.ok());
  ASSERT_EQ(bobs->size(), 2u);
  EXPECT_EQ((*bobs)[1].action, "session.lookup");
  EXPECT_EQ((*bobs)[1].principal, "uid:1001");
  EXPECT_EQ((*bobs)[1].target, "s-b");
  EXPECT_NE((*bobs)[1].outcome.find("denied"), std::string::npos);
  // A session nobody has is just not found.
  EXPECT_TRUE(absl::IsNotFound((*store)->sessions().Get(alice.Tenant(), "s-none").status()));
  EXPECT_EQ((*store)->audit().ForTenant(alice.Tenant())->size(), 2u);
}

TEST(StateStoreTest, ExposuresHaveTokensAreAuditedAndEndWithTheirSession) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  Principal alice{1001, 1001};
  ASSERT_TRUE((*store)->sessions().Create(alice, NewSession("s-a", alice)).ok());
  ExposureRepository& exposures = (*store)->exposures();
  absl::StatusOr<Exposure> first = exposures.Put(alice, alice.Tenant(), "s-a", 8000, false);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->token.size(), 32u);
  // Again: a new token replaces the old one.
  absl::StatusOr<Exposure> again = exposures.Put(alice, alice.Tenant(), "s-a", 8000, false);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->token, first->token);
  ASSERT_TRUE(exposures.Put(alice, alice.Tenant(), "s-a", 3000, true).ok());
  auto found = exposures.Find("s-a", 8000);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->token, again->token);
  EXPECT_EQ((*found)->tenant, alice.Tenant());
  auto listed = exposures.List(alice.Tenant(), "s-a");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].port, 3000);
  EXPECT_TRUE((*listed)[0].is_public);
  EXPECT_EQ((*listed)[0].token, "");
  EXPECT_TRUE(exposures.List("uid:1002", "s-a")->empty());
  EXPECT_TRUE(absl::IsNotFound(exposures.Remove(alice, "uid:1002", "s-a", 3000)));
  ASSERT_TRUE(exposures.Remove(alice, alice.Tenant(), "s-a", 3000).ok());
  EXPECT_TRUE(absl::IsNotFound(exposures.Remove(alice, alice.Tenant(), "s-a", 3000)));
  auto audit = (*store)->audit().Of(alice.Tenant(), "s-a", 100);
  ASSERT_TRUE(audit.ok());
  std::vector<std::string> actions;
  for (const AuditRecord& a : *audit) actions.push_back(a.action + ": " + a.outcome);
  EXPECT_EQ(actions, (std::vector<std::string>{
                         "session.create: ok", "session.expose: port 8000, with a token",
                         "session.expose: port 8000, with a token",
                         "session.expose: port 3000, public", "session.unexpose: port 3000"}));
  // A stopped session's ports are no longer exposed.
  ASSERT_TRUE((*store)
                  ->sessions()
                  .SetState(alice, alice.Tenant(), "s-a", SessionState::kStopped, "", 0, "rm")
                  .ok());
  EXPECT_FALSE(exposures.Find("s-a", 8000)->has_value());
}

TEST(StateStoreTest, ApiKeysAreKeptAsHashesPerTenantAndAudited) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  Principal alice{1001, 1001}, bob{1002, 1002};
  ApiKeyRepository& keys = (*store)->api_keys();
  absl::StatusOr<std::string> key = keys.Create(alice, "ci");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->size(), 44u);
  EXPECT_EQ(key->substr(0, 4), "e2b_");
  // The same name again is refused (without holding the store twice); another tenant may.
  EXPECT_TRUE(absl::IsAlreadyExists(keys.Create(alice, "ci").status()));
  EXPECT_TRUE(keys.Create(bob, "ci").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(keys.Create(alice, "no spaces").status()));
  auto found = keys.Lookup(*key);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->tenant, alice.Tenant());
  EXPECT_EQ((*found)->name, "ci");
  EXPECT_FALSE(keys.Lookup("e2b_" + std::string(40, '0'))->has_value());
  EXPECT_EQ(keys.List(alice.Tenant())->size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(keys.Remove(alice, "nope")));
  ASSERT_TRUE(keys.Remove(alice, "ci").ok());
  EXPECT_FALSE(keys.Lookup(*key)->has_value());
  auto audit = (*store)->audit().ForTenant(alice.Tenant());
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].action, "apikey.create");
  EXPECT_EQ((*audit)[1].action, "apikey.remove");
}

TEST(StateStoreTest, E2bSnapshotsAreFoundByNameOrIdWhileTheirSessionLasts) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  Principal alice{1001, 1001}, bob{1002, 1002};
  ApiKeyRepository& keys = (*store)->api_keys();
  for (const char* id : {"snap-old", "snap-new", "snap-anon", "sandbox"}) {
    ASSERT_TRUE((*store)->sessions().Create(alice, NewSession(id, alice)).ok());
    ASSERT_TRUE((*store)
                    ->sessions()
                    .SetState(alice, alice.Tenant(), id, SessionState::kPaused, "", 0, "pause")
                    .ok());
  }
  E2bSandboxRecord sandbox{
      .session_id = "sandbox", .tenant = alice.Tenant(), .template_id = "base"};
  ASSERT_TRUE(keys.PutSandbox(sandbox).ok());
  E2bSandboxRecord snap = sandbox;
  snap.snapshot_of = "sandbox";
  for (const char* id : {"snap-old", "snap-new"}) {
    snap.session_id = id;
    snap.snapshot_name = "mine";
    ASSERT_TRUE(keys.PutSandbox(snap).ok());
  }
  snap.session_id = "snap-anon";
  snap.snapshot_name = "";
  ASSERT_TRUE(keys.PutSandbox(snap).ok());

  // Two with one name (while the newer replaces the older): the newer.
  EXPECT_EQ((*keys.FindSnapshot(alice.Tenant(), "mine"))->session_id, "snap-new");
  EXPECT_EQ((*keys.FindSnapshot(alice.Tenant(), "snap-anon"))->session_id, "snap-anon");
  // A named one goes by its name only; a sandbox is not a snapshot; nor is another's.
  EXPECT_FALSE(keys.FindSnapshot(alice.Tenant(), "snap-new")->has_value());
  EXPECT_FALSE(keys.FindSnapshot(alice.Tenant(), "sandbox")->has_value());
  EXPECT_FALSE(keys.FindSnapshot(bob.Tenant(), "mine")->has_value());
  EXPECT_EQ(keys.ListSnapshots(alice.Tenant())->size(), 3u);
  EXPECT_TRUE((*keys.GetSandbox(alice.Tenant(), "snap-anon"))->is_snapshot());
  EXPECT_FALSE((*keys.GetSandbox(alice.Tenant(), "sandbox"))->is_snapshot());

  // A snapshot whose session was removed is none any more.
  ASSERT_TRUE((*store)
                  ->sessions()
                  .SetState(alice, alice.Tenant(), "snap-new", SessionState::kStopped, "", 0, "rm")
                  .ok());
  EXPECT_EQ((*keys.FindSnapshot(alice.Tenant(), "mine"))->session_id, "snap-old");
  EXPECT_EQ(keys.ListSnapshots(alice.Tenant())->size(), 2u);
}

TEST(StateStoreTest, ARecordPublishedByAnotherHostReplacesThisHostsAndKeepsItsLogs) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  Principal alice{1001, 1001}, bob{1002, 1002};
  SessionRecord s = NewSession("0123456789ab", alice);
  s.limits.memory_bytes = 1 << 30;
  s.egress = {{.rule = "pypi.org:443", .source = "create", .expires_ms = 5, .deny = false}};
  s.egress_version = 3;
  s.workspace = {.path = "/src/a\tb", .head = "abc", .tree_digest = "sha256:11", .files = 2};
  absl::StatusOr<SessionRecord> back = DecodeSessionRecord(EncodeSessionRecord(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EncodeSessionRecord(*back), EncodeSessionRecord(s));
  EXPECT_EQ(back->state, SessionState::kPaused);
  EXPECT_EQ(back->workspace.path, "/src/a\tb");
  EXPECT_EQ(back->egress.size(), 1u);
  std::string text = EncodeSessionRecord(s);
  EXPECT_FALSE(DecodeSessionRecord(text.substr(0, text.size() / 2)).ok());
  EXPECT_FALSE(DecodeSessionRecord(text + "id\t0123456789ab\n").ok());
  EXPECT_FALSE(DecodeSessionRecord("").ok());

  ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
  LogRecord line{.unix_ms = 1, .stream = LogStream::kStdout, .data = "before"};
  ASSERT_TRUE((*store)->commands().AppendOutput(s, {line}).ok());
  back->egress_version = 4;
  ASSERT_TRUE((*store)->sessions().Import(alice, *back, "host-b").ok());
  absl::StatusOr<SessionRecord> now = (*store)->sessions().Get(alice.Tenant(), s.id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->egress_version, 4);
  EXPECT_EQ(now->state, SessionState::kPaused);
  EXPECT_EQ((*store)->commands().ReadOutput(alice.Tenant(), s.id, 0, 0, 0)->size(), 1u);
  EXPECT_EQ((*store)->audit().ForTenant(alice.Tenant())->back().action, "session.import");
  // Another tenant's id is not taken over; a new id is inserted.
  SessionRecord bobs = *back;
  bobs.tenant = bob.Tenant();
  EXPECT_TRUE(absl::IsFailedPrecondition((*store)->sessions().Import(bob, bobs, "host-b")));
  EXPECT_EQ((*store)->sessions().Get(alice.Tenant(), s.id)->tenant, alice.Tenant());
  bobs.id = "ba9876543210";
  ASSERT_TRUE((*store)->sessions().Import(bob, bobs, "host-b").ok());
  EXPECT_TRUE((*store)->sessions().Get(bob.Tenant(), bobs.id).ok());
}

TEST(StateStoreTest, LogsAreARingPerSessionAndSurviveReopening) {
  testing::TempDir dir;
  Principal alice{1001, 1001};
  SessionRecord s = NewSession("s1", alice);
  {
    auto store = StateStore::Open(dir.File("state.db"), 100000);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
    for (int i = 0; i < 50; ++i) {
      std::vector<LogRecord> batch = {
          {.unix_ms = 1000 + i,
           .exec_id = 1,
           .stream = LogStream::kStdout,
           .data = std::string(10000, static_cast<char>('a' + i % 26))}};
      ASSERT_TRUE((*store)->commands().AppendOutput(s, batch).ok());
    }
  }
  auto store = StateStore::Open(dir.File("state.db"), 100000);
  ASSERT_TRUE(store.ok());
  auto logs = (*store)->commands().ReadOutput(alice.Tenant(), "s1", 0, 0, 0);
  ASSERT_TRUE(logs.ok());
  size_t total = 0;
  for (const LogRecord& r : *logs) total += r.data.size();
  EXPECT_LE(total, 100000u);
  EXPECT_GE(total, 90000u);
  EXPECT_EQ(logs->back().data[0], 'a' + 49 % 26);  // newest kept
  auto tail = (*store)->commands().ReadOutput(alice.Tenant(), "s1", 0, 0, 2);
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ(tail->back().unix_ms, 1049);
  EXPECT_TRUE((*store)->commands().ReadOutput("uid:1002", "s1", 0, 0, 0)->empty());
}

// A command's end and the output it left unstored (its exit line) commit together, and the
// ring's cap holds for that output too.
TEST(StateStoreTest, ACommandsEndCommitsWithItsLastOutput) {
  testing::TempDir dir;
  Principal alice{1001, 1001};
  SessionRecord s = NewSession("s1", alice);
  auto store = StateStore::Open(dir.File("state.db"), 20000);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
  ExecRecord run;
  run.argv = {"true"};
  absl::StatusOr<int64_t> exec = (*store)->commands().Start(alice, s, run);
  ASSERT_TRUE(exec.ok());
  std::vector<LogRecord> last = {
      {.unix_ms = 1,
       .exec_id = *exec,
       .stream = LogStream::kStdout,
       .data = std::string(15000, 'o')},
      {.unix_ms = 2, .exec_id = *exec, .stream = LogStream::kEvent, .data = "exit 3: why"}};
  ASSERT_TRUE((*store)->commands().End(s, *exec, 3, "why", last).ok());
  ASSERT_TRUE((*store)->commands().End(s, *exec, 3, "why", last).ok());  // past the ring's cap
  auto logs = (*store)->commands().ReadOutput(alice.Tenant(), "s1", 0, 0, 0);
  ASSERT_TRUE(logs.ok());
  ASSERT_FALSE(logs->empty());
  EXPECT_EQ(logs->back().data, "exit 3: why");
  size_t total = 0;
  for (const LogRecord& r : *logs) total += r.data.size();
  EXPECT_LE(total, 20000u);
  auto execs = (*store)->commands().Read(alice.Tenant(), "s1");
  ASSERT_TRUE(execs.ok());
  ASSERT_EQ(execs->size(), 1u);
  EXPECT_EQ(execs->front().exit_code, 3);
  EXPECT_GE(execs->front().ended_ms, 0);
}

TEST(StateStoreTest, TheAuditLogIsAppendOnly) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok());
  Principal alice{1001, 1001};
  ASSERT_TRUE((*store)->audit().Audit(alice, alice.Tenant(), "test", "x", "ok").ok());
  store->reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("state.db").c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "DELETE FROM audit", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "UPDATE audit SET outcome = 'no'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
}

// A store with five audit records; then sql run on its file as someone with the file would
// (the triggers that keep the log append-only are dropped first); then what VerifyAudit says.
AuditCheck TamperAndVerify(const std::string& sql) {
  testing::TempDir dir;
  Principal alice{1001, 1001};
  {
    auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
    EXPECT_TRUE(store.ok());
    for (int i = 1; i <= 5; ++i) {
      EXPECT_TRUE(
          (*store)->audit().Audit(alice, alice.Tenant(), "test", absl::StrCat("x", i), "ok").ok());
    }
    absl::StatusOr<AuditCheck> before = (*store)->audit().Verify();
    EXPECT_TRUE(before.ok() && before->ok && before->records == 5) << before->problem;
  }
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(dir.File("state.db").c_str(), &db), SQLITE_OK);
  std::string all = "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; " + sql;
  EXPECT_EQ(sqlite3_exec(db, all.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  EXPECT_TRUE(store.ok());
  absl::StatusOr<AuditCheck> after = (*store)->audit().Verify();
  EXPECT_TRUE(after.ok()) << after.status();
  return after.ok() ? *after : AuditCheck{};
}

TEST(StateStoreTest, TheAuditChainShowsARecordChangedRemovedOrMoved) {
  AuditCheck check = TamperAndVerify("UPDATE audit SET outcome = 'denied' WHERE seq = 3");
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.first_bad_seq, 3);
  EXPECT_NE(check.problem.find("record 3 does not follow"), std::string::npos) << check.problem;

  check = TamperAndVerify("DELETE FROM audit WHERE seq = 3");
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.first_bad_seq, 3);
  EXPECT_NE(check.problem.find("records 3 to 3 are missing"), std::string::npos) << check.problem;

  // Two records swapped, hashes and all: the chain breaks at the first of them.
  check = TamperAndVerify(
      "UPDATE audit SET seq = 100 WHERE seq = 2; UPDATE audit SET seq = 2 WHERE seq = 3; "
      "UPDATE audit SET seq = 3 WHERE seq = 100;");
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.first_bad_seq, 2);

  check = TamperAndVerify("DELETE FROM audit WHERE seq >= 4");
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.records, 3u);
  EXPECT_NE(check.problem.find("records 4 to 5 are missing (removed from the end)"),
            std::string::npos)
      << check.problem;

  // A record added in the middle with a made-up hash.
  check = TamperAndVerify(
      "INSERT INTO audit(seq, unix_ms, principal, tenant, action, target, outcome, hash) "
      "SELECT 6, unix_ms, principal, tenant, action, target, outcome, hash FROM audit "
      "WHERE seq = 5; UPDATE sqlite_sequence SET seq = 6 WHERE name = 'audit'");
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.first_bad_seq, 6);
}

// A database from before the chain (schema version 7) gets its records chained when it is
// opened, and verifies.
TEST(StateStoreTest, AuditRecordsFromBeforeTheChainAreChainedOnUpgrade) {
  testing::TempDir dir;
  Principal alice{1001, 1001};
  {
    auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE((*store)->audit().Audit(alice, "t", "test", "x", "ok").ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("state.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db,
                   "DROP TRIGGER audit_no_update; ALTER TABLE audit DROP COLUMN hash; "
                   "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT "
                   "RAISE(ABORT, 'no'); END; DROP INDEX net_events_denied; ALTER TABLE "
                   "net_events DROP COLUMN repeats; ALTER TABLE net_events DROP COLUMN "
                   "last_ms; DROP TABLE exposures; DROP TABLE api_keys; DROP TABLE e2b_sandboxes; "
                   "DROP TABLE volumes; ALTER TABLE sessions DROP COLUMN volumes; "
                   "ALTER TABLE sessions DROP COLUMN pause_at_ttl; "
                   "DROP TABLE activity; DROP TABLE activity_usage; "
                   "PRAGMA user_version = 7;",
                   nullptr, nullptr, nullptr),
      SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->audit().Audit(alice, "t", "test", "y", "ok").ok());
  absl::StatusOr<AuditCheck> check = (*store)->audit().Verify();
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->ok) << check->problem;
  EXPECT_EQ(check->records, 4u);
  absl::StatusOr<std::vector<AuditRecord>> records = (*store)->audit().Since(0, 2);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 2u);  // the newest two, oldest first
  EXPECT_EQ(records->front().seq, 3);
  EXPECT_EQ(records->back().target, "y");
  EXPECT_EQ(records->back().hash, AuditHash(records->front().hash, records->back()));
  store->reset();
  // Still append-only after the upgrade.
  ASSERT_EQ(sqlite3_open(dir.File("state.db").c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "UPDATE audit SET outcome = 'no'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
}

TEST(StateStoreTest, EgressGrantsAndNetworkEventsAreKeptPerTenantAndAudited) {
  testing::TempDir dir;
  Principal alice{1001, 1001}, bob{1002, 1002};
  SessionRecord s = NewSession("s-net", alice);
  s.egress = {{"pypi.org", "create", 0, false}, {"*.example.com:8443", "allow", 1234, false}};
  {
    auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
    std::vector<EgressGrant> next = s.egress;
    next.push_back({"evil.example.com", "deny", 0, true});
    ASSERT_TRUE((*store)
                    ->sessions()
                    .SetEgress(alice, alice.Tenant(), "s-net", next, 2, "network.deny",
                               "deny evil.example.com")
                    .ok());
    EXPECT_TRUE(absl::IsNotFound(
        (*store)->sessions().SetEgress(bob, bob.Tenant(), "s-net", {}, 3, "network.rm", "")));
    std::vector<net::NetEvent> events;
    for (int i = 0; i < 3; ++i) {
      net::NetEvent e;
      e.unix_ms = 1000 + i;
      e.kind = "connect";
      e.name = "pypi.org";
      e.address = "151.101.0.223";
      e.port = 443;
      e.allowed = i != 1;
      e.rule = "pypi.org";
      e.bytes_in = 10 * i;
      events.push_back(e);
    }
    ASSERT_TRUE((*store)->net_events().Append(s, events).ok());
  }
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok());
  auto got = (*store)->sessions().Get(alice.Tenant(), "s-net");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->egress_version, 2);
  ASSERT_EQ(got->egress.size(), 3u);
  EXPECT_EQ(got->egress[1].rule, "*.example.com:8443");
  EXPECT_EQ(got->egress[1].expires_ms, 1234);
  EXPECT_TRUE(got->egress[2].deny);
  auto events = (*store)->net_events().Read(alice.Tenant(), "s-net", 0, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_FALSE((*events)[1].allowed);
  EXPECT_EQ((*events)[2].bytes_in, 20u);
  EXPECT_EQ((*store)->net_events().Read(alice.Tenant(), "s-net", 0, 1)->size(), 1u);
  EXPECT_TRUE((*store)->net_events().Read(bob.Tenant(), "s-net", 0, 0)->empty());
  auto audit = (*store)->audit().ForTenant(alice.Tenant());
  ASSERT_TRUE(audit.ok());
  EXPECT_EQ(audit->back().action, "network.deny");
  EXPECT_EQ(audit->back().outcome, "deny evil.example.com");
  // Deleting the session deletes its events.
  ASSERT_TRUE((*store)->sessions().Delete(alice, alice.Tenant(), "s-net").ok());
  EXPECT_TRUE((*store)->net_events().Read(alice.Tenant(), "s-net", 0, 0)->empty());
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

// A guest that floods its log with cheap denied names (20,000 of them) pushes out neither its
// allowed connections nor the first things it tried: the evidence stays.
TEST(StateStoreTest, AFloodOfDenialsLeavesTheFirstEventsAndEveryAllowedOne) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  Principal alice{1001, 1001};
  SessionRecord s = NewSession("s-flood", alice);
  ASSERT_TRUE((*store)->sessions().Create(alice, s).ok());
  auto event = [](const std::string& name, bool allowed) {
    net::NetEvent e;
    e.kind = allowed ? "connect" : "dns";
    e.name = name;
    e.port = allowed ? 443 : 0;
    e.allowed = allowed;
    return e;
  };
  ASSERT_TRUE((*store)
                  ->net_events()
                  .Append(s, {event("pypi.org", true), event("evil.example", false),
                              event("files.pythonhosted.org", true)})
                  .ok());
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<net::NetEvent> flood;
    for (int i = 0; i < 1000; ++i) {
      flood.push_back(event(absl::StrCat("x", batch * 1000 + i, ".cheap.example"), false));
    }
    ASSERT_TRUE((*store)->net_events().Append(s, flood).ok());
  }
  auto all = [&] {
    std::vector<net::NetEvent> out;
    int64_t after = 0;
    for (;;) {
      absl::StatusOr<std::vector<net::NetEvent>> page =
          (*store)->net_events().Read(alice.Tenant(), "s-flood", after, 0);
      EXPECT_TRUE(page.ok());
      if (!page.ok() || page->empty()) return out;
      after = page->back().seq;
      out.insert(out.end(), page->begin(), page->end());
    }
  };
  std::vector<net::NetEvent> kept = all();
  ASSERT_EQ(kept.size(), 2u + NetEventLog::kMaxNetEventsPerSession / 2);
  EXPECT_EQ(kept[0].name, "pypi.org");
  EXPECT_EQ(kept[1].name, "evil.example");
  EXPECT_EQ(kept[2].name, "files.pythonhosted.org");
  EXPECT_EQ(kept[3].name, "x0.cheap.example");
  EXPECT_EQ(kept.back().name, "x19999.cheap.example");  // and the newest

  // The same denial again, 10,000 times: counted on its first row, which stays where it was,
  // and nothing else goes.
  std::vector<net::NetEvent> again(10000, event("evil.example", false));
  for (size_t i = 0; i < again.size(); ++i) again[i].unix_ms = 5000 + static_cast<int64_t>(i);
  ASSERT_TRUE((*store)->net_events().Append(s, again).ok());
  std::vector<net::NetEvent> now = all();
  ASSERT_EQ(now.size(), kept.size());
  EXPECT_EQ(now[1].name, "evil.example");
  EXPECT_EQ(now[1].repeats, 10000u);
  EXPECT_EQ(now[1].last_ms, 5000 + 9999);
  EXPECT_EQ(now.back().name, "x19999.cheap.example");
}

TEST(StateStoreTest, ATenantsOutputIsCappedInAllOldestFirst) {
  testing::TempDir dir;
  auto store = StateStore::Open(dir.File("state.db"), 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->set_tenant_log_cap([](const std::string& tenant) -> uint64_t {
    return tenant == "uid:1001" ? 1000 : UINT64_MAX;
  });
  Principal alice{1001, 1001}, bob{1002, 1002};
  SessionRecord a1 = NewSession("a1", alice), a2 = NewSession("a2", alice),
                b = NewSession("b", bob);
  for (const SessionRecord* s : {&a1, &a2, &b}) {
    ASSERT_TRUE((*store)->sessions().Create(s == &b ? bob : alice, *s).ok());
  }
  auto entry = [](char c) {
    return std::vector<LogRecord>{{.stream = LogStream::kStdout, .data = std::string(300, c)}};
  };
  ASSERT_TRUE((*store)->commands().AppendOutput(a1, entry('x')).ok());
  ASSERT_TRUE((*store)->commands().AppendOutput(a2, entry('y')).ok());
  ASSERT_TRUE((*store)->commands().AppendOutput(b, entry('b')).ok());
  ASSERT_TRUE((*store)->commands().AppendOutput(b, entry('b')).ok());
  ASSERT_TRUE((*store)->commands().AppendOutput(b, entry('b')).ok());
  EXPECT_EQ(*(*store)->commands().OutputBytes(alice.Tenant()), 600u);
  // Two more of a2's go over alice's 1000 bytes: a1's (the oldest) goes, across sessions.
  ASSERT_TRUE((*store)->commands().AppendOutput(a2, entry('z')).ok());
  ASSERT_TRUE((*store)->commands().AppendOutput(a2, entry('w')).ok());
  EXPECT_EQ(*(*store)->commands().OutputBytes(alice.Tenant()), 900u);
  EXPECT_TRUE((*store)->commands().ReadOutput(alice.Tenant(), "a1", 0, 0, 0)->empty());
  EXPECT_EQ((*store)->commands().ReadOutput(alice.Tenant(), "a2", 0, 0, 0)->size(), 3u);
  EXPECT_EQ(*(*store)->commands().OutputBytes(bob.Tenant()), 900u);  // bob has no such cap
}

}  // namespace
}  // namespace airlock
