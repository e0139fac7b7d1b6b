// Dockerfile builds as a user meets them: `airlock image build -t TAG DIR` of real Dockerfiles
// (an app over the default image with ARG, ENV, WORKDIR, COPY, .dockerignore, RUN and CMD; a
// multi-stage build with COPY --from), each RUN in a build VM, each step cached so that a
// second build reuses every layer and a changed file rebuilds from its COPY on; a failing RUN
// says its exit status and last lines; hostile contexts (a source outside the context, a
// symbolic link out of it) stay inside.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"
#include "src/testing/local_registry.h"
#include "src/testing/test_util.h"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"

namespace airlock {
namespace {

void Write(const std::string& path, const std::string& content) {
  ASSERT_TRUE(WriteFileAtomically(path, content, 0644).ok()) << path;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A gzipped tar (or a zip: a wheel) of (path, content, mode) regular files.
void WriteArchive(const std::string& path,
                  const std::vector<std::tuple<std::string, std::string, unsigned>>& files,
                  bool zip = false) {
  archive* a = archive_write_new();
  if (zip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
  }
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, content, mode] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, mode);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

Result Build(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"image", "build"};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunAirlock(args);
}

TEST(DockerfileTest, AnAppBuildsRunsItsCommandAndRebuildsOnlyWhatChanged) {
  testing::TempDir dir;
  std::string ctx = dir.path();
  // Layers are cached host-wide, keyed by content and user: the app's directory names this run,
  // so that every step from WORKDIR on is new to this run, for root and for bob alike.
  std::string app = absl::StrCat("/srv/app-", getpid(), "-", time(nullptr));
  Write(
      ctx + "/Dockerfile",
      "# syntax=docker/dockerfile:1\n"
      "FROM airlock/bookworm-python\n"
      "ARG GREETING=hello\n"
      "ENV APP_HOME=" +
          app +
          " \\\n"
          "    MODE=\"built image\"\n"
          "WORKDIR $APP_HOME\n"
          "COPY app.py ./\n"
          "COPY data/ data/\n"
          "RUN python3 -c \"import os; open('built.txt', 'w').write(os.environ['GREETING'] + ' ' + "
          "','.join(sorted(os.listdir('data'))))\" \\\n"
          "    && rm /etc/issue\n"
          "RUN <<EOF\n"
          "set -e\n"
          "echo from a heredoc > /srv/heredoc.txt\n"
          "EOF\n"
          "LABEL org.example.team=builders\n"
          "EXPOSE 8000\n"
          "CMD [\"python3\", \"app.py\"]\n");
  Write(ctx + "/.dockerignore", "# not sent\n*.env\ndata/*.tmp\n");
  Write(ctx + "/app.py",
        "import os\n"
        "print('app:', os.getcwd(), os.environ['MODE'], open('built.txt').read())\n");
  ASSERT_EQ(mkdir((ctx + "/data").c_str(), 0755), 0);
  Write(ctx + "/data/a.txt", "a");
  Write(ctx + "/data/skip.tmp", "left out");
  Write(ctx + "/secret.env", "TOKEN=x");

  Result first = Build({"-t", "test/app:1", "--build-arg", "GREETING=hi", ctx});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("Step 1/11 : FROM airlock/bookworm-python"), std::string::npos)
      << first.err;
  EXPECT_NE(first.err.find("Step 7/11 : RUN python3"), std::string::npos) << first.err;
  EXPECT_EQ(Count(first.err, "running in build VM"), 2) << first.err;
  EXPECT_TRUE(absl::StartsWith(first.out, "test/app:1 sha256:")) << first.out;

  // Its own command, in its directory, with its environment; what the RUNs did is there.
  Result run = RunAirlock({"run", "test/app:1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, absl::StrCat("app: ", app, " built image hi a.txt\n"));
  Result look =
      RunAirlock({"run", "test/app:1", "--", "sh", "-c",
                  absl::StrCat("cat /srv/heredoc.txt; test -e /etc/issue && echo issue-kept; ls ",
                               app, "; ls ", app, "/data")});
  ASSERT_EQ(look.exit_code, 0) << look.err;
  EXPECT_EQ(look.out, "from a heredoc\napp.py\nbuilt.txt\ndata\na.txt\n");

  // The same build again: every layer is reused, no build VM starts.
  Result again = Build({"-t", "test/app:2", "--build-arg", "GREETING=hi", ctx});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Count(again.err, "CACHED"), 5) << again.err;  // WORKDIR, 2 COPY, 2 RUN
  EXPECT_EQ(Count(again.err, "running in build VM"), 0) << again.err;

  // Another user's build of the same Dockerfile and context reuses none of root's layers.
  ASSERT_EQ(chmod(ctx.c_str(), 0755), 0);
  ASSERT_EQ(chmod((ctx + "/data").c_str(), 0755), 0);
  RunAs bob{61007, 61007};
  std::vector<std::string> as_bob = {"image",       "build",       "-t", "bob/app:1",
                                     "--build-arg", "GREETING=hi", ctx};
  Result theirs = RunAirlock(as_bob, "", bob);
  ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_EQ(Count(theirs.err, "CACHED"), 0) << theirs.err;
  EXPECT_EQ(Count(theirs.err, "running in build VM"), 2) << theirs.err;
  RunAirlock({"image", "rm", "bob/app:1"}, "", bob);

  // One file changes: its COPY and what follows run again, what comes before is reused.
  Write(ctx + "/data/b.txt", "b");
  Result changed = Build({"-t", "test/app:3", "--build-arg", "GREETING=hi", ctx});
  ASSERT_EQ(changed.exit_code, 0) << changed.err;
  EXPECT_EQ(Count(changed.err, "CACHED"), 2) << changed.err;  // WORKDIR, COPY app.py
  EXPECT_EQ(Count(changed.err, "running in build VM"), 2) << changed.err;
  Result after = RunAirlock({"run", "test/app:3"});
  EXPECT_EQ(after.out, absl::StrCat("app: ", app, " built image hi a.txt,b.txt\n")) << after.err;
  for (const char* tag : {"test/app:1", "test/app:2", "test/app:3"}) {
    RunAirlock({"image", "rm", tag});
  }
}

TEST(DockerfileTest, StagesCopyFromEachOtherAndFailuresSayWhy) {
  testing::TempDir dir;
  std::string ctx = dir.path();
  Write(ctx + "/Dockerfile",
        "FROM airlock/bookworm-python AS build\n"
        "RUN mkdir /out && echo built > /out/artifact && ln -s artifact /out/link\n"
        "FROM airlock/bookworm-python\n"
        "COPY --from=build /out/ /opt/\n"
        "COPY --chmod=0600 hostlink /opt/hostlink\n"
        "USER nobody\n");
  // A link to a host file travels as a link: the guest resolves it among its own files.
  ASSERT_EQ(symlink("/etc/hostname", (ctx + "/hostlink").c_str()), 0);
  Result built = Build({"-t", "test/stages:1", ctx});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  Result run =
      RunAirlock({"run", "test/stages:1", "--", "sh", "-c",
                  "cat /opt/artifact; readlink /opt/link; readlink /opt/hostlink; id -un"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "built\nartifact\n/etc/hostname\nnobody\n");

  // A RUN that fails: its status and its last lines, exit 1, no image.
  Write(ctx + "/Dockerfile",
        "FROM airlock/bookworm-python\n"
        "RUN echo about to fail && exit 3\n");
  Result failed = Build({"-t", "test/stages:2", ctx});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.err.find("exit 3"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("about to fail"), std::string::npos) << failed.err;
  EXPECT_NE(RunAirlock({"image", "ls"}).out.find("test/stages:1"), std::string::npos);
  EXPECT_EQ(RunAirlock({"image", "ls"}).out.find("test/stages:2"), std::string::npos);
  EXPECT_EQ(RunAirlock({"image", "ls"}).out.find("airlock-build/"), std::string::npos);

  // Sources outside the context, unknown instructions: refused with the line, exit 2.
  Write(ctx + "/Dockerfile", "FROM airlock/bookworm-python\nCOPY ../../etc/passwd /x\n");
  Result outside = Build({"-t", "test/stages:3", ctx});
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_NE(outside.err.find("Dockerfile line 2 (COPY): \"../../etc/passwd\" is outside the "
                             "build context"),
            std::string::npos)
      << outside.err;
  Write(ctx + "/Dockerfile", "FROM airlock/bookworm-python\nONBUILD RUN true\n");
  Result onbuild = Build({"-t", "test/stages:3", ctx});
  EXPECT_EQ(onbuild.exit_code, 2);
  EXPECT_NE(onbuild.err.find("line 2: ONBUILD is not supported"), std::string::npos) << onbuild.err;
  RunAirlock({"image", "rm", "test/stages:1"});
}

// ADD unpacks a local archive; the image it makes reaches a registry (`image push NAME`) and a
// file (`image save`), and comes back from each running its own command; a context larger than
// the user's images quota is refused before anything is built.
TEST(DockerfileTest, AddUnpacksArchivesAndABuiltImageIsPushedAndSaved) {
  testing::TempDir dir;
  std::string ctx = dir.path() + "/ctx";
  ASSERT_EQ(mkdir(ctx.c_str(), 0755), 0);
  WriteArchive(ctx + "/vendor.tgz",
               {{"pkg/run.sh", "#!/bin/sh\necho vendored $(cat /opt/plain.txt)\n", 0755},
                {"pkg/data/x.txt", "x", 0600}});
  // A pure-Python wheel, installed by pip from the context with no network.
  const std::string dist = "hello_airlock-1.0.dist-info/";
  WriteArchive(
      ctx + "/hello_airlock-1.0-py3-none-any.whl",
      {{"hello_airlock/__init__.py", "def greet():\n    return 'from a wheel'\n", 0644},
       {dist + "METADATA", "Metadata-Version: 2.1\nName: hello-airlock\nVersion: 1.0\n", 0644},
       {dist + "WHEEL",
        "Wheel-Version: 1.0\nGenerator: airlock-test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        0644},
       {dist + "RECORD",
        "hello_airlock/__init__.py,,\n" + dist + "METADATA,,\n" + dist + "WHEEL,,\n" + dist +
            "RECORD,,\n",
        0644}},
      /*zip=*/true);
  Write(ctx + "/plain.txt", "plain");
  Write(ctx + "/Dockerfile",
        "FROM airlock/bookworm-python\n"
        "ADD vendor.tgz /opt/vendor\n"
        "ADD --chown=nobody plain.txt /opt/\n"
        "COPY *.whl /tmp/wheels/\n"
        "RUN pip install --no-index --no-cache-dir /tmp/wheels/hello_airlock-1.0-py3-none-any.whl"
        " && rm -r /tmp/wheels\n"
        "LABEL org.example.kind=pushed\n"
        "EXPOSE 8080\n"
        "CMD [\"/opt/vendor/pkg/run.sh\"]\n");
  Result built = Build({"-t", "test/add:1", ctx});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  Result run = RunAirlock({"run", "test/add:1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "vendored plain\n");
  Result look = RunAirlock({"run", "test/add:1", "--", "sh", "-c",
                            "stat -c '%a %U' /opt/vendor/pkg/data/x.txt /opt/plain.txt; "
                            "test -e /opt/vendor.tgz || echo not-kept"});
  EXPECT_EQ(look.out, "600 root\n644 nobody\nnot-kept\n") << look.err;
  Result wheel = RunAirlock({"run", "test/add:1", "--", "python3", "-c",
                             "import hello_airlock; print(hello_airlock.greet())"});
  EXPECT_EQ(wheel.out, "from a wheel\n") << wheel.err;

  // To a registry, by name, and back by reference: its command, labels and ports came along.
  testing::LocalRegistry registry(dir.path() + "/registry");
  std::string ref = registry.Host() + "/airlock-test/built:1";
  Result pushed = RunAirlock({"image", "push", "test/add:1", ref});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err;
  EXPECT_TRUE(absl::StartsWith(pushed.out, ref + " sha256:")) << pushed.out;
  Result pulled = RunAirlock({"image", "pull", ref});
  ASSERT_EQ(pulled.exit_code, 0) << pulled.err;
  EXPECT_EQ(RunAirlock({"run", ref}).out, "vendored plain\n");
  Result inspect = RunAirlock({"image", "ls", "--json"});
  EXPECT_NE(inspect.out.find("airlock-test/built:1"), std::string::npos) << inspect.out;

  // To a file, imported again under another name.
  std::string saved = dir.path() + "/saved.tar";
  Result save = RunAirlock({"image", "save", "test/add:1", "-o", saved});
  ASSERT_EQ(save.exit_code, 0) << save.err;
  Result imported = RunAirlock({"image", "import", saved, "--tag", "test/add-imported:1"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(RunAirlock({"run", "test/add-imported:1"}).out, "vendored plain\n");

  // Mistakes say what is wrong, and write nothing.
  Result missing = RunAirlock({"image", "push", "test/no-such:1", ref});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("test/no-such:1 is no file, and as an image"), std::string::npos)
      << missing.err;
  Result unsaved = RunAirlock({"image", "save", "test/no-such:1", "-o", dir.path() + "/x.tar"});
  EXPECT_EQ(unsaved.exit_code, 2) << unsaved.err;
  EXPECT_NE(access((dir.path() + "/x.tar").c_str(), F_OK), 0);

  // A context over the user's images quota (64 MiB for uid 61011) is refused while it is sent.
  std::string big = dir.path() + "/big";
  ASSERT_EQ(mkdir(big.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  Write(big + "/Dockerfile", "FROM airlock/bookworm-python\nCOPY huge /huge\n");
  // Written out (a sparse file would travel as a small sparse tar): 80 MiB to send.
  int fd = open((big + "/huge").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::string block(1 << 20, 'h');
  for (int i = 0; i < 80; ++i) ASSERT_EQ(write(fd, block.data(), block.size()), 1 << 20);
  close(fd);
  Result huge = RunAirlock({"image", "build", "-t", "small/huge:1", big}, "", RunAs{61011, 61011});
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_NE(huge.err.find("the build context is larger than 64MiB; leave out what the build "
                          "does not need with .dockerignore"),
            std::string::npos)
      << huge.err;
  for (const char* tag : {"test/add:1", "test/add-imported:1"}) RunAirlock({"image", "rm", tag});
  RunAirlock({"image", "rm", ref});
}

// ADD URL fetches with the build's network only (in a build VM, never on the host), mode 0600
// unless --chmod says otherwise.
TEST(DockerfileTest, AddFetchesAUrlOnlyWithTheBuildsNetwork) {
  LoopbackHttpServer web([](const std::string& path) -> std::optional<std::string> {
    if (path == "/files/tool.sh") return std::string("#!/bin/sh\necho fetched tool\n");
    return std::nullopt;
  });
  std::string host = absl::StrCat("web.test:", web.port());
  testing::TempDir dir;
  std::string ctx = dir.path();
  Write(ctx + "/Dockerfile", absl::StrCat("FROM airlock/bookworm-python\n"
                                          "ADD --chmod=0755 --chown=nobody http://",
                                          host,
                                          "/files/tool.sh?v=1 /usr/local/bin/\n"
                                          "ADD http://",
                                          host,
                                          "/files/tool.sh /opt/copy.sh\n"
                                          "CMD [\"tool.sh\"]\n"));
  Result refused = Build({"-t", "test/add-url:1", ctx});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("the build has no network; build with --allow " + host),
            std::string::npos)
      << refused.err;
  Result built = Build({"-t", "test/add-url:1", "--allow", host, "--no-cache", ctx});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  Result run = RunAirlock({"run", "test/add-url:1", "--", "sh", "-c",
                           "stat -c '%a %U' /usr/local/bin/tool.sh /opt/copy.sh; tool.sh"});
  EXPECT_EQ(run.out, "755 nobody\n600 root\nfetched tool\n") << run.err;
  RunAirlock({"image", "rm", "test/add-url:1"});
}

// ENTRYPOINT and CMD run together, a command given to `airlock run` replaces both, and what
// the build recorded (labels, ports, volumes, stop signal) is in the image it saves.
TEST(DockerfileTest, EntrypointRunsWithCmdAndWhatIsRecordedIsSaved) {
  testing::TempDir dir;
  std::string ctx = dir.path() + "/ctx";
  ASSERT_EQ(mkdir(ctx.c_str(), 0755), 0);
  Write(ctx + "/Dockerfile",
        "FROM airlock/bookworm-python\n"
        "ENTRYPOINT [\"echo\", \"entry\"]\n"
        "CMD [\"default\"]\n"
        "LABEL org.example.kind=entry\n"
        "EXPOSE 8080 53/udp\n"
        "VOLUME /data\n"
        "STOPSIGNAL SIGINT\n");
  Result built = Build({"-t", "test/entry:1", ctx});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_EQ(RunAirlock({"run", "test/entry:1"}).out, "entry default\n");
  EXPECT_EQ(RunAirlock({"run", "test/entry:1", "--", "echo", "given"}).out, "given\n");
  std::string saved = dir.path() + "/saved.tar";
  Result save = RunAirlock({"image", "save", "test/entry:1", "-o", saved});
  ASSERT_EQ(save.exit_code, 0) << save.err;
  // The config is a blob of the archive, stored as it is (JSON).
  absl::StatusOr<std::string> archive = ReadFileToString(saved, 1 << 30);
  ASSERT_TRUE(archive.ok()) << archive.status();
  for (const char* expected :
       {R"("Entrypoint":["echo","entry"])", R"("Cmd":["default"])",
        R"("Labels":{"org.example.kind":"entry"})", R"("ExposedPorts":{"53/udp":{},"8080/tcp":{}})",
        R"("Volumes":{"/data":{}})", R"("StopSignal":"SIGINT")"}) {
    EXPECT_NE(archive->find(expected), std::string::npos) << expected;
  }
  RunAirlock({"image", "rm", "test/entry:1"});
}

}  // namespace
}  // namespace airlock
