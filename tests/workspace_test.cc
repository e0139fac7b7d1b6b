// Agent workspaces as a user meets them: a project goes into a session read-only under a
// writable /workspace, and the session's work comes back only as a diff or as commits on a
// review branch that host git verified, with nothing of the guest's .git ever run on the host.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"
#include "src/common/subprocess.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"

namespace airlock {
namespace {

// Host git on the test's project, with the test's own identity.
std::string Git(const std::string& repo, const std::vector<std::string>& args,
                int* code = nullptr) {
  std::vector<std::string> argv = {
      "/usr/bin/git", "-C", repo, "-c", "user.name=Host User", "-c", "user.email=host@example.com"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<ProcessResult> r = RunProcess(argv);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  if (code != nullptr) {
    *code = r->exit_code;
  } else {
    EXPECT_EQ(r->exit_code, 0) << absl::StrCat(args[0], ": ", r->output);
  }
  return std::string(absl::StripTrailingAsciiWhitespace(r->output));
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

std::string ReadFile(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFileToString(path, 1 << 24);
  return s.ok() ? *s : "<missing>";
}

// A git project with history, as a user has it.
struct Project {
  Project() {
    Git(dir.path, {"init", "-q", "-b", "main"});
    mkdir((dir.path + "/src").c_str(), 0755);
    WriteFile(dir.path + "/README", "hello\n");
    WriteFile(dir.path + "/src/app.py", "print('v1')\n");
    symlink("/etc/shadow", (dir.path + "/shadow").c_str());
    symlink("..", (dir.path + "/up").c_str());
    Git(dir.path, {"add", "-A"});
    Git(dir.path, {"commit", "-qm", "first"});
    WriteFile(dir.path + "/src/app.py", "print('v2')\n");
    Git(dir.path, {"commit", "-qam", "second"});
  }
  // What promote must never change: HEAD, the index, the status and the files.
  std::string State() const {
    return absl::StrCat(Git(dir.path, {"rev-parse", "HEAD"}), "|",
                        Git(dir.path, {"symbolic-ref", "HEAD"}), "|",
                        ReadFile(dir.path + "/.git/index"), "|",
                        Git(dir.path, {"status", "--porcelain", "--ignored"}), "|",
                        ReadFile(dir.path + "/README"), ReadFile(dir.path + "/src/app.py"));
  }
  std::string path() const { return dir.path; }
  TestDir dir;
};

Result Exec(const std::string& id, const std::string& script) {
  return RunAirlock({"exec", id, "--", "sh", "-c", script});
}

constexpr char kCommit[] = "git -c user.name=Agent -c user.email=agent@example.com commit -q";

TEST(WorkspaceTest, CommitsComeBackOnAReviewBranchAndTheProjectIsUntouched) {
  Project project;
  std::string before = project.State();
  std::string id = CreateSession({"--workspace", project.path()});
  ASSERT_FALSE(id.empty());

  // The project is there, writable, with its history; symlinks stay symlinks.
  Result r = Exec(id, absl::StrCat("cd /workspace && cat README && git log --format=%s && ",
                                   "readlink shadow && readlink up && echo changed > README && ",
                                   "printf 'print(3)\\n' > src/app.py && ", kCommit,
                                   " -am 'agent change' && echo new > NEW && git add NEW && ",
                                   kCommit, " -m 'agent adds'"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "hello\nsecond\nfirst\n/etc/shadow\n..\n");
  EXPECT_EQ(ReadFile(project.path() + "/README"), "hello\n");  // the host's is never written

  // What changed, against the base.
  r = RunAirlock({"diff", "--stat", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" NEW        | 1 +"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" README     | 2 +-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 files changed, 3 insertions(+), 2 deletions(-)"), std::string::npos)
      << r.out;
  r = RunAirlock({"diff", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+changed\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("new file mode 100644"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(".git/"), std::string::npos) << r.out;

  r = RunAirlock({"promote", id, "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Would create branch airlock/" + id + "/main"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("agent adds"), std::string::npos) << r.out;
  EXPECT_EQ(Git(project.path(), {"branch", "--list", "airlock/*"}), "");

  r = RunAirlock({"promote", id});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string branch = "airlock/" + id + "/main";
  EXPECT_NE(r.out.find("Promoted 2 commit(s)"), std::string::npos) << r.out;
  EXPECT_EQ(Git(project.path(), {"log", "--format=%s", "main.." + branch}),
            "agent adds\nagent change");
  EXPECT_EQ(Git(project.path(), {"show", branch + ":README"}), "changed");
  EXPECT_EQ(project.State(), before);

  // Never overwritten; names are checked.
  r = RunAirlock({"promote", id});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--branch NAME"), std::string::npos) << r.err;
  r = RunAirlock({"promote", id, "--branch", "bad..name"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot be part of a branch name"), std::string::npos) << r.err;

  // Uncommitted work: shown by a dry run, committed on top only in the bundle.
  ASSERT_EQ(Exec(id, "cd /workspace && echo wip > WIP && echo more >> README").exit_code, 0);
  r = RunAirlock({"promote", id, "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("not included; add --include-uncommitted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("+wip"), std::string::npos) << r.out;
  r = RunAirlock({"promote", id, "--include-uncommitted", "--branch", "wip"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Git(project.path(), {"log", "--format=%s", "-1", "airlock/" + id + "/wip"}),
            "Uncommitted work of Airlock session " + id);
  EXPECT_EQ(Git(project.path(), {"show", "airlock/" + id + "/wip:WIP"}), "wip");
  r = Exec(id, "cd /workspace && git status --porcelain && git log -1 --format=%s");
  EXPECT_EQ(r.out, " M README\n?? WIP\nagent adds\n");  // the session's own branch stayed
  EXPECT_EQ(project.State(), before);

  // Pause and resume keep the workspace; a fork promotes to a branch of its own.
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  r = Exec(id, "cat /workspace/NEW /workspace/WIP");
  EXPECT_EQ(r.out, "new\nwip\n") << r.err;
  r = RunAirlock({"fork", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string child(absl::StripTrailingAsciiWhitespace(r.out));
  ASSERT_EQ(
      Exec(child, absl::StrCat("cd /workspace && git add -A && ", kCommit, " -m forked")).exit_code,
      0);
  r = RunAirlock({"promote", child});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Git(project.path(), {"log", "--format=%s", "-1", "airlock/" + child + "/main"}),
            "forked");
  EXPECT_EQ(RunAirlock({"rm", id, child}).exit_code, 0);
}

TEST(WorkspaceTest, NothingFromTheGuestsGitRunsOnTheHost) {
  Project project;
  std::string before = project.State();
  std::string id = CreateSession({"--workspace", project.path()});
  ASSERT_FALSE(id.empty());
  std::string marker = absl::StrCat("/tmp/airlock-pwned-", getpid());
  // Hooks, fsmonitor, sshCommand and a filter driver, all pointing at the marker file: if any
  // of them ran on the host, the marker would appear there.
  std::string script = absl::StrCat(
      "set -e; cd /workspace; for h in pre-commit post-checkout reference-transaction "
      "post-merge post-rewrite fsmonitor-watchman pre-auto-gc; do printf '#!/bin/sh\\ntouch ",
      marker, "-hook\\n' > .git/hooks/$h; chmod +x .git/hooks/$h; done; ",
      "git config core.fsmonitor 'touch ", marker, "-fsmonitor'; ",
      "git config core.sshCommand 'touch ", marker, "-ssh'; ",
      "git config filter.evil.clean 'touch ", marker, "-filter; cat'; ",
      "git config filter.evil.smudge 'touch ", marker, "-filter; cat'; ",
      "printf '* filter=evil\\n' > .gitattributes; git add .gitattributes; ", kCommit,
      " --no-verify -m attributes; rm -f ", marker, "-*");
  Result r = Exec(id, script);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = RunAirlock({"promote", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* what : {"-hook", "-fsmonitor", "-ssh", "-filter"}) {
    EXPECT_NE(access((marker + what).c_str(), F_OK), 0) << what << " ran on the host";
  }
  EXPECT_EQ(project.State(), before);
  EXPECT_EQ(Git(project.path(), {"log", "--format=%s", "-1", "airlock/" + id + "/main"}),
            "attributes");
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

TEST(WorkspaceTest, SyncCopiesHostChangesTheSessionDidNotMakeAndListsTheRest) {
  Project project;
  std::string id = CreateSession({"--workspace", project.path()});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(id, "cd /workspace && echo mine > src/app.py && echo guest > GUEST").exit_code, 0);
  // The host moves on: a change the session did not make, one it made too, new files (one
  // that git ignores), and a removal.
  WriteFile(project.path() + "/README", "hello from the host\n");
  WriteFile(project.path() + "/src/app.py", "print('host')\n");
  WriteFile(project.path() + "/.gitignore", "*.tmp\n");
  WriteFile(project.path() + "/NOTES", "notes\n");
  WriteFile(project.path() + "/scratch.tmp", "ignored\n");
  unlink((project.path() + "/up").c_str());

  Result r = RunAirlock({"sync", id, "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Would copy into the session:\n  .gitignore\n  NOTES\n  README\n  up\n"
            "Conflicts (changed in the session too; left as the session has them):\n"
            "  src/app.py\n");
  EXPECT_EQ(Exec(id, "cat /workspace/README").out, "hello\n");

  r = RunAirlock({"sync", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Exec(id, "cd /workspace && cat README NOTES src/app.py GUEST && ls -A");
  EXPECT_EQ(r.out,
            "hello from the host\nnotes\nmine\nguest\n.git\n.gitignore\nGUEST\nNOTES\n"
            "README\nshadow\nsrc\n");
  // The base advanced: what the sync brought is not the session's change.
  r = RunAirlock({"diff", "--stat", id});
  EXPECT_EQ(r.out,
            " GUEST      | 1 +\n src/app.py | 2 +-\n 2 files changed, 2 insertions(+), 1 "
            "deletion(-)\n")
      << r.err;
  r = RunAirlock({"sync", id});
  EXPECT_EQ(r.out, "Nothing changed on the host since the session's base.\n") << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

TEST(WorkspaceTest, BundlesAHostileGuestMakesAreRefusedAndTheProjectStaysAsItWas) {
  Project project;
  std::string before = project.State();
  std::string refs = Git(project.path(), {"for-each-ref"});
  std::string id = CreateSession({"--workspace", project.path()});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(id, absl::StrCat("cd /workspace && echo x > X && git add X && ", kCommit, " -m x"))
                .exit_code,
            0);
  // The guest's git is its own: a wrapper first on PATH answers `bundle create` as it likes.
  struct Case {
    const char* bundle;  // shell that writes the "bundle" to stdout
    const char* expect;
  } cases[] = {
      {"echo 'not a bundle'", "refused"},
      {"/usr/bin/git \"$@\" | head -c 200", "refused"},
      {"cd /workspace && /usr/bin/git bundle create - refs/airlock/promote refs/heads/main ^$B",
       "refused"},
      {"printf '# v2 git bundle\\n%s refs/heads/../../x\\n\\n' $(/usr/bin/git rev-parse HEAD)",
       "refused"},
  };
  for (const Case& c : cases) {
    std::string wrapper = absl::StrCat(
        "#!/bin/sh\nB=$(/usr/bin/git -C /workspace rev-parse HEAD~1)\n",
        "case \"$*\" in *'bundle create'*) ", c.bundle, ";; *) exec /usr/bin/git \"$@\";; esac\n");
    ASSERT_EQ(RunAirlock({"file", "write", id, "/usr/local/bin/git"}, wrapper).exit_code, 0);
    ASSERT_EQ(Exec(id, "chmod 755 /usr/local/bin/git").exit_code, 0);
    Result r = RunAirlock({"promote", id});
    EXPECT_EQ(r.exit_code, 1) << c.bundle << "\n" << r.out;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.bundle << "\n" << r.err;
    EXPECT_EQ(Git(project.path(), {"for-each-ref"}), refs) << c.bundle;
    EXPECT_EQ(project.State(), before) << c.bundle;
  }
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
}

// The project's disk runs full during a promote: refused, the project as it was, and the pack
// git began to write removed, so the space comes back; with room, it promotes.
TEST(WorkspaceTest, APromoteThatFindsNoRoomLeavesTheProjectAsItWasAndTheSpaceFree) {
  TestDir dir;
  std::string fs = dir.path + "/fs", repo = fs + "/proj";
  ASSERT_EQ(mkdir(fs.c_str(), 0755), 0);
  ASSERT_EQ(mount("tmpfs", fs.c_str(), "tmpfs", 0, "size=48m"), 0) << strerror(errno);
  ASSERT_EQ(mkdir(repo.c_str(), 0755), 0);
  Git(repo, {"init", "-q", "-b", "main"});
  WriteFile(repo + "/README", "hello\n");
  Git(repo, {"add", "-A"});
  Git(repo, {"commit", "-qm", "first"});
  std::string id = CreateSession({"--workspace", repo});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(id, absl::StrCat("cd /workspace && head -c 30000000 /dev/urandom > big && "
                                  "git add big && ",
                                  kCommit, " -m big"))
                .exit_code,
            0);
  auto free_bytes = [&] {
    struct statvfs st;
    EXPECT_EQ(statvfs(fs.c_str(), &st), 0);
    return static_cast<int64_t>(st.f_bavail) * st.f_frsize;
  };
  int filler = open((fs + "/filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(filler, 0);
  ASSERT_EQ(fallocate(filler, 0, 0, free_bytes() - (4 << 20)), 0) << strerror(errno);
  close(filler);
  std::string refs = Git(repo, {"for-each-ref"});
  int64_t before = free_bytes();
  Result r = RunAirlock({"promote", id});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("is unchanged"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(Git(repo, {"for-each-ref"}), refs);
  EXPECT_NE(Git(repo, {"count-objects", "-v"}).find("garbage: 0"), std::string::npos);
  EXPECT_GE(free_bytes(), before - (256 << 10));
  ASSERT_EQ(unlink((fs + "/filler").c_str()), 0);
  r = RunAirlock({"promote", id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Git(repo, {"for-each-ref"}), refs);
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  EXPECT_EQ(umount2(fs.c_str(), MNT_DETACH), 0);
}

// The capture's scratch disk (TMPDIR) runs full: no session, nothing left behind there.
TEST(WorkspaceTest, ACaptureThatFindsNoRoomMakesNothingAndLeavesNothing) {
  TestDir dir;
  std::string scratch = dir.path + "/tmp", repo = dir.path + "/proj";
  ASSERT_EQ(mkdir(scratch.c_str(), 0755), 0);
  ASSERT_EQ(mount("tmpfs", scratch.c_str(), "tmpfs", 0, "size=8m"), 0) << strerror(errno);
  ASSERT_EQ(mkdir(repo.c_str(), 0755), 0);
  Git(repo, {"init", "-q", "-b", "main"});
  std::string noise(12 << 20, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
  WriteFile(repo + "/big", noise);
  Git(repo, {"add", "-A"});
  Git(repo, {"commit", "-qm", "big"});
  std::string sessions = RunAirlock({"ls", "-q"}).out;
  setenv("TMPDIR", scratch.c_str(), 1);
  Result r = RunAirlock({"session", "create", "--workspace", repo});
  unsetenv("TMPDIR");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"ls", "-q"}).out, sessions);
  EXPECT_TRUE(ListDirectory(scratch).empty());
  EXPECT_EQ(umount2(scratch.c_str(), MNT_DETACH), 0);
}

TEST(WorkspaceTest, PlainDirectoriesRunAndDiffButDoNotPromote) {
  TestDir dir;
  WriteFile(dir.path + "/data.txt", "one\n");
  WriteFile(dir.path + "/big.bin", std::string(1000, '\0'));
  // `run --workspace` works in the project.
  Result r = RunAirlock({"run", "--workspace", dir.path, "--", "sh", "-c", "pwd; cat data.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "/workspace\none\n");

  std::string id = CreateSession({"--workspace", dir.path});
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(Exec(id,
                 "cd /workspace && echo two >> data.txt && rm big.bin && "
                 "printf 'a\\0b' > blob && ln -s data.txt link")
                .exit_code,
            0);
  r = RunAirlock({"diff", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" one\n+two\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deleted file mode 100644"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Binary files a/big.bin and /dev/null differ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Binary files /dev/null and b/blob differ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("new file mode 120777\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+data.txt"),
            std::string::npos)
      << r.out;
  r = RunAirlock({"promote", id});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a git repository"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("airlock diff"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"rm", id}).exit_code, 0);

  // A session without a workspace says how to get one.
  std::string plain = CreateSession({});
  r = RunAirlock({"diff", plain});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has no workspace"), std::string::npos) << r.err;
  EXPECT_EQ(RunAirlock({"rm", plain}).exit_code, 0);
}

TEST(WorkspaceTest, BadProjectsAreRefusedBeforeAnySessionStarts) {
  TestDir dir;
  std::string sessions_before = RunAirlock({"ls", "-a", "-q"}).out;
  mkdir((dir.path + "/node_modules").c_str(), 0755);
  WriteFile(dir.path + "/node_modules/huge.js", std::string(300000, 'x'));
  WriteFile(dir.path + "/small", "x");
  Result r = RunAirlock({"session", "create", "--workspace", dir.path, "--workspace-max", "100k"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("node_modules/ 293 KiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(".airlockignore"), std::string::npos) << r.err;
  r = RunAirlock({"session", "create", "--workspace", dir.path + "/small"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;
  r = RunAirlock({"run", "--workspace", dir.path + "/missing", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  // With the big directory left out, it fits.
  WriteFile(dir.path + "/.airlockignore", "node_modules/\n");
  r = RunAirlock({"run", "--workspace", dir.path, "--workspace-max", "100k", "--", "ls", "-A"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ".airlockignore\nsmall\n");
  EXPECT_EQ(RunAirlock({"ls", "-a", "-q"}).out, sessions_before);
}

}  // namespace
}  // namespace airlock
