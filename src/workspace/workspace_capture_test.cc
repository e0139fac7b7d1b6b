#include "src/workspace/workspace_capture.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>

#include "src/testing/test_util.h"

namespace airlock {
namespace {

using testing::Debugfs;
using testing::Fsck;
using testing::TempDir;

void Write(const std::string& path, const std::string& content, mode_t mode = 0644) {
  std::ofstream(path) << content;
  chmod(path.c_str(), mode);
}

const BaseEntry* Find(const WorkspaceTree& tree, const std::string& path) {
  for (const BaseEntry& e : tree.entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    project_ = dir_.File("project");
    mkdir(project_.c_str(), 0755);
    mkdir((project_ + "/src").c_str(), 0755);
    mkdir((project_ + "/build").c_str(), 0755);
    mkdir((project_ + "/.git").c_str(), 0755);
    Write(project_ + "/src/main.c", "int main() { return 0; }\n");
    Write(project_ + "/run.sh", "#!/bin/sh\necho hi\n", 04755);
    Write(project_ + "/build/out.o", std::string(100000, 'x'));
    Write(project_ + "/debug.log", "noise");
    Write(project_ + "/.git/HEAD", "ref: refs/heads/main\n");
    Write(project_ + "/.airlockignore", "# build output\nbuild/\n*.log\n");
    symlink("/etc/shadow", (project_ + "/shadow").c_str());
    symlink("..", (project_ + "/src/up").c_str());
    mkfifo((project_ + "/fifo").c_str(), 0644);
  }
  TempDir dir_;
  std::string project_;
};

TEST_F(CaptureTest, TheProjectBecomesAnImageWithoutWhatIsIgnoredOrSpecial) {
  std::string image = dir_.File("ws.ext4");
  absl::StatusOr<CapturedWorkspace> captured = CaptureWorkspace(project_, image, {});
  ASSERT_TRUE(captured.ok()) << captured.status();
  std::string fsck;
  EXPECT_EQ(Fsck(image, &fsck), 0) << fsck;
  EXPECT_EQ(Debugfs(image, "cat /src/main.c"), "int main() { return 0; }\n");
  EXPECT_EQ(Debugfs(image, "cat /.git/HEAD"), "ref: refs/heads/main\n");
  // Symlinks stay symlinks with their targets verbatim; nothing was followed.
  EXPECT_NE(Debugfs(image, "stat /shadow").find("Fast link dest: \"/etc/shadow\""),
            std::string::npos);
  EXPECT_NE(Debugfs(image, "stat /src/up").find("Fast link dest: \"..\""), std::string::npos);
  // Ignored and special files are not in the image.
  EXPECT_NE(Debugfs(image, "stat /build").find("not found"), std::string::npos);
  EXPECT_NE(Debugfs(image, "stat /debug.log").find("not found"), std::string::npos);
  EXPECT_NE(Debugfs(image, "stat /fifo").find("not found"), std::string::npos);
  // Owned by root, set-id bits dropped.
  std::string run = Debugfs(image, "stat /run.sh");
  EXPECT_NE(run.find("User:     0   Group:     0"), std::string::npos) << run;
  EXPECT_NE(run.find("Mode:  0755"), std::string::npos) << run;

  const WorkspaceTree& tree = captured->tree;
  EXPECT_EQ(Find(tree, "build/out.o"), nullptr);
  EXPECT_EQ(Find(tree, "fifo"), nullptr);
  ASSERT_NE(Find(tree, "shadow"), nullptr);
  EXPECT_EQ(Find(tree, "shadow")->target, "/etc/shadow");
  ASSERT_NE(Find(tree, "src/main.c"), nullptr);
  EXPECT_EQ(Find(tree, "src/main.c")->sha256,
            "deac66ccb79f6d31c0fa7d358de48e083c15c02ff50ec1ebd4b64314b9e6e196");
  for (size_t i = 1; i < tree.entries.size(); ++i) {
    EXPECT_LT(tree.entries[i - 1].path, tree.entries[i].path);
  }
  // The same tree twice has the same digest; a changed byte changes it.
  absl::StatusOr<WorkspaceTree> again = DescribeWorkspace(project_, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->digest, tree.digest);
  Write(project_ + "/src/main.c", "int main() { return 1; }\n");
  absl::StatusOr<WorkspaceTree> changed = DescribeWorkspace(project_, {});
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->digest, tree.digest);
}

TEST_F(CaptureTest, AProjectOverTheCapNamesItsLargestDirectories) {
  Write(project_ + "/.airlockignore", "");
  absl::StatusOr<CapturedWorkspace> captured =
      CaptureWorkspace(project_, dir_.File("ws.ext4"), {.max_bytes = 50000});
  ASSERT_FALSE(captured.ok());
  std::string message(captured.status().message());
  EXPECT_NE(message.find("over the workspace cap of 49 KiB"), std::string::npos) << message;
  EXPECT_NE(message.find("build/ 98 KiB"), std::string::npos) << message;
  EXPECT_NE(message.find(".airlockignore"), std::string::npos) << message;
}

// .env files hold secrets by convention: left out unless the .airlockignore takes them in again.
TEST_F(CaptureTest, DotEnvFilesAreLeftOutUnlessTheProjectTakesThemIn) {
  Write(project_ + "/.env", "API_KEY=secret\n");
  Write(project_ + "/.env.local", "API_KEY=secret\n");
  Write(project_ + "/.env.example", "API_KEY=\n");
  Write(project_ + "/src/.env", "DB_PASSWORD=secret\n");
  absl::StatusOr<WorkspaceTree> tree = DescribeWorkspace(project_, {});
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(Find(*tree, ".env"), nullptr);
  EXPECT_EQ(Find(*tree, ".env.local"), nullptr);
  EXPECT_EQ(Find(*tree, "src/.env"), nullptr);
  EXPECT_NE(Find(*tree, ".env.example"), nullptr);
  EXPECT_NE(Find(*tree, "src/main.c"), nullptr);
  Write(project_ + "/.airlockignore", "build/\n*.log\n!/.env\n");
  tree = DescribeWorkspace(project_, {});
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_NE(Find(*tree, ".env"), nullptr);
  EXPECT_EQ(Find(*tree, "src/.env"), nullptr);
}

// A .git/config with credentials in it is refused with what to do; one without is captured.
TEST_F(CaptureTest, AGitConfigHoldingCredentialsIsRefused) {
  Write(project_ + "/.git/config",
        "[remote \"origin\"]\n\turl = https://github.com/a/b.git\n"
        "# url = https://old:password@example.com/x\n");
  ASSERT_TRUE(DescribeWorkspace(project_, {}).ok());
  Write(project_ + "/.git/config",
        "[remote \"origin\"]\n\turl = https://ci:ghp_token@github.com/a/b.git\n");
  absl::StatusOr<WorkspaceTree> refused = DescribeWorkspace(project_, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("holds credentials (a remote URL with a password)"),
            std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("git remote set-url"), std::string::npos);
  EXPECT_EQ(GitConfigCredentials("[http]\n\textraHeader = AUTHORIZATION: basic eA==\n"),
            "an http.extraHeader");
  EXPECT_EQ(GitConfigCredentials("[remote \"o\"]\n\turl = ssh://git@github.com/a/b\n"), "");
  EXPECT_EQ(GitConfigCredentials("\turl = https://user@host/x\n"), "");  // a name, no password
}

TEST_F(CaptureTest, BadInputIsRefusedWithWhatToDo) {
  std::string file = dir_.File("file");
  Write(file, "x");
  absl::StatusOr<CapturedWorkspace> not_dir = CaptureWorkspace(file, dir_.File("a.ext4"), {});
  ASSERT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.status().message().find("is not a directory"), std::string::npos);
  absl::StatusOr<CapturedWorkspace> missing =
      CaptureWorkspace(dir_.File("nope"), dir_.File("a.ext4"), {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  Write(project_ + "/.airlockignore", "ok\n[unterminated\n");
  absl::StatusOr<CapturedWorkspace> bad_rules = CaptureWorkspace(project_, dir_.File("a.ext4"), {});
  ASSERT_FALSE(bad_rules.ok());
  EXPECT_NE(bad_rules.status().message().find("line 2"), std::string::npos) << bad_rules.status();
}

}  // namespace
}  // namespace airlock
