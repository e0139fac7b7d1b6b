#include "src/cli/run_args.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(RunArgsTest, ParsesImageOptionsAndCommand) {
  absl::StatusOr<RunArgs> r =
      ParseRunArgs({"-e", "A=1", "--env=B=2", "-w", "/tmp", "-u", "app:staff", "--timeout", "1.5",
                    "img:1", "--", "ls", "-l"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->image, "img:1");
  EXPECT_EQ(r->env, (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_EQ(r->workdir, "/tmp");
  EXPECT_EQ(r->user, "app:staff");
  EXPECT_DOUBLE_EQ(r->timeout_seconds, 1.5);
  EXPECT_EQ(r->command, (std::vector<std::string>{"ls", "-l"}));
}

TEST(RunArgsTest, DefaultImageAndCommandWithoutSeparator) {
  absl::StatusOr<RunArgs> r = ParseRunArgs({"--", "python3", "-c", "print(1)"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->image, "");
  EXPECT_EQ(r->command.size(), 3u);
  r = ParseRunArgs({"img", "python3", "-c", "x"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->image, "img");
  EXPECT_EQ(r->command, (std::vector<std::string>{"python3", "-c", "x"}));
}

TEST(RunArgsTest, ATerminal) {
  for (const char* flag : {"-t", "--tty", "-it", "-ti"}) {
    absl::StatusOr<RunArgs> r = ParseRunArgs({flag, "--", "bash"});
    ASSERT_TRUE(r.ok()) << flag;
    EXPECT_TRUE(r->tty) << flag;
    EXPECT_EQ(r->command, std::vector<std::string>{"bash"});
  }
  absl::StatusOr<RunArgs> r = ParseRunArgs({"-i", "--", "cat"});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->tty);
}

TEST(RunArgsTest, AWorkspaceAndItsCap) {
  absl::StatusOr<RunArgs> r =
      ParseRunArgs({"--workspace", ".", "--workspace-max", "100m", "--", "make", "test"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->workspace, ".");
  EXPECT_EQ(r->workspace_max, 100ull << 20);
  EXPECT_FALSE(ParseRunArgs({"--workspace", "", "--", "x"}).ok());
  EXPECT_FALSE(ParseRunArgs({"--workspace-max", "lots", "--", "x"}).ok());
}

TEST(RunArgsTest, ErrorsSayWhatToDo) {
  EXPECT_NE(ParseRunArgs({}).status().message().find("after --"), absl::string_view::npos);
  EXPECT_FALSE(ParseRunArgs({"--timeout", "-3", "--", "x"}).ok());
  EXPECT_FALSE(ParseRunArgs({"--timeout", "abc", "--", "x"}).ok());
  EXPECT_FALSE(ParseRunArgs({"-w", "relative", "--", "x"}).ok());
  EXPECT_FALSE(ParseRunArgs({"--bogus", "--", "x"}).ok());
  EXPECT_FALSE(ParseRunArgs({"-e"}).ok());
  EXPECT_FALSE(ParseRunArgs({"--memory", "1", "--", "x"}).ok());
  EXPECT_NE(ParseRunArgs({"--user", "app:", "--", "x"}).status().message().find("GID"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace airlock
