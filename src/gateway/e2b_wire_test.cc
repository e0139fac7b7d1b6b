// The envd codec (e2b_envd.cc, hand-written JSON) against the definitions of E2B's services in
// proto/e2b/: every answer parses as its message under protobuf's strict JSON parser (no field
// the message lacks, every value of its type: int64 as a string, a Timestamp in RFC 3339, enums
// by name), and every request as protobuf writes it (what an SDK generated from the same
// definitions sends) is understood by the codec.
#include <gtest/gtest.h>

#include <string>

#include "google/protobuf/util/json_util.h"
#include "proto/e2b/filesystem/filesystem.pb.h"
#include "proto/e2b/process/process.pb.h"
#include "src/gateway/e2b_envd.h"

namespace airlock::gateway::e2b {
namespace {

namespace pb = google::protobuf;

// The message the JSON parses to, strictly; fails the test if it does not.
template <typename Message>
Message Strict(const std::string& json) {
  Message m;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  pb::util::Status s = pb::util::JsonStringToMessage(json, &m, options);
  EXPECT_TRUE(s.ok()) << s.ToString() << " in " << json;
  return m;
}

// The JSON protobuf writes for the message (camelCase names, as the SDKs send).
std::string Json(const pb::Message& m) {
  std::string out;
  EXPECT_TRUE(pb::util::MessageToJsonString(m, &out).ok());
  return out;
}

FsEntry File() {
  return FsEntry{.name = "a.txt",
                 .path = "/root/a.txt",
                 .type = FsType::kFile,
                 .size = uint64_t{1} << 40,
                 .mode = 0100640,
                 .owner = "root",
                 .group = "staff",
                 .mtime_seconds = 1764892800,
                 .mtime_nanos = 5,
                 .symlink_target = ""};
}

TEST(E2bWireTest, ProcessAnswersAreTheProcessServicesMessages) {
  EXPECT_EQ(Strict<process::StartResponse>(StartEventJson(7)).event().start().pid(), 7u);
  process::StartResponse data =
      Strict<process::StartResponse>(DataEventJson(Output::kPty, "\x01\xff"));
  EXPECT_EQ(data.event().data().pty(), "\x01\xff");
  process::ConnectResponse end =
      Strict<process::ConnectResponse>(EndEventJson(-1, false, "signal: killed", "signal: killed"));
  EXPECT_EQ(end.event().end().exit_code(), -1);
  EXPECT_FALSE(end.event().end().exited());
  EXPECT_EQ(end.event().end().error(), "signal: killed");
  EXPECT_TRUE(Strict<process::StartResponse>(KeepAliveEventJson()).event().has_keepalive());
  process::ListResponse list = Strict<process::ListResponse>(ListResponseJson(
      {{.config = {.cmd = "/bin/bash", .args = {"-c", "x"}, .envs = {{"A", "1"}}, .cwd = "/root"},
        .pid = 1000,
        .tag = "t"}}));
  ASSERT_EQ(list.processes_size(), 1);
  EXPECT_EQ(list.processes(0).config().envs().at("A"), "1");
  EXPECT_EQ(list.processes(0).tag(), "t");
}

TEST(E2bWireTest, ProcessRequestsAsProtobufWritesThemAreUnderstood) {
  process::StartRequest start;
  start.mutable_process()->set_cmd("/bin/bash");
  start.mutable_process()->add_args("-c");
  start.mutable_process()->add_args("echo hi");
  (*start.mutable_process()->mutable_envs())["K"] = "v";
  start.mutable_process()->set_cwd("/tmp");
  start.mutable_pty()->mutable_size()->set_cols(120);
  start.mutable_pty()->mutable_size()->set_rows(40);
  start.set_tag("job");
  start.set_stdin(false);
  absl::StatusOr<StartRequest> parsed = ParseStartRequest(Json(start));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->process.args[1], "echo hi");
  EXPECT_EQ(parsed->process.envs.at("K"), "v");
  EXPECT_EQ(parsed->process.cwd, "/tmp");
  EXPECT_TRUE(parsed->pty);
  EXPECT_EQ(parsed->pty_cols, 120u);
  EXPECT_EQ(parsed->pty_rows, 40u);
  EXPECT_EQ(parsed->tag, "job");
  EXPECT_FALSE(parsed->stdin);

  process::SendSignalRequest signal;
  signal.mutable_process()->set_pid(1000);
  signal.set_signal(process::SIGNAL_SIGKILL);
  absl::StatusOr<SendSignalRequest> sig = ParseSendSignalRequest(Json(signal));
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->signal, 9);
  EXPECT_EQ(sig->process.pid, 1000u);

  process::SendInputRequest input;
  input.mutable_process()->set_tag("job");
  input.mutable_input()->set_stdin(std::string("a\0b", 3));
  absl::StatusOr<SendInputRequest> in = ParseSendInputRequest(Json(input));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->data, std::string("a\0b", 3));
  EXPECT_EQ(in->process.tag, "job");

  process::UpdateRequest update;
  update.mutable_process()->set_pid(3);
  update.mutable_pty()->mutable_size()->set_cols(100);
  update.mutable_pty()->mutable_size()->set_rows(30);
  absl::StatusOr<UpdateRequest> up = ParseUpdateRequest(Json(update));
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->pty_rows_cols, std::make_pair(30u, 100u));
}

TEST(E2bWireTest, FilesystemAnswersAreTheFilesystemServicesMessages) {
  filesystem::StatResponse stat = Strict<filesystem::StatResponse>(EntryResponseJson(File()));
  EXPECT_EQ(stat.entry().type(), filesystem::FILE_TYPE_FILE);
  EXPECT_EQ(stat.entry().size(), int64_t{1} << 40);
  EXPECT_EQ(stat.entry().mode(), 0640u);
  EXPECT_EQ(stat.entry().permissions(), "-rw-r-----");
  EXPECT_EQ(stat.entry().modified_time().seconds(), 1764892800);
  EXPECT_EQ(stat.entry().modified_time().nanos(), 5);
  EXPECT_FALSE(stat.entry().has_symlink_target());
  // MakeDir and Move answer the same shape.
  Strict<filesystem::MakeDirResponse>(EntryResponseJson(File()));
  Strict<filesystem::MoveResponse>(EntryResponseJson(File()));

  FsEntry link = File();
  link.type = FsType::kSymlink;
  link.mode = 0120777;
  link.symlink_target = "/etc";
  filesystem::ListDirResponse list =
      Strict<filesystem::ListDirResponse>(ListDirResponseJson({File(), link}));
  ASSERT_EQ(list.entries_size(), 2);
  EXPECT_EQ(list.entries(1).type(), filesystem::FILE_TYPE_SYMLINK);
  EXPECT_EQ(list.entries(1).symlink_target(), "/etc");

  EXPECT_TRUE(Strict<filesystem::WatchDirResponse>(WatchStartEventJson()).has_start());
  EXPECT_TRUE(Strict<filesystem::WatchDirResponse>(WatchKeepAliveEventJson()).has_keepalive());
  WatchRecord written{
      .kind = WatchEventKind::kWrite, .name = "sub/a.txt", .has_entry = true, .entry = File()};
  filesystem::WatchDirResponse event =
      Strict<filesystem::WatchDirResponse>(WatchEventJson(written));
  EXPECT_EQ(event.filesystem().type(), filesystem::EVENT_TYPE_WRITE);
  EXPECT_EQ(event.filesystem().name(), "sub/a.txt");
  EXPECT_EQ(event.filesystem().entry().path(), "/root/a.txt");
  filesystem::GetWatcherEventsResponse polled = Strict<filesystem::GetWatcherEventsResponse>(
      WatcherEventsResponseJson({written, {.kind = WatchEventKind::kRemove, .name = "b"}}));
  ASSERT_EQ(polled.events_size(), 2);
  EXPECT_EQ(polled.events(1).type(), filesystem::EVENT_TYPE_REMOVE);
  EXPECT_FALSE(polled.events(1).has_entry());
  EXPECT_EQ(Strict<filesystem::CreateWatcherResponse>(CreateWatcherResponseJson("w1")).watcher_id(),
            "w1");
}

TEST(E2bWireTest, FilesystemRequestsAsProtobufWritesThemAreUnderstood) {
  filesystem::StatRequest stat;
  stat.set_path("/etc/passwd");
  EXPECT_EQ(*ParsePathRequest(Json(stat)), "/etc/passwd");
  filesystem::MoveRequest move;
  move.set_source("a");
  move.set_destination("/b/c");
  absl::StatusOr<MoveRequest> m = ParseMoveRequest(Json(move));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->destination, "/b/c");
  filesystem::ListDirRequest list;
  list.set_path("/root");
  list.set_depth(3);
  EXPECT_EQ(ParseListDirRequest(Json(list))->depth, 3u);
  list.clear_depth();  // protobuf leaves a zero out: one level
  EXPECT_EQ(ParseListDirRequest(Json(list))->depth, 1u);
  filesystem::WatchDirRequest watch;
  watch.set_path("/w");
  watch.set_recursive(true);
  watch.set_include_entry(true);
  watch.set_allow_network_mounts(true);
  absl::StatusOr<WatchRequest> w = ParseWatchRequest(Json(watch));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->recursive);
  EXPECT_TRUE(w->include_entry);
  filesystem::GetWatcherEventsRequest poll;
  poll.set_watcher_id("w1");
  EXPECT_EQ(*ParseWatcherIdRequest(Json(poll)), "w1");
}

}  // namespace
}  // namespace airlock::gateway::e2b
