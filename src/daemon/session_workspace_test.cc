#include "src/daemon/session_workspace.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "src/common/workspace_change.h"
#include "src/testing/fake_guest.h"

namespace airlock {
namespace {

// Plays the guest's side of one command: checks what the host asked to run, sends `out` as its
// stdout, and exits with `code` unless the host signals it first.
std::vector<std::string> ServeCommand(FakeGuest& g, const std::string& out, int code,
                                      bool* signalled = nullptr) {
  Frame start = g.ReceiveRequest();
  EXPECT_EQ(start.type, FrameType::kExecStart);
  PayloadReader r(start.payload);
  std::vector<std::string> argv;
  r.StrList(&argv);
  for (size_t at = 0; at < out.size(); at += kMaxPayload) {
    g.Send(FrameType::kStdout, start.stream, out.substr(at, kMaxPayload));
  }
  if (signalled != nullptr) {
    Frame next = g.ReceiveRequest();
    *signalled = next.type == FrameType::kSignal;
  }
  g.Send(FrameType::kExit, start.stream, PayloadWriter().U32(0).I32(code).Str("").bytes());
  return argv;
}

SessionRecord Session() {
  SessionRecord s;
  s.id = "0123456789ab";
  s.workspace.path = "/src/proj";
  s.workspace.head = std::string(40, 'a');
  s.workspace.tree_digest = "sha256:" + std::string(64, 'b');
  return s;
}

TEST(SessionWorkspaceTest, ABadListOfChangesFromTheGuestIsAnError) {
  FakeGuest g;
  g.Handshake();
  absl::Status listed;
  std::vector<std::string> seen;
  std::thread host([&] {
    listed = ListWorkspaceChanges(*g.channel_, v1::WorkspaceInfo(), [&](v1::WorkspaceChange c) {
      seen.push_back(c.path());
      return absl::OkStatus();
    });
  });
  WorkspaceChange good;
  good.kind = ChangeKind::kAdded;
  good.path = "ok";
  good.new_mode = 0100644;
  WorkspaceChange bad = good;
  bad.path = "../../etc/passwd";
  std::vector<std::string> argv =
      ServeCommand(g, EncodeWorkspaceChange(good) + EncodeWorkspaceChange(bad), 0, nullptr);
  host.join();
  EXPECT_EQ(argv, (std::vector<std::string>{kGuestAgentPath, kWorkspaceDiffCommand}));
  EXPECT_EQ(listed.code(), absl::StatusCode::kDataLoss) << listed;
  EXPECT_NE(listed.message().find("not a clean relative path"), std::string::npos) << listed;
  for (const std::string& path : seen) EXPECT_EQ(path, "ok");
}

TEST(SessionWorkspaceTest, ABundleOverTheCapIsRefusedAndItsCommandKilled) {
  FakeGuest g;
  g.Handshake();
  v1::WorkspaceBundleInfo info;
  info.set_base_commit(std::string(40, 'a'));
  info.set_ref("refs/airlock/promote");
  absl::StatusOr<std::string> digest;
  std::string received;
  std::thread host([&] {
    digest = StreamBundle(
        *g.channel_, Session(), info,
        [&](std::string_view bytes) {
          received.append(bytes.data(), bytes.size());
          return absl::OkStatus();
        },
        100000);
  });
  bool signalled = false;
  std::vector<std::string> argv = ServeCommand(g, std::string(200000, 'x'), 0, &signalled);
  host.join();
  EXPECT_EQ(digest.status().code(), absl::StatusCode::kResourceExhausted) << digest.status();
  EXPECT_TRUE(signalled);
  EXPECT_LE(received.size(), 100000u);
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[argv.size() - 1], "^" + std::string(40, 'a'));
}

TEST(SessionWorkspaceTest, AHeadThatIsNotACommitIdIsRefused) {
  FakeGuest g;
  g.Handshake();
  absl::StatusOr<v1::WorkspaceBundleInfo> info;
  std::thread host([&] { info = PrepareBundle(*g.channel_, Session(), false, true); });
  ServeCommand(g, "--upload-pack=touch /tmp/x\n", 0);
  host.join();
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss) << info.status();
}

TEST(SessionWorkspaceTest, PromoteNeedsAGitProject) {
  FakeGuest g;
  g.Handshake();
  SessionRecord plain = Session();
  plain.workspace.head.clear();
  absl::StatusOr<v1::WorkspaceBundleInfo> info = PrepareBundle(*g.channel_, plain, false, false);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(info.status().message().find("airlock diff"), std::string::npos) << info.status();
}

}  // namespace
}  // namespace airlock
