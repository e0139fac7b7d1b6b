// Bad input to airlockd's API, as a careless or hostile client sends it straight to the socket
// (no CLI or SDK in between): every call is refused with INVALID_ARGUMENT and a message that
// says what to do, before the daemon looks anything up, and nothing changes.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/airlock/v1/airlock.grpc.pb.h"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

class ApiInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* socket = getenv("AIRLOCK_SOCKET");
    ASSERT_NE(socket, nullptr);
    ASSERT_EQ(RunAirlock({"ls"}).exit_code, 0);  // the CLI starts the test's airlockd
    channel_ =
        grpc::CreateChannel(std::string("unix:") + socket, grpc::InsecureChannelCredentials());
    sessions_ = v1::Sessions::NewStub(channel_);
    network_ = v1::Network::NewStub(channel_);
    secrets_ = v1::Secrets::NewStub(channel_);
    workspaces_ = v1::Workspaces::NewStub(channel_);
  }

  // The status of a server stream: its first message, then how it ended.
  template <typename Reply, typename Open>
  static grpc::Status StreamStatus(Open open) {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<Reply>> reader = open(&context);
    Reply reply;
    while (reader->Read(&reply)) {
    }
    return reader->Finish();
  }

  // Every call that names a session, each with `id` for its session.
  std::vector<std::pair<std::string, std::function<grpc::Status(const std::string&)>>> Calls() {
    using S = std::function<grpc::Status(const std::string&)>;
    std::vector<std::pair<std::string, S>> calls;
    auto unary = [&](const std::string& name, S call) { calls.emplace_back(name, call); };
    unary("Sessions.Get", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::GetSessionRequest r;
      r.set_id(id);
      v1::Session out;
      return sessions_->Get(&c, r, &out);
    });
    unary("Sessions.Remove", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::RemoveSessionRequest r;
      r.set_id(id);
      v1::RemoveSessionResponse out;
      return sessions_->Remove(&c, r, &out);
    });
    unary("Sessions.Pause", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::PauseSessionRequest r;
      r.set_id(id);
      v1::Session out;
      return sessions_->Pause(&c, r, &out);
    });
    unary("Sessions.Resume", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::ResumeSessionRequest r;
      r.set_id(id);
      v1::Session out;
      return sessions_->Resume(&c, r, &out);
    });
    unary("Sessions.Fork", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::ForkSessionRequest r;
      r.set_id(id);
      v1::ForkSessionResponse out;
      return sessions_->Fork(&c, r, &out);
    });
    unary("Sessions.WriteFile", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::WriteFileRequest r;
      r.set_session_id(id);
      r.set_path("/tmp/x");
      v1::WriteFileResponse out;
      return sessions_->WriteFile(&c, r, &out);
    });
    unary("Sessions.ReadFile", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::ReadFileRequest r;
      r.set_session_id(id);
      r.set_path("/etc/hostname");
      v1::ReadFileResponse out;
      return sessions_->ReadFile(&c, r, &out);
    });
    unary("Sessions.ReadFileStream", [&](const std::string& id) {
      v1::ReadFileStreamRequest r;
      r.set_session_id(id);
      r.set_path("/etc/hostname");
      return StreamStatus<v1::ReadFileChunk>(
          [&](grpc::ClientContext* c) { return sessions_->ReadFileStream(c, r); });
    });
    unary("Sessions.WriteFileStream", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::WriteFileResponse out;
      auto writer = sessions_->WriteFileStream(&c, &out);
      v1::WriteFileChunk chunk;
      chunk.set_session_id(id);
      chunk.set_path("/tmp/x");
      chunk.set_last(true);
      writer->Write(chunk);
      writer->WritesDone();
      return writer->Finish();
    });
    unary("Sessions.Exec", [&](const std::string& id) {
      grpc::ClientContext c;
      auto stream = sessions_->Exec(&c);
      v1::ExecRequest start;
      start.mutable_start()->set_session_id(id);
      start.mutable_start()->add_argv("true");
      stream->Write(start);
      stream->WritesDone();
      v1::ExecResponse reply;
      while (stream->Read(&reply)) {
      }
      return stream->Finish();
    });
    unary("Sessions.Logs", [&](const std::string& id) {
      v1::LogsRequest r;
      r.set_session_id(id);
      return StreamStatus<v1::LogEntry>(
          [&](grpc::ClientContext* c) { return sessions_->Logs(c, r); });
    });
    unary("Sessions.Metrics", [&](const std::string& id) {
      v1::MetricsRequest r;
      r.set_session_id(id);
      r.set_once(true);
      return StreamStatus<v1::MetricsSample>(
          [&](grpc::ClientContext* c) { return sessions_->Metrics(c, r); });
    });
    unary("Sessions.Timeline", [&](const std::string& id) {
      v1::TimelineRequest r;
      r.set_session_id(id);
      return StreamStatus<v1::TimelineEvent>(
          [&](grpc::ClientContext* c) { return sessions_->Timeline(c, r); });
    });
    unary("Network.Get", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::GetNetworkRequest r;
      r.set_session_id(id);
      v1::NetworkPolicy out;
      return network_->Get(&c, r, &out);
    });
    unary("Network.Change", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::ChangeNetworkRequest r;
      r.set_session_id(id);
      r.add_allow("example.com");
      v1::NetworkPolicy out;
      return network_->Change(&c, r, &out);
    });
    unary("Network.Log", [&](const std::string& id) {
      v1::NetworkLogRequest r;
      r.set_session_id(id);
      return StreamStatus<v1::NetworkEvent>(
          [&](grpc::ClientContext* c) { return network_->Log(c, r); });
    });
    unary("Secrets.List", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::ListSecretsRequest r;
      r.set_session_id(id);
      v1::ListSecretsResponse out;
      return secrets_->List(&c, r, &out);
    });
    unary("Secrets.Set", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::SetSecretsRequest r;
      r.set_session_id(id);
      v1::ListSecretsResponse out;
      return secrets_->Set(&c, r, &out);
    });
    unary("Secrets.Remove", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::RemoveSecretsRequest r;
      r.set_session_id(id);
      r.add_names("TOKEN");
      v1::ListSecretsResponse out;
      return secrets_->Remove(&c, r, &out);
    });
    unary("Workspaces.Get", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::GetWorkspaceRequest r;
      r.set_session_id(id);
      v1::WorkspaceInfo out;
      return workspaces_->Get(&c, r, &out);
    });
    unary("Workspaces.Diff", [&](const std::string& id) {
      v1::WorkspaceDiffRequest r;
      r.set_session_id(id);
      return StreamStatus<v1::WorkspaceChange>(
          [&](grpc::ClientContext* c) { return workspaces_->Diff(c, r); });
    });
    unary("Workspaces.Bundle", [&](const std::string& id) {
      v1::WorkspaceBundleRequest r;
      r.set_session_id(id);
      return StreamStatus<v1::WorkspaceBundleChunk>(
          [&](grpc::ClientContext* c) { return workspaces_->Bundle(c, r); });
    });
    unary("Workspaces.Sync", [&](const std::string& id) {
      grpc::ClientContext c;
      v1::WorkspaceSyncReply out;
      auto writer = workspaces_->Sync(&c, &out);
      v1::WorkspaceSyncChunk chunk;
      chunk.set_session_id(id);
      chunk.mutable_base();
      writer->Write(chunk);
      writer->WritesDone();
      return writer->Finish();
    });
    return calls;
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sessions::Stub> sessions_;
  std::unique_ptr<v1::Network::Stub> network_;
  std::unique_ptr<v1::Secrets::Stub> secrets_;
  std::unique_ptr<v1::Workspaces::Stub> workspaces_;
};

TEST_F(ApiInputTest, IdsThatAreNotIdsAreRefusedBeforeAnyLookup) {
  const std::vector<std::string> bad = {
      "",                          // missing
      "0123456789AB",              // upper case
      "0123456789abc",             // too long
      "0123456789a",               // too short
      "../../etc/pw",              // a path
      "0123456789a%",              // not hex
      std::string(64 << 10, 'a'),  // oversized
      std::string("01234\0"
                  "56789a",
                  12),  // a NUL inside
  };
  for (const auto& [name, call] : Calls()) {
    for (const std::string& id : bad) {
      if (id.empty() && name == "Sessions.Exec") continue;  // no id: a one-shot run of its own
      grpc::Status status = call(id);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << name << " with id \"" << id.substr(0, 20) << "\": " << status.error_message();
      bool says_what =
          status.error_message().find("12 lowercase hex digits") != std::string::npos ||
          status.error_message().find("give a session id") != std::string::npos;
      EXPECT_TRUE(says_what) << name << ": " << status.error_message();
      EXPECT_LT(status.error_message().size(), 200u) << name;  // the id is not echoed whole
    }
    // An id of the right shape passes: the call fails for what else it lacks, or the
    // session is not found (it is no one's).
    grpc::Status status = call("0123456789ab");
    EXPECT_EQ(status.error_message().find("12 lowercase hex digits"), std::string::npos) << name;
    EXPECT_TRUE(status.error_code() == grpc::StatusCode::NOT_FOUND ||
                status.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << name << ": " << status.error_message();
  }
}

TEST_F(ApiInputTest, MissingAndOversizedFieldsSayWhatToSend) {
  auto expect_invalid = [](const grpc::Status& status, const std::string& says) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  {  // an Exec whose first message is not its start
    grpc::ClientContext c;
    auto stream = sessions_->Exec(&c);
    v1::ExecRequest stdin_first;
    stdin_first.set_stdin("data");
    stream->Write(stdin_first);
    stream->WritesDone();
    v1::ExecResponse reply;
    while (stream->Read(&reply)) {
    }
    expect_invalid(stream->Finish(), "first message of Exec must be an ExecStart");
  }
  {  // a command line larger than the guest takes
    grpc::ClientContext c;
    auto stream = sessions_->Exec(&c);
    v1::ExecRequest start;
    start.mutable_start()->add_argv("echo");
    start.mutable_start()->add_argv(std::string(64 << 10, 'x'));
    stream->Write(start);
    stream->WritesDone();
    v1::ExecResponse reply;
    while (stream->Read(&reply)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {  // a file stream with no message at all
    grpc::ClientContext c;
    v1::WriteFileResponse out;
    auto writer = sessions_->WriteFileStream(&c, &out);
    writer->WritesDone();
    expect_invalid(writer->Finish(), "starts with a message naming the session and the file");
  }
  // Paths are checked before the session is looked up (this id is well-formed, and no one's).
  for (const std::string& path :
       {std::string(), std::string("relative"), "/" + std::string(5000, 'p')}) {
    grpc::ClientContext c;
    v1::WriteFileRequest r;
    r.set_session_id("0123456789ab");
    r.set_path(path);
    v1::WriteFileResponse out;
    expect_invalid(sessions_->WriteFile(&c, r, &out), "absolute path in the guest");
  }
  {
    grpc::ClientContext c;
    v1::WriteFileRequest r;
    r.set_session_id("0123456789ab");
    r.set_path("/tmp/x");
    r.set_mode(010000);
    v1::WriteFileResponse out;
    expect_invalid(sessions_->WriteFile(&c, r, &out), "permission bits");
  }
  {
    grpc::ClientContext c;
    v1::WriteFileRequest r;
    r.set_session_id("0123456789ab");
    r.set_path("/tmp/x");
    r.set_content(std::string((3 << 20) + 1, 'x'));
    v1::WriteFileResponse out;
    expect_invalid(sessions_->WriteFile(&c, r, &out), "use WriteFileStream");
  }
  {  // limits no VM can have
    grpc::ClientContext c;
    v1::CreateSessionRequest r;
    r.mutable_limits()->set_memory_bytes(uint64_t{1} << 50);
    v1::Session out;
    EXPECT_EQ(sessions_->Create(&c, r, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {  // more audit records than one call returns
    grpc::ClientContext c;
    auto audit = v1::Audit::NewStub(channel_);
    v1::ListAuditRequest r;
    r.set_limit(100001);
    auto reader = audit->List(&c, r);
    v1::AuditRecord record;
    EXPECT_FALSE(reader->Read(&record));
    expect_invalid(reader->Finish(), "at most 100000 records at once");
  }
}

TEST_F(ApiInputTest, AnImportThatIsNotWholeOrNotAnImageImportsNothing) {
  auto images = v1::Images::NewStub(channel_);
  auto import = [&](const std::vector<v1::ImportImageChunk>& chunks) {
    grpc::ClientContext c;
    v1::Image out;
    auto writer = images->Import(&c, &out);
    for (const v1::ImportImageChunk& chunk : chunks) writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  };
  auto listed = [&] {
    grpc::ClientContext c;
    v1::ListImagesResponse out;
    EXPECT_TRUE(images->List(&c, {}, &out).ok());
    return out.images_size();
  };
  int before = listed();
  auto expect_invalid = [](const grpc::Status& status, const std::string& says) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  expect_invalid(import({}), "starts with a message naming the image");
  v1::ImportImageChunk rootfs;
  rootfs.set_rootfs(true);
  rootfs.set_last(true);
  expect_invalid(import({rootfs}), "give the name to import it as");
  v1::ImportImageChunk named;
  named.set_name("Not A Name");
  expect_invalid(import({named}), "Not A Name");
  v1::ImportImageChunk first;
  first.set_name("api-test/partial:1");
  first.set_data(std::string(1000, 'x'));
  expect_invalid(import({first}), "nothing was imported");  // no `last`
  v1::ImportImageChunk huge;
  huge.set_data(std::string((1 << 20) + 1, 'x'));
  expect_invalid(import({first, huge}), "at most 1 MiB");
  v1::ImportImageChunk renamed;
  renamed.set_name("api-test/other:1");
  expect_invalid(import({first, renamed}), "only the first message");
  first.set_last(true);  // whole, but no archive at all
  grpc::Status garbage = import({first});
  EXPECT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error_code(), grpc::StatusCode::INTERNAL) << garbage.error_message();
  EXPECT_EQ(listed(), before);
  grpc::ClientContext c;
  v1::PullImageRequest pull;
  v1::ImageProgress progress;
  auto reader = images->Pull(&c, pull);  // no reference
  while (reader->Read(&progress)) {
  }
  expect_invalid(reader->Finish(), "name an image to pull");
}

// A build whose fields are not what they should be is refused before anything runs (no
// mmdebstrap, no npm, no build VM), each with what to write instead, and adds no image.
TEST_F(ApiInputTest, ABuildWithABadFieldIsRefusedBeforeItRuns) {
  auto images = v1::Images::NewStub(channel_);
  auto listed = [&] {
    grpc::ClientContext c;
    v1::ListImagesResponse out;
    EXPECT_TRUE(images->List(&c, {}, &out).ok());
    return out.images_size();
  };
  int before = listed();
  auto good = [] {
    v1::BuildImageRequest r;
    r.set_suite("bookworm");
    r.add_packages("python3");
    r.add_npm("opencode-ai@1.0.0");
    r.add_env("A=1");
    r.set_tag("api-test/build:1");
    return r;
  };
  auto expect_invalid = [&](const v1::BuildImageRequest& r, const std::string& says) {
    absl::Time start = absl::Now();
    grpc::Status status = StreamStatus<v1::BuildProgress>(
        [&](grpc::ClientContext* c) { return images->Build(c, r); });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "refused only after it ran: " << says;
  };
  v1::BuildImageRequest r = good();
  r.clear_suite();
  expect_invalid(r, "name the Debian suite");
  for (const char* suite : {"Bookworm", "../etc", "-bookworm", "bookworm stable"}) {
    r = good();
    r.set_suite(suite);
    expect_invalid(r, "is not a Debian suite name");
  }
  for (const char* package : {"", "Python3", "python3=3.11", "git,curl", "--include=x", "a b"}) {
    r = good();
    r.add_packages(package);
    expect_invalid(r, "is not a Debian package name");
  }
  for (const char* npm : {"", "./local", "file:../x", "git+https://x/y.git", "-g", "a b"}) {
    r = good();
    r.add_npm(npm);
    expect_invalid(r, "give a package of the registry");
  }
  for (const char* env : {"NOVALUE", "=1", "A B=1", "\x01=1"}) {
    r = good();
    r.add_env(env);
    expect_invalid(r, "is not KEY=VALUE");
  }
  r = good();
  r.add_env(std::string("A=") + std::string(1, '\0'));
  expect_invalid(r, "is not KEY=VALUE");
  r = good();
  r.clear_tag();
  expect_invalid(r, "give the image a name");
  r = good();
  r.set_tag("Not A Name");
  expect_invalid(r, "invalid image name");
  r = good();
  for (int i = 0; i < 600; ++i) r.add_packages("p" + std::to_string(i));
  expect_invalid(r, "name fewer");
  EXPECT_EQ(listed(), before);
}

// Streams that end the wrong way on a real session: the file is never half-written, and the
// session is not held (it pauses at once afterwards).
TEST_F(ApiInputTest, AFileStreamThatEndsWrongLeavesTheFileAndTheSession) {
  Result created = RunAirlock({"session", "create"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripTrailingAsciiWhitespace(created.out));
  ASSERT_EQ(RunAirlock({"file", "write", id, "/root/kept"}, "old\n").exit_code, 0);
  auto write = [&](const std::vector<v1::WriteFileChunk>& chunks, bool cancel) {
    grpc::ClientContext c;
    v1::WriteFileResponse out;
    auto writer = sessions_->WriteFileStream(&c, &out);
    for (const v1::WriteFileChunk& chunk : chunks) writer->Write(chunk);
    if (cancel) {
      c.TryCancel();  // the client goes away mid-stream
    } else {
      writer->WritesDone();
    }
    return writer->Finish();
  };
  v1::WriteFileChunk first;
  first.set_session_id(id);
  first.set_path("/root/kept");
  first.set_data(std::string(512 << 10, 'n'));
  v1::WriteFileChunk more;
  more.set_data(std::string(512 << 10, 'm'));

  grpc::Status status = write({first, more}, /*cancel=*/false);  // no `last`
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("left as it was"), std::string::npos);

  v1::WriteFileChunk renamed = more;
  renamed.set_session_id(id);  // only the first message names the session
  status = write({first, renamed}, false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();

  v1::WriteFileChunk huge;
  huge.set_data(std::string((1 << 20) + 1, 'h'));
  huge.set_last(true);
  status = write({first, huge}, false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("at most 1 MiB"), std::string::npos);

  status = write({first, more, more}, /*cancel=*/true);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();

  Result r =
      RunAirlock({"exec", id, "--", "sh", "-c", "cat /root/kept; ls -A /root | grep -c airlock"});
  EXPECT_EQ(r.out, "old\n0\n") << r.err;
  // Nothing holds the session once the calls are over: it pauses (a file stream still open in
  // the guest would make the snapshot refuse). The server may still be finishing the cancelled
  // call when the client has its status, hence a few tries while it says "in use".
  for (int tries = 0; tries < 50; ++tries) {
    r = RunAirlock({"pause", id});
    if (r.exit_code == 0 || r.err.find("in use") == std::string::npos) break;
    usleep(100 * 1000);
  }
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

}  // namespace
}  // namespace airlock
