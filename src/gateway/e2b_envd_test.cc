#include "src/gateway/e2b_envd.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace airlock::gateway::e2b {
namespace {

using json = nlohmann::json;

TEST(E2bEnvdTest, OperationsAreEnvdsPaths) {
  std::string rpc;
  EXPECT_EQ(EnvdOpOf("GET", "/health", &rpc), EnvdOp::kHealth);
  EXPECT_EQ(EnvdOpOf("GET", "/files?path=/a", &rpc), EnvdOp::kFilesRead);
  EXPECT_EQ(EnvdOpOf("POST", "/files", &rpc), EnvdOp::kFilesWrite);
  EXPECT_EQ(EnvdOpOf("POST", "/process.Process/Start", &rpc), EnvdOp::kStart);
  EXPECT_EQ(rpc, "process.Process/Start");
  EXPECT_TRUE(IsStreaming(EnvdOp::kStart));
  EXPECT_TRUE(IsStreaming(EnvdOp::kConnect));
  EXPECT_FALSE(IsStreaming(EnvdOp::kList));
  EXPECT_EQ(EnvdOpOf("POST", "/process.Process/SendSignal", &rpc), EnvdOp::kSendSignal);
  EXPECT_EQ(EnvdOpOf("POST", "/process.Process/StreamInput", &rpc), EnvdOp::kStreamInput);
  EXPECT_TRUE(IsStreaming(EnvdOp::kStreamInput));
  EXPECT_EQ(EnvdOpOf("POST", "/process.Process/Other", &rpc), EnvdOp::kUnimplemented);
  EXPECT_EQ(EnvdOpOf("POST", "/filesystem.Filesystem/Stat", &rpc), EnvdOp::kStat);
  EXPECT_EQ(rpc, "filesystem.Filesystem/Stat");
  EXPECT_EQ(EnvdOpOf("POST", "/filesystem.Filesystem/WatchDir", &rpc), EnvdOp::kWatchDir);
  EXPECT_TRUE(IsStreaming(EnvdOp::kWatchDir));
  EXPECT_FALSE(IsStreaming(EnvdOp::kCreateWatcher));
  EXPECT_EQ(EnvdOpOf("POST", "/filesystem.Filesystem/GetWatcherEvents", &rpc),
            EnvdOp::kGetWatcherEvents);
  EXPECT_EQ(EnvdOpOf("POST", "/filesystem.Filesystem/Chown", &rpc), EnvdOp::kUnimplemented);
  EXPECT_EQ(EnvdOpOf("GET", "/process.Process/Start", &rpc), EnvdOp::kUnknown);
  EXPECT_EQ(EnvdOpOf("GET", "/", &rpc), EnvdOp::kUnknown);
}

TEST(E2bEnvdTest, AClientStreamIsReadEnvelopeByEnvelopeAsItArrives) {
  std::string wire = Envelope(R"({"start":{"process":{"pid":7}}})") +
                     Envelope(R"({"data":{"input":{"stdin":"aGk="}}})") + Envelope("{}");
  EnvelopeReader reader;
  std::vector<std::string> messages;
  for (char byte : wire) {  // a byte at a time: nothing until a message is whole
    reader.Add(std::string(1, byte));
    absl::StatusOr<std::optional<std::string>> next = reader.Next();
    ASSERT_TRUE(next.ok()) << next.status();
    if (next->has_value()) messages.push_back(**next);
  }
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_FALSE(reader.partial());
  absl::StatusOr<StreamInputEvent> start = ParseStreamInputEvent(messages[0]);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->kind, StreamInputEvent::Kind::kStart);
  EXPECT_EQ(start->process.pid, 7u);
  absl::StatusOr<StreamInputEvent> data = ParseStreamInputEvent(messages[1]);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->kind, StreamInputEvent::Kind::kData);
  EXPECT_EQ(data->data, "hi");
  EXPECT_EQ(ParseStreamInputEvent(R"({"keepalive":{}})")->kind, StreamInputEvent::Kind::kKeepAlive);
  EXPECT_EQ(ParseStreamInputEvent(R"({"data":{"input":{"pty":"eA=="}}})")->data, "x");
  for (const char* bad : {"{}", R"({"start":{},"keepalive":{}})", R"({"data":1})",
                          R"({"data":{"input":{"stdin":"%%"}}})"}) {
    EXPECT_FALSE(ParseStreamInputEvent(bad).ok()) << bad;
  }
  reader.Add(std::string("\0\0\0", 3));
  EXPECT_TRUE(reader.partial());
  EnvelopeReader compressed;
  compressed.Add(std::string("\1\0\0\0\0", 5));
  EXPECT_FALSE(compressed.Next().ok());
  EnvelopeReader huge;
  huge.Add(std::string("\0\x7f\0\0\0", 5));
  EXPECT_FALSE(huge.Next().ok());
}

TEST(E2bEnvdTest, AStreamingRequestIsExactlyOneUncompressedEnvelope) {
  std::string wire = Envelope(R"({"a":1})");
  EXPECT_EQ(wire, std::string("\0\0\0\0\x07{\"a\":1}", 12));
  EXPECT_EQ(*OpenEnvelope(wire), R"({"a":1})");
  EXPECT_FALSE(OpenEnvelope(wire + "x").ok());
  EXPECT_FALSE(OpenEnvelope(wire.substr(0, 8)).ok());
  std::string compressed = wire;
  compressed[0] = 1;
  EXPECT_FALSE(OpenEnvelope(compressed).ok());
  std::string end = Envelope("{}", /*end=*/true);
  EXPECT_EQ(end[0], 2);
}

TEST(E2bEnvdTest, ErrorsCarryConnectsCodes) {
  absl::Status missing = absl::NotFoundError("process with pid 7 not found");
  EXPECT_EQ(ConnectHttpStatus(missing), 404);
  EXPECT_EQ(json::parse(ConnectErrorJson(missing)),
            json({{"code", "not_found"}, {"message", "process with pid 7 not found"}}));
  EXPECT_EQ(json::parse(EndOfStreamJson(absl::UnimplementedError("no")))["error"]["code"],
            "unimplemented");
  EXPECT_EQ(EndOfStreamJson(absl::OkStatus()), "{}");
  EXPECT_EQ(ConnectHttpStatus(absl::UnauthenticatedError("")), 401);
}

TEST(E2bEnvdTest, AStartRequestAsTheSdkSendsIt) {
  absl::StatusOr<StartRequest> r = ParseStartRequest(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"b"},
          "cwd":"/tmp"},"stdin":false,"unknown":{}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->process.cmd, "/bin/bash");
  EXPECT_EQ(r->process.args, (std::vector<std::string>{"-l", "-c", "echo hi"}));
  EXPECT_EQ(r->process.envs.at("A"), "b");
  EXPECT_EQ(r->process.cwd, "/tmp");
  EXPECT_FALSE(r->stdin);
  EXPECT_FALSE(r->pty);
  // A terminal, and stdin left out (true, as envd takes it).
  r = ParseStartRequest(
      R"({"process":{"cmd":"/bin/bash","args":["-i","-l"]},"pty":{"size":{"cols":100,"rows":30}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->pty);
  EXPECT_EQ(r->pty_rows, 30u);
  EXPECT_EQ(r->pty_cols, 100u);
  EXPECT_TRUE(r->stdin);
  EXPECT_FALSE(r->process.cwd.has_value());
  for (const char* bad :
       {R"({})", R"({"process":{"cmd":""}})", R"({"process":{"cmd":1}})",
        R"({"process":{"cmd":"x","args":"y"}})", R"({"process":{"cmd":"x","envs":{"A=B":"c"}}})",
        R"({"process":{"cmd":"x"},"pty":{"size":{"cols":0,"rows":1}}})",
        R"({"process":{"cmd":"x"},"stdin":"yes"})", "[]", "{"}) {
    EXPECT_EQ(ParseStartRequest(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(E2bEnvdTest, SelectorsInputSignalsAndSizes) {
  EXPECT_EQ(ParseSelectorRequest(R"({"process":{"pid":1001}})")->pid, 1001u);
  EXPECT_EQ(ParseSelectorRequest(R"({"process":{"pid":"1001"}})")->pid, 1001u);
  EXPECT_EQ(ParseSelectorRequest(R"({"process":{"tag":"web"}})")->tag, "web");
  EXPECT_FALSE(ParseSelectorRequest(R"({"process":{"pid":-1}})").ok());
  EXPECT_FALSE(ParseSelectorRequest(R"({"process":{}})").ok());
  EXPECT_FALSE(ParseSelectorRequest(R"({})").ok());

  absl::StatusOr<SendInputRequest> in =
      ParseSendInputRequest(R"({"process":{"pid":1},"input":{"stdin":"aGkK"}})");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->data, "hi\n");
  EXPECT_FALSE(in->pty);
  in = ParseSendInputRequest(R"({"process":{"pid":1},"input":{"pty":"aGk"}})");  // unpadded
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->data, "hi");
  EXPECT_TRUE(in->pty);
  EXPECT_FALSE(ParseSendInputRequest(R"({"process":{"pid":1},"input":{"stdin":"!!"}})").ok());

  EXPECT_EQ(ParseSendSignalRequest(R"({"process":{"pid":1},"signal":"SIGNAL_SIGKILL"})")->signal,
            9);
  EXPECT_EQ(ParseSendSignalRequest(R"({"process":{"pid":1},"signal":15})")->signal, 15);
  EXPECT_EQ(
      ParseSendSignalRequest(R"({"process":{"pid":1},"signal":"SIGNAL_SIGHUP"})").status().code(),
      absl::StatusCode::kUnimplemented);

  absl::StatusOr<UpdateRequest> u =
      ParseUpdateRequest(R"({"process":{"pid":1},"pty":{"size":{"cols":120,"rows":40}}})");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->pty_rows_cols, std::make_pair(40u, 120u));
}

TEST(E2bEnvdTest, EventsAreWhatTheSdkReads) {
  EXPECT_EQ(json::parse(StartEventJson(1000)), json::parse(R"({"event":{"start":{"pid":1000}}})"));
  EXPECT_EQ(json::parse(DataEventJson(Output::kStderr, "hi\n")),
            json::parse(R"({"event":{"data":{"stderr":"aGkK"}}})"));
  EXPECT_EQ(json::parse(EndEventJson(3, true, "exit status 3", "exit status 3")),
            json::parse(R"({"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3",
                           "error":"exit status 3"}}})"));
  EXPECT_EQ(json::parse(EndEventJson(0, true, "exit status 0", ""))["event"]["end"].count("error"),
            0u);
  EXPECT_EQ(json::parse(KeepAliveEventJson()), json::parse(R"({"event":{"keepalive":{}}})"));
  json list = json::parse(ListResponseJson(
      {{.config = {.cmd = "/bin/bash", .args = {"-c", "x"}, .envs = {}, .cwd = "/root"},
        .pid = 1000,
        .tag = std::nullopt}}));
  EXPECT_EQ(list, json::parse(R"({"processes":[{"config":{"cmd":"/bin/bash","args":["-c","x"],
                                 "cwd":"/root"},"pid":1000}]})"));
}

TEST(E2bEnvdTest, FilesystemRequestsAsTheSdkSendsThem) {
  EXPECT_EQ(*ParsePathRequest(R"({"path":"/tmp/a","extra":1})"), "/tmp/a");
  EXPECT_FALSE(ParsePathRequest(R"({})").ok());
  EXPECT_FALSE(ParsePathRequest(R"({"path":3})").ok());
  absl::StatusOr<MoveRequest> move = ParseMoveRequest(R"({"source":"a","destination":"b"})");
  ASSERT_TRUE(move.ok()) << move.status();
  EXPECT_EQ(move->source, "a");
  EXPECT_EQ(move->destination, "b");
  EXPECT_FALSE(ParseMoveRequest(R"({"source":"a"})").ok());
  // depth: unset (0) lists one level, as envd; deeper than the cap is refused.
  EXPECT_EQ(ParseListDirRequest(R"({"path":"/"})")->depth, 1u);
  EXPECT_EQ(ParseListDirRequest(R"({"path":"/","depth":3})")->depth, 3u);
  EXPECT_FALSE(ParseListDirRequest(R"({"path":"/","depth":65})").ok());
  EXPECT_FALSE(ParseListDirRequest(R"({"path":"/","depth":-1})").ok());
  absl::StatusOr<WatchRequest> watch =
      ParseWatchRequest(R"({"path":"/w","recursive":true,"allowNetworkMounts":true})");
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_TRUE(watch->recursive);
  EXPECT_FALSE(watch->include_entry);
  EXPECT_FALSE(ParseWatchRequest(R"({"path":"/w","recursive":"yes"})").ok());
  EXPECT_EQ(*ParseWatcherIdRequest(R"({"watcherId":"w1"})"), "w1");
  EXPECT_FALSE(ParseWatcherIdRequest(R"({"watcherId":""})").ok());
}

TEST(E2bEnvdTest, EntriesAndWatchEventsAreWhatTheSdkReads) {
  FsEntry file{.name = "a.txt",
               .path = "/root/a.txt",
               .type = FsType::kFile,
               .size = 12,
               .mode = 0100644,
               .owner = "root",
               .group = "root",
               .mtime_seconds = 1764892800,
               .mtime_nanos = 5000,
               .symlink_target = ""};
  EXPECT_EQ(json::parse(EntryResponseJson(file)), json::parse(R"({"entry":{
      "name":"a.txt","type":"FILE_TYPE_FILE","path":"/root/a.txt","size":"12","mode":420,
      "permissions":"-rw-r--r--","owner":"root","group":"root",
      "modifiedTime":"2025-12-05T00:00:00.000005000Z"}})"));
  FsEntry link = file;
  link.type = FsType::kSymlink;
  link.mode = 0120777;
  link.mtime_nanos = 0;
  link.symlink_target = "/etc";
  json l = json::parse(ListDirResponseJson({link}))["entries"][0];
  EXPECT_EQ(l["permissions"], "Lrwxrwxrwx");
  EXPECT_EQ(l["symlinkTarget"], "/etc");
  EXPECT_EQ(l["modifiedTime"], "2025-12-05T00:00:00Z");
  FsEntry dir = file;
  dir.type = FsType::kDirectory;
  dir.mode = 040755;
  EXPECT_EQ(json::parse(EntryResponseJson(dir))["entry"]["permissions"], "drwxr-xr-x");
  EXPECT_EQ(json::parse(ListDirResponseJson({})), json::parse(R"({"entries":[]})"));

  EXPECT_EQ(json::parse(WatchStartEventJson()), json::parse(R"({"start":{}})"));
  EXPECT_EQ(json::parse(WatchKeepAliveEventJson()), json::parse(R"({"keepalive":{}})"));
  WatchRecord created{.kind = WatchEventKind::kCreate, .name = "sub/a.txt"};
  EXPECT_EQ(json::parse(WatchEventJson(created)),
            json::parse(R"({"filesystem":{"name":"sub/a.txt","type":"EVENT_TYPE_CREATE"}})"));
  WatchRecord written{
      .kind = WatchEventKind::kWrite, .name = "a.txt", .has_entry = true, .entry = file};
  json events = json::parse(WatcherEventsResponseJson({created, written}));
  ASSERT_EQ(events["events"].size(), 2u);
  EXPECT_EQ(events["events"][1]["type"], "EVENT_TYPE_WRITE");
  EXPECT_EQ(events["events"][1]["entry"]["size"], "12");
  EXPECT_EQ(json::parse(CreateWatcherResponseJson("w1")), json::parse(R"({"watcherId":"w1"})"));
}

TEST(E2bEnvdTest, FilesQueriesUploadsAndSignatures) {
  absl::StatusOr<FilesQuery> q = ParseFilesQuery(
      "/files?path=%2Ftmp%2Fa%20b&username=user&signature=v1_x&"
      "signature_expiration=1700000000");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->path, "/tmp/a b");
  EXPECT_EQ(q->username, "user");
  EXPECT_EQ(q->signature, "v1_x");
  EXPECT_EQ(q->signature_expiration, 1700000000);
  EXPECT_FALSE(ParseFilesQuery("/files?path=%zz").ok());
  EXPECT_FALSE(ParseFilesQuery("/files?signature_expiration=soon").ok());

  // E2B's signature: v1_ and the unpadded base64 of SHA-256("PATH:OP:USER:TOKEN[:EXP]").
  std::string sig = FileSignature("/a", "read", "", "tok", std::nullopt);
  std::string digest;
  ASSERT_TRUE(absl::Base64Unescape(sig.substr(3), &digest));
  EXPECT_EQ(digest.size(), 32u);
  EXPECT_EQ(sig.substr(0, 3), "v1_");
  EXPECT_EQ(sig.find('='), std::string::npos);
  EXPECT_NE(sig, FileSignature("/a", "write", "", "tok", std::nullopt));
  EXPECT_NE(sig, FileSignature("/a", "read", "", "tok", 1700000000));

  std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/one\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n1\r\n\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"two%22s\"\r\n\r\n"
      "\r\n--XyZ--\r\n";
  absl::StatusOr<std::vector<FilePart>> parts =
      ParseMultipartFiles("multipart/form-data; boundary=XyZ", body);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].filename, "/tmp/one");
  EXPECT_EQ((*parts)[0].content, "1\r\n");
  EXPECT_EQ((*parts)[1].filename, "two\"s");
  EXPECT_EQ((*parts)[1].content, "");
  EXPECT_FALSE(ParseMultipartFiles("application/json", body).ok());
  EXPECT_FALSE(ParseMultipartFiles("multipart/form-data; boundary=XyZ", body.substr(0, 60)).ok());

  EXPECT_EQ(json::parse(WrittenFilesJson({"/tmp/a.txt"})),
            json::parse(R"([{"path":"/tmp/a.txt","name":"a.txt","type":"file"}])"));
}

TEST(E2bEnvdTest, MetadataComesFromHeadersWithinTheCaps) {
  absl::StatusOr<FileMetadata> m = MetadataFromHeaders(
      {{"content-type", "text/plain"}, {"x-metadata-owner", "ada"}, {"X-Metadata-Build-Id", "42"}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, (FileMetadata{{"build-id", "42"}, {"owner", "ada"}}));
  EXPECT_EQ(json::parse(WrittenFilesJson({"/root/a"}, *m)),
            json::parse(R"([{"path":"/root/a","name":"a","type":"file",
                             "metadata":{"build-id":"42","owner":"ada"}}])"));
  EXPECT_TRUE(MetadataFromHeaders({})->empty());
  EXPECT_FALSE(MetadataFromHeaders({{"x-metadata-", "v"}}).ok());
  EXPECT_FALSE(MetadataFromHeaders({{"x-metadata-a b", "v"}}).ok());
  EXPECT_FALSE(MetadataFromHeaders({{"x-metadata-k", "caf\xc3\xa9"}}).ok());
  EXPECT_FALSE(
      MetadataFromHeaders({{"x-metadata-k", std::string(kMaxMetadataValueBytes + 1, 'v')}}).ok());
  EXPECT_FALSE(MetadataFromHeaders({{"x-metadata-k", "1"}, {"x-metadata-K", "2"}}).ok());
  std::vector<std::pair<std::string, std::string>> many;
  for (size_t i = 0; i <= kMaxFileMetadata; ++i)
    many.emplace_back(absl::StrCat("x-metadata-", i), "v");
  EXPECT_FALSE(MetadataFromHeaders(many).ok());
  FsEntry e{.name = "a", .path = "/a", .type = FsType::kFile, .metadata = {{"k", "v"}}};
  EXPECT_EQ(json::parse(EntryResponseJson(e))["entry"]["metadata"], json::parse(R"({"k":"v"})"));
}

TEST(E2bEnvdTest, PathsAndUsers) {
  EXPECT_EQ(*ResolvePath("/etc/x", "/root"), "/etc/x");
  EXPECT_EQ(*ResolvePath("a/b", "/home/user"), "/home/user/a/b");
  EXPECT_EQ(*ResolvePath("~/a", "/root"), "/root/a");
  EXPECT_FALSE(ResolvePath("", "/root").ok());
  EXPECT_FALSE(ResolvePath(std::string("a\0b", 3), "/root").ok());
  EXPECT_EQ(BasicAuthUser("Basic " + absl::Base64Escape("user:")), "user");
  EXPECT_EQ(BasicAuthUser("Basic " + absl::Base64Escape("root:x")), "root");
  EXPECT_EQ(BasicAuthUser("Basic " + absl::Base64Escape(":")), std::nullopt);
  EXPECT_EQ(BasicAuthUser("Bearer abc"), std::nullopt);
}

}  // namespace
}  // namespace airlock::gateway::e2b
