#include "src/cli/cli_app.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "src/cli/cli_commands.h"
#include "src/common/file_util.h"
#include "src/common/subprocess.h"

namespace airlock {
namespace {

void AddEverything(Cli& cli) {
  AddRunCommand(cli);
  AddSessionCommands(cli);
  AddPortForwardCommand(cli);
  AddExposeCommand(cli);
  AddApiKeyCommand(cli);
  AddVolumeCommand(cli);
  AddLogCommand(cli);
  AddWorkspaceCommands(cli);
  AddNetworkCommand(cli);
  AddSecretCommand(cli);
  AddAgentCommand(cli);
  AddMcpCommand(cli);
  AddImageCommand(cli);
  AddAuditCommand(cli);
  AddDashboardCommand(cli);
  AddDoctorCommand(cli);
  cli.AddCompletion();
}

// Every command's words, e.g. {"image", "pull"}.
std::vector<std::vector<std::string>> Commands(const CLI::App& app) {
  std::vector<std::vector<std::string>> out;
  std::function<void(const CLI::App*, std::vector<std::string>)> walk =
      [&](const CLI::App* at, std::vector<std::string> path) {
        for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
          std::vector<std::string> p = path;
          p.push_back(sub->get_name());
          out.push_back(p);
          walk(sub, p);
        }
      };
  walk(&app, {});
  return out;
}

TEST(CliAppTest, VersionPrintsTheVersionAndRunsNothing) {
  Cli cli;
  AddEverything(cli);
  testing::internal::CaptureStdout();
  absl::Status s = cli.Parse({"--version"});
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(cli.help_shown());
  EXPECT_TRUE(absl::StartsWith(out, "airlock ")) << out;
  EXPECT_NE(out.find('.'), std::string::npos) << out;  // a version number
}

TEST(CliAppTest, EveryCommandAnswersHelp) {
  Cli names;
  AddEverything(names);
  std::vector<std::vector<std::string>> commands = Commands(names.app());
  ASSERT_GT(commands.size(), 30u);
  for (std::vector<std::string> words : commands) {
    Cli cli;  // a tree parses once
    AddEverything(cli);
    words.push_back("--help");
    testing::internal::CaptureStdout();
    absl::Status s = cli.Parse(words);
    std::string help = testing::internal::GetCapturedStdout();
    EXPECT_TRUE(s.ok()) << words[0] << ": " << s;
    EXPECT_TRUE(cli.help_shown()) << words[0];
    EXPECT_NE(help.find("Usage:"), std::string::npos) << help;
    // Laid out for 80 columns: only a word that long itself (a path, an example) goes past.
    for (absl::string_view line : absl::StrSplit(help, '\n')) {
      size_t last_space = line.rfind(' ');
      bool one_long_word = last_space != absl::string_view::npos && line.size() - last_space > 40;
      EXPECT_TRUE(line.size() <= 80 || one_long_word) << words[0] << ": " << line;
    }
  }
}

TEST(CliAppTest, TopLevelHelpListsEveryCommand) {
  Cli cli;
  AddEverything(cli);
  std::string help = cli.app().help();
  for (const char* command :
       {"run",    "session",    "exec",   "ls",           "ps",      "hosts",  "quota", "logs",
        "log",    "metrics",    "watch",  "rm",           "pause",   "resume", "fork",  "file",
        "diff",   "promote",    "sync",   "network",      "secret",  "agent",  "mcp",   "image",
        "doctor", "completion", "expose", "port-forward", "api-key", "blobs"}) {
    EXPECT_NE(help.find(std::string("  ") + command + " "), std::string::npos) << command;
  }
  Cli image;
  AddEverything(image);
  testing::internal::CaptureStdout();
  ASSERT_TRUE(image.Parse({"image", "--help"}).ok());
  std::string image_help = testing::internal::GetCapturedStdout();
  for (const char* sub : {"pull", "import", "build", "push", "ls", "rm", "prune"}) {
    EXPECT_NE(image_help.find(std::string("  ") + sub + " "), std::string::npos) << sub;
  }
}

TEST(CliAppTest, MistakesNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"ls", "--bogus"}, "--bogus"},
           {{"fork", "0123456789ab", "-n", "0"}, "--count needs a whole number from 1, not \"0\""},
           {{"session", "create", "--memory", "lots"}, "512m"},
           {{"session", "create", "--idle-timeout", "soon"}, "is not a duration"},
           {{"ls", "--json", "-q"}, "excludes"},
           {{"log", "0123456789ab", "--open"}, "--html"},
           {{"network", "allow", "0123456789ab", "*"}, ""},
           {{"exec"}, "ID is required"},
           {{"ls", "--", "x"}, "nothing after --"},
           {{"nosuch"}, "nosuch"},
           {{"nosuch", "--help"}, "unknown command \"nosuch\""},
           {{"image", "nosuch", "--help"}, "unknown command \"nosuch\""},
           {{"image"}, "needs one of its commands: pull"},
           {{"network", "bogus"}, "needs one of its commands: ls, allow"},
       }) {
    Cli cli;
    AddEverything(cli);
    absl::Status s = cli.Parse(c.args);
    EXPECT_FALSE(s.ok()) << c.args[0];
    EXPECT_NE(s.message().find(c.says), absl::string_view::npos) << s;
  }
}

TEST(CliAppTest, BashCompletionIsBashAndKnowsEveryCommand) {
  Cli cli;
  AddEverything(cli);
  testing::internal::CaptureStdout();
  cli.PrintBashCompletion();
  std::string script = testing::internal::GetCapturedStdout();
  for (const std::vector<std::string>& words : Commands(cli.app())) {
    EXPECT_NE(script.find(words.back()), std::string::npos) << words.back();
  }
  EXPECT_NE(script.find("--idle-timeout"), std::string::npos);
  EXPECT_NE(script.find("complete -F _airlock airlock"), std::string::npos);
  // bash reads it, and completes as a user would see it.
  char dir[] = "/tmp/airlock-completion-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string file = std::string(dir) + "/airlock.bash";
  ASSERT_TRUE(WriteFileAtomically(file, script, 0600).ok());
  std::string probe =
      std::string("source ") + file +
      "\n"
      "COMP_WORDS=(airlock ima); COMP_CWORD=1; _airlock; echo \"[${COMPREPLY[*]}]\"\n"
      "COMP_WORDS=(airlock image p); COMP_CWORD=2; _airlock; "
      "echo \"[${COMPREPLY[*]}]\"\n"
      "COMP_WORDS=(airlock session create --idle); COMP_CWORD=3; _airlock; "
      "echo \"[${COMPREPLY[*]}]\"\n";
  absl::StatusOr<ProcessResult> r = RunProcess({"/bin/bash", "--noprofile", "--norc", "-c", probe});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_EQ(r->output, "[image]\n[pull push prune]\n[--idle-timeout]\n");
  unlink(file.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace airlock
