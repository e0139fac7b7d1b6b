#include "src/cli/run_args.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

// Parses `airlock run ARGS` as the command line does; nothing runs.
absl::StatusOr<RunArgs> ParseRun(std::vector<std::string> args) {
  Cli cli;
  RunArgs out;
  AddRunOptions(cli, &out, [] { return 0; });
  args.insert(args.begin(), "run");
  if (absl::Status s = cli.Parse(args); !s.ok()) return s;
  if (absl::Status s = CheckRunArgs(out); !s.ok()) return s;
  return out;
}

TEST(RunArgsTest, ParsesImageOptionsAndCommand) {
  absl::StatusOr<RunArgs> r =
      ParseRun({"-e", "A=1", "--env=B=2", "-w", "/tmp", "-u", "app:staff", "--timeout", "1.5",
                "--memory", "1g", "--cpus=2", "img:1", "--", "ls", "-l"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->session.image, "img:1");
  EXPECT_EQ(r->env, (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_EQ(r->workdir, "/tmp");
  EXPECT_EQ(r->user, "app:staff");
  EXPECT_DOUBLE_EQ(r->timeout_seconds, 1.5);
  EXPECT_EQ(r->session.limits.memory_bytes(), 1ull << 30);
  EXPECT_EQ(r->session.limits.vcpus(), 2u);
  EXPECT_EQ(r->command, (std::vector<std::string>{"ls", "-l"}));
}

TEST(RunArgsTest, DefaultImageAndCommandWithoutSeparator) {
  absl::StatusOr<RunArgs> r = ParseRun({"--", "python3", "-c", "print(1)"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->session.image, "");
  EXPECT_EQ(r->command.size(), 3u);
  // After the image, everything is the command's, options and all.
  r = ParseRun({"--allow", "pypi.org", "img", "python3", "-c", "x", "--allow", "y"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->session.image, "img");
  EXPECT_EQ(r->session.allow, std::vector<std::string>{"pypi.org"});
  EXPECT_EQ(r->command, (std::vector<std::string>{"python3", "-c", "x", "--allow", "y"}));
  // Only the first -- separates; the command may hold more.
  r = ParseRun({"--", "sh", "-c", "echo", "--", "x"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->command, (std::vector<std::string>{"sh", "-c", "echo", "--", "x"}));
}

TEST(RunArgsTest, ATerminal) {
  for (const char* flag : {"-t", "--tty", "-it", "-ti"}) {
    absl::StatusOr<RunArgs> r = ParseRun({flag, "--", "bash"});
    ASSERT_TRUE(r.ok()) << flag << ": " << r.status();
    EXPECT_TRUE(r->tty) << flag;
    EXPECT_EQ(r->command, std::vector<std::string>{"bash"});
  }
  absl::StatusOr<RunArgs> r = ParseRun({"-i", "--", "cat"});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->tty);
}

TEST(RunArgsTest, RepeatedOptionsTakeOneValueEach) {
  absl::StatusOr<RunArgs> r = ParseRun({"--allow", "a.test", "--allow", "b.test:8443",
                                        "--allow-preset", "pypi", "-e", "X=1", "img"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->session.allow, (std::vector<std::string>{"a.test", "b.test:8443"}));
  EXPECT_EQ(r->session.allow_presets, std::vector<std::string>{"pypi"});
  EXPECT_EQ(r->session.image, "img");
}

TEST(RunArgsTest, AWorkspaceAndItsCap) {
  absl::StatusOr<RunArgs> r =
      ParseRun({"--workspace", ".", "--workspace-max", "100m", "--", "make", "test"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->session.workspace, ".");
  EXPECT_EQ(r->session.workspace_max, 100ull << 20);
  EXPECT_FALSE(ParseRun({"--workspace", "", "--", "x"}).ok());
  EXPECT_FALSE(ParseRun({"--workspace-max", "lots", "--", "x"}).ok());
}

TEST(RunArgsTest, ErrorsSayWhatToDo) {
  EXPECT_NE(ParseRun({}).status().message().find("after --"), absl::string_view::npos);
  EXPECT_FALSE(ParseRun({"--timeout", "-3", "--", "x"}).ok());
  EXPECT_NE(ParseRun({"--timeout", "abc", "--", "x"}).status().message().find("seconds"),
            absl::string_view::npos);
  EXPECT_FALSE(ParseRun({"-w", "relative", "--", "x"}).ok());
  EXPECT_FALSE(ParseRun({"--bogus", "--", "x"}).ok());
  EXPECT_NE(ParseRun({"--bogus", "x"}).status().message().find("unknown option --bogus"),
            absl::string_view::npos);
  EXPECT_FALSE(ParseRun({"-e"}).ok());
  EXPECT_NE(ParseRun({"--memory", "lots", "--", "x"}).status().message().find("512m"),
            absl::string_view::npos);
  EXPECT_NE(ParseRun({"--cpus", "0", "--", "x"}).status().message().find("a whole number from 1"),
            absl::string_view::npos);
  EXPECT_NE(ParseRun({"--allow", "*", "--", "x"}).status().message(), "");
  EXPECT_NE(ParseRun({"--user", "app:", "--", "x"}).status().message().find("GID"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace airlock
