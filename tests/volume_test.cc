// Volumes as a user meets them: data that outlives sessions, shared on purpose (one writer or
// many readers), copied for forks, filled from the host and read back without the host ever
// parsing what a guest wrote.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"
#include "src/common/subprocess.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"

namespace airlock {
namespace {

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

void Ok(const std::vector<std::string>& args) {
  Result r = RunAirlock(args);
  ASSERT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
}

// `airlock session create ARGS`, expected to fail: its message.
std::string Refused(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"session", "create"};
  args.insert(args.end(), extra.begin(), extra.end());
  Result r = RunAirlock(args);
  EXPECT_NE(r.exit_code, 0) << r.out;
  return r.err;
}

TEST(VolumeTest, DataOutlivesSessionsWithOneWriterOrManyReaders) {
  Ok({"volume", "create", "shared", "--size", "64m"});
  std::string writer = CreateSession({"--volume", "shared:/data"});
  ASSERT_FALSE(writer.empty());
  ExecScript(writer, "echo from-a > /data/note && mkdir -p /data/d && echo x > /data/d/y");
  // While it writes, nobody else attaches it, and it cannot be removed.
  std::string err = Refused({"--volume", "shared:/data"});
  EXPECT_NE(err.find("is attached to session " + writer + " (running, read-write)"),
            std::string::npos)
      << err;
  err = Refused({"--volume", "shared:/mnt/s:ro"});
  EXPECT_NE(err.find(writer), std::string::npos) << err;
  Result r = RunAirlock({"volume", "rm", "shared"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("remove those sessions first"), std::string::npos) << r.err;
  r = RunAirlock({"volume", "ls"});
  EXPECT_NE(r.out.find(writer + " (read-write)"), std::string::npos) << r.out;

  // Removed, the writer leaves the data behind, clean: readers mount it as it is.
  Ok({"rm", writer});
  std::string reader = CreateSession({"--volume", "shared:/data:ro"});
  std::string other = CreateSession({"--volume", "shared:/srv/again:ro"});
  ASSERT_FALSE(reader.empty());
  ASSERT_FALSE(other.empty());
  EXPECT_EQ(ExecScript(reader, "cat /data/note /data/d/y"), "from-a\nx\n");
  EXPECT_EQ(ExecScript(other, "cat /srv/again/note"), "from-a\n");
  r = RunAirlock({"exec", reader, "--", "sh", "-c", "echo no > /data/note"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  err = Refused({"--volume", "shared:/data"});  // no writer while they read
  EXPECT_NE(err.find("(running, read-only)"), std::string::npos) << err;

  // A paused session keeps its claim and its mount.
  Ok({"pause", reader});
  EXPECT_NE(Refused({"--volume", "shared:/data"}).find("(paused, read-only)"), std::string::npos);
  EXPECT_EQ(ExecScript(reader, "cat /data/note"), "from-a\n");  // resumed by the exec

  // Misuse says what to do.
  err = Refused({"--volume", "nosuch:/data"});
  EXPECT_NE(err.find("you have no volume named nosuch (airlock volume ls lists yours)"),
            std::string::npos)
      << err;
  err = Refused({"--volume", "shared:/proc/x:ro"});
  EXPECT_NE(err.find("cannot be mounted at \"/proc/x\""), std::string::npos) << err;
  err = Refused({"--volume", "shared"});
  EXPECT_NE(err.find("write NAME:/PATH or NAME:/PATH:ro"), std::string::npos) << err;

  for (const std::string& id : {reader, other}) Ok({"rm", id});
  Ok({"volume", "rm", "shared"});
  EXPECT_EQ(RunAirlock({"volume", "ls", "--json"}).out, "[]\n");
}

TEST(VolumeTest, AForkGetsItsOwnCopyOfAVolumeItWrites) {
  Ok({"volume", "create", "work", "--size", "32m"});
  std::string source = CreateSession({"--volume", "work:/work"});
  ASSERT_FALSE(source.empty());
  ExecScript(source, "echo source > /work/f");
  Result r = RunAirlock({"fork", source});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string child = Trim(r.out);
  EXPECT_EQ(ExecScript(child, "cat /work/f"), "source\n");
  ExecScript(child, "echo child > /work/f");
  EXPECT_EQ(ExecScript(source, "cat /work/f"), "source\n");
  ExecScript(source, "echo source2 > /work/f");  // the source still writes (thawed)
  EXPECT_EQ(ExecScript(child, "cat /work/f"), "child\n");
  r = RunAirlock({"volume", "ls"});
  EXPECT_NE(r.out.find("work-" + child), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fork of work for session " + child), std::string::npos) << r.out;
  // A paused source forks from its frozen volume.
  Ok({"pause", source});
  r = RunAirlock({"fork", source});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string second = Trim(r.out);
  EXPECT_EQ(ExecScript(second, "cat /work/f"), "source2\n");
  for (const std::string& id : {source, child, second}) Ok({"rm", id});
  for (const std::string& v : {std::string("work"), "work-" + child, "work-" + second}) {
    Ok({"volume", "rm", v});
  }
}

TEST(VolumeTest, ImportExportAndSnapshotsNeverParseWhatAGuestWroteOnTheHost) {
  TestDir dir;
  ASSERT_EQ(mkdir((dir.path + "/in").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir.path + "/in/sub").c_str(), 0755), 0);
  std::ofstream(dir.path + "/in/a.txt") << "alpha\n";
  std::ofstream(dir.path + "/in/sub/b.txt") << "beta\n";
  ASSERT_EQ(symlink("/etc/shadow", (dir.path + "/in/link").c_str()), 0);
  Ok({"volume", "create", "set", "--size", "32m"});
  Result r = RunAirlock({"volume", "import", "set", dir.path + "/in"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "set: generation 1\n");
  r = RunAirlock({"run", "--volume", "set:/set:ro", "--", "sh", "-c",
                  "cat /set/a.txt /set/sub/b.txt; readlink /set/link"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "alpha\nbeta\n/etc/shadow\n");

  // Written by a session, read back as a tar by tar in a guest.
  r = RunAirlock({"run", "--volume", "set:/set", "--", "sh", "-c", "echo gamma > /set/c.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string tar = dir.path + "/out.tar";
  r = RunAirlock({"volume", "export", "set", tar});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<ProcessResult> listed = RunProcess({"/usr/bin/tar", "-tf", tar});
  ASSERT_TRUE(listed.ok());
  for (const char* name : {"./a.txt", "./sub/b.txt", "./c.txt", "./link"}) {
    EXPECT_NE(listed->output.find(name), std::string::npos) << listed->output;
  }

  // A snapshot keeps the data as it was; it is attached read-only only.
  Ok({"volume", "snapshot", "set", "set@v1"});
  r = RunAirlock({"run", "--volume", "set:/set", "--", "sh", "-c", "rm /set/a.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunAirlock({"run", "--volume", "set@v1:/v1:ro", "--", "cat", "/v1/a.txt"});
  EXPECT_EQ(r.out, "alpha\n") << r.err;
  r = RunAirlock({"run", "--volume", "set@v1:/v1", "--", "true"});
  EXPECT_NE(r.err.find("is a snapshot: attach it read-only (set@v1:/v1:ro)"), std::string::npos)
      << r.err;

  // What is not a tar, such as a filesystem image, is refused and changes nothing.
  std::string image = dir.path + "/fs.ext4";
  absl::StatusOr<ProcessResult> made = RunProcess({"/usr/sbin/mkfs.ext4", "-q", "-F", image, "4M"});
  ASSERT_TRUE(made.ok() && made->exit_code == 0);
  r = RunAirlock({"volume", "import", "set", image});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a tar archive this volume can take"), std::string::npos) << r.err;
  // Nor does a tar of more files than the volume has inodes for.
  ASSERT_EQ(mkdir((dir.path + "/many").c_str(), 0755), 0);
  for (int i = 0; i < 2500; ++i) {
    std::ofstream(absl::StrCat(dir.path, "/many/", i));
  }
  Ok({"volume", "create", "tiny", "--size", "16m"});
  r = RunAirlock({"volume", "import", "tiny", dir.path + "/many"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the archive holds 2501 entries; volume tiny (16MiB) holds at most 2048"),
            std::string::npos)
      << r.err;
  r = RunAirlock({"run", "--volume", "set:/set:ro", "--", "cat", "/set/c.txt"});
  EXPECT_EQ(r.out, "gamma\n") << r.err;

  // Nothing replaces a volume under a session that holds it.
  std::string holder = CreateSession({"--volume", "set:/set:ro"});
  r = RunAirlock({"volume", "import", "set", dir.path + "/in"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("import needs it attached to no session"), std::string::npos) << r.err;
  Ok({"rm", holder});
  for (const char* v : {"set", "set@v1", "tiny"}) Ok({"volume", "rm", v});
}

TEST(VolumeTest, AVolumeItsWriterDidNotLetGoOfIsMadeWholeByTheNextWriter) {
  Ok({"volume", "create", "torn", "--size", "32m"});
  std::string id = CreateSession({"--volume", "torn:/t"});
  ExecScript(id, "echo written > /t/f && sync");
  pid_t qemu = QemuPidOf(id);
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(kill(qemu, SIGKILL), 0);
  std::string listed;
  for (int i = 0; i < 60 && listed.find("failed") == std::string::npos; ++i) {
    usleep(500000);
    for (absl::string_view line : absl::StrSplit(RunAirlock({"ls", "-a"}).out, '\n')) {
      if (absl::StartsWith(line, id)) listed = std::string(line);
    }
  }
  ASSERT_NE(listed.find("failed"), std::string::npos) << listed;
  // Its journal was never replayed: a reader, which cannot replay it, is told what to do.
  Result r = RunAirlock({"run", "--volume", "torn:/t:ro", "--", "cat", "/t/f"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("was not released cleanly"), std::string::npos) << r.err;
  r = RunAirlock({"run", "--volume", "torn:/t", "--", "cat", "/t/f"});
  EXPECT_EQ(r.out, "written\n") << r.err;
  r = RunAirlock({"run", "--volume", "torn:/t:ro", "--", "cat", "/t/f"});
  EXPECT_EQ(r.out, "written\n") << r.err;
  Ok({"rm", id});
  Ok({"volume", "rm", "torn"});
}

TEST(VolumeTest, AVolumeOutlivesAKillOfTheDaemon) {
  Ok({"volume", "create", "keep", "--size", "32m"});
  std::string id = CreateSession({"--volume", "keep:/keep"});
  ExecScript(id, "echo before > /keep/f");
  pid_t pid = DaemonPid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) usleep(50000);
  // The next command starts another airlockd, which finds the VM and its volume as they were.
  EXPECT_EQ(ExecScript(id, "cat /keep/f; echo after >> /keep/f; cat /keep/f"),
            "before\nbefore\nafter\n");
  Result r = RunAirlock({"volume", "ls"});
  EXPECT_NE(r.out.find(id + " (read-write)"), std::string::npos) << r.out;
  Ok({"rm", id});
  r = RunAirlock({"run", "--volume", "keep:/keep:ro", "--", "cat", "/keep/f"});
  EXPECT_EQ(r.out, "before\nafter\n") << r.err;
  Ok({"volume", "rm", "keep"});
}

}  // namespace
}  // namespace airlock
