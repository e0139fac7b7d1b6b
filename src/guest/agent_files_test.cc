#include "src/guest/agent_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace airlock::guest {
namespace {

const GuestAccounts kAccounts{.passwd = "root:x:0:0:root:/root:/bin/sh\n", .group = "root:x:0:\n"};

class AgentFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/agent-files-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& content) {
    std::ofstream(root_ + "/" + relative) << content;
  }

  // The request's entries, or its errno as the only entry's size... (see Fails).
  std::vector<FsEntry> Entries(FsRequestMessage request) {
    std::string answer;
    FsResult result = DoFsRequest(request, kAccounts, &answer);
    EXPECT_EQ(result.error, 0) << result.message;
    std::vector<FsEntry> entries;
    std::string error;
    EXPECT_TRUE(DecodeFsEntries(answer, &entries, &error)) << error;
    return entries;
  }
  int Fails(FsRequestMessage request) {
    std::string answer;
    FsResult result = DoFsRequest(request, kAccounts, &answer);
    EXPECT_FALSE(result.error != 0 && result.message.empty());
    return result.error;
  }
  std::vector<std::string> Paths(const std::vector<FsEntry>& entries) {
    std::vector<std::string> out;
    for (const FsEntry& e : entries) out.push_back(e.path.substr(root_.size()));
    return out;
  }

  std::string root_;
};

TEST_F(AgentFilesTest, StatDescribesFilesDirectoriesAndLinksWithoutFollowingThem) {
  Write("a.txt", "hello");
  ASSERT_EQ(symlink("a.txt", (root_ + "/link").c_str()), 0);
  std::vector<FsEntry> file = Entries({.op = FsOp::kStat, .path = root_ + "//./a.txt"});
  ASSERT_EQ(file.size(), 1u);
  EXPECT_EQ(file[0].name, "a.txt");
  EXPECT_EQ(file[0].path, root_ + "/a.txt");
  EXPECT_EQ(file[0].type, FsType::kFile);
  EXPECT_EQ(file[0].size, 5u);
  EXPECT_TRUE(S_ISREG(file[0].mode));
  EXPECT_GT(file[0].mtime_seconds, 0);
  std::vector<FsEntry> link = Entries({.op = FsOp::kStat, .path = root_ + "/link"});
  ASSERT_EQ(link.size(), 1u);
  EXPECT_EQ(link[0].type, FsType::kSymlink);
  EXPECT_EQ(link[0].symlink_target, "a.txt");
  std::vector<FsEntry> dir = Entries({.op = FsOp::kStat, .path = root_ + "/"});
  ASSERT_EQ(dir.size(), 1u);
  EXPECT_EQ(dir[0].type, FsType::kDirectory);
  EXPECT_EQ(Fails({.op = FsOp::kStat, .path = root_ + "/missing"}), ENOENT);
  EXPECT_EQ(Fails({.op = FsOp::kStat, .path = "relative"}), EINVAL);
}

TEST_F(AgentFilesTest, ListGoesAsDeepAsAskedInNameOrderAndNotThroughLinks) {
  ASSERT_EQ(mkdir((root_ + "/d").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root_ + "/d/e").c_str(), 0755), 0);
  Write("d/e/deep.txt", "x");
  Write("b.txt", "x");
  Write("d/c.txt", "x");
  ASSERT_EQ(symlink(root_.c_str(), (root_ + "/loop").c_str()), 0);
  EXPECT_EQ(Paths(Entries({.op = FsOp::kList, .path = root_, .depth = 1})),
            (std::vector<std::string>{"/b.txt", "/d", "/loop"}));
  EXPECT_EQ(Paths(Entries({.op = FsOp::kList, .path = root_, .depth = 2})),
            (std::vector<std::string>{"/b.txt", "/d", "/d/c.txt", "/d/e", "/loop"}));
  EXPECT_EQ(
      Paths(Entries({.op = FsOp::kList, .path = root_, .depth = 9})),
      (std::vector<std::string>{"/b.txt", "/d", "/d/c.txt", "/d/e", "/d/e/deep.txt", "/loop"}));
  EXPECT_EQ(Fails({.op = FsOp::kList, .path = root_ + "/b.txt", .depth = 1}), ENOTDIR);
  EXPECT_EQ(Fails({.op = FsOp::kList, .path = root_ + "/none", .depth = 1}), ENOENT);
  EXPECT_EQ(Fails({.op = FsOp::kList, .path = root_, .depth = 0}), EINVAL);
}

TEST_F(AgentFilesTest, MakeDirMakesParentsAndSaysWhatIsThereAlready) {
  std::vector<FsEntry> made = Entries({.op = FsOp::kMakeDir, .path = root_ + "/x/y/z"});
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].path, root_ + "/x/y/z");
  EXPECT_EQ(made[0].type, FsType::kDirectory);
  EXPECT_EQ(Fails({.op = FsOp::kMakeDir, .path = root_ + "/x/y"}), EEXIST);
  Write("f", "");
  EXPECT_EQ(Fails({.op = FsOp::kMakeDir, .path = root_ + "/f"}), ENOTDIR);
  EXPECT_EQ(Fails({.op = FsOp::kMakeDir, .user = "nobody-here", .path = root_ + "/q"}), EINVAL);
}

TEST_F(AgentFilesTest, MoveMakesTheTargetsParentsAndDescribesWhereItWent) {
  Write("a.txt", "abc");
  std::vector<FsEntry> moved =
      Entries({.op = FsOp::kMove, .path = root_ + "/a.txt", .target = root_ + "/n/m/b.txt"});
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].path, root_ + "/n/m/b.txt");
  EXPECT_EQ(moved[0].size, 3u);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/a.txt"));
  EXPECT_EQ(Fails({.op = FsOp::kMove, .path = root_ + "/a.txt", .target = root_ + "/c"}), ENOENT);
}

TEST_F(AgentFilesTest, SetAttributesChangesOwnerAndModeAndEntriesCarryIdsAndTimes) {
  Write("f", "x");
  std::vector<FsEntry> set = Entries(
      {.op = FsOp::kSetAttributes, .path = root_ + "/f", .attributes = kSetMode, .mode = 0640});
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set[0].mode & 07777, 0640u);
  struct stat st;
  ASSERT_EQ(stat((root_ + "/f").c_str(), &st), 0);
  EXPECT_EQ(set[0].uid, st.st_uid);
  EXPECT_EQ(set[0].gid, st.st_gid);
  EXPECT_EQ(set[0].atime_seconds, st.st_atim.tv_sec);
  EXPECT_EQ(set[0].ctime_seconds, st.st_ctim.tv_sec);
  if (geteuid() == 0) {
    set = Entries({.op = FsOp::kSetAttributes,
                   .path = root_ + "/f",
                   .attributes = kSetUid | kSetGid,
                   .uid = 1234,
                   .gid = 5678});
    ASSERT_EQ(set.size(), 1u);
    EXPECT_EQ(set[0].uid, 1234u);
    EXPECT_EQ(set[0].gid, 5678u);
    EXPECT_EQ(set[0].owner, "1234");  // no name for it in kAccounts
    EXPECT_EQ(set[0].mode & 07777, 0640u);
    // A new directory gets the attributes asked for; its parents do not.
    std::vector<FsEntry> made = Entries({.op = FsOp::kMakeDir,
                                         .path = root_ + "/p/q",
                                         .attributes = kSetUid | kSetMode,
                                         .uid = 1000,
                                         .mode = 0700});
    ASSERT_EQ(made.size(), 1u);
    EXPECT_EQ(made[0].uid, 1000u);
    EXPECT_EQ(made[0].mode & 07777, 0700u);
    ASSERT_EQ(stat((root_ + "/p").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
  }
  // E2B's metadata: the user.e2b.* attributes, sorted, and no other.
  std::string f = root_ + "/f";
  if (setxattr(f.c_str(), "user.e2b.owner", "ada", 3, 0) == 0) {
    ASSERT_EQ(setxattr(f.c_str(), "user.e2b.build-id", "42", 2, 0), 0);
    ASSERT_EQ(setxattr(f.c_str(), "user.other", "x", 1, 0), 0);
    ASSERT_EQ(setxattr(f.c_str(), "user.e2b.bad key", "x", 1, 0), 0);
    std::vector<FsEntry> stat = Entries({.op = FsOp::kStat, .path = f});
    ASSERT_EQ(stat.size(), 1u);
    EXPECT_EQ(stat[0].metadata, (FileMetadata{{"build-id", "42"}, {"owner", "ada"}}));
  }
  // A symbolic link has no mode of its own; what is not there says so.
  ASSERT_EQ(symlink("f", (root_ + "/link").c_str()), 0);
  EXPECT_EQ(Fails({.op = FsOp::kSetAttributes,
                   .path = root_ + "/link",
                   .attributes = kSetMode,
                   .mode = 0600}),
            EINVAL);
  EXPECT_EQ(Fails({.op = FsOp::kSetAttributes,
                   .path = root_ + "/none",
                   .attributes = kSetMode,
                   .mode = 0600}),
            ENOENT);
}

TEST_F(AgentFilesTest, RemoveTakesTreesAndLinksButNotWhatLinksPointAt) {
  ASSERT_EQ(mkdir((root_ + "/keep").c_str(), 0755), 0);
  Write("keep/k.txt", "k");
  ASSERT_EQ(mkdir((root_ + "/t").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root_ + "/t/u").c_str(), 0755), 0);
  Write("t/u/f", "f");
  ASSERT_EQ(symlink((root_ + "/keep").c_str(), (root_ + "/t/link").c_str()), 0);
  EXPECT_TRUE(Entries({.op = FsOp::kRemove, .path = root_ + "/t"}).empty());
  EXPECT_FALSE(std::filesystem::exists(root_ + "/t"));
  EXPECT_TRUE(std::filesystem::exists(root_ + "/keep/k.txt"));
  // Like rm -rf: what is not there is gone already.
  EXPECT_TRUE(Entries({.op = FsOp::kRemove, .path = root_ + "/t"}).empty());
  EXPECT_EQ(Fails({.op = FsOp::kRemove, .path = "/"}), EBUSY);
}

// Waits for the watch's news and decodes it.
std::vector<WatchRecord> Events(DirWatch& watch, bool* going) {
  std::vector<WatchRecord> out;
  for (int tries = 0; tries < 50 && out.empty(); ++tries) {
    pollfd p = {watch.fd(), POLLIN, 0};
    poll(&p, 1, 100);
    std::deque<std::string> records;
    FsResult result;
    *going = watch.Read(&records, &result);
    for (const std::string& r : records) {
      std::vector<WatchRecord> decoded;
      std::string error;
      EXPECT_TRUE(DecodeWatchRecords(r, &decoded, &error)) << error;
      out.insert(out.end(), decoded.begin(), decoded.end());
    }
    if (!*going) break;
  }
  return out;
}

std::vector<std::pair<WatchEventKind, std::string>> Kinds(const std::vector<WatchRecord>& rs) {
  std::vector<std::pair<WatchEventKind, std::string>> out;
  for (const WatchRecord& r : rs) out.emplace_back(r.kind, r.name);
  return out;
}

TEST_F(AgentFilesTest, AWatchReportsChangesAndFollowsNewDirectoriesWhenRecursive) {
  FsResult result;
  std::unique_ptr<DirWatch> watch = DirWatch::Start(
      {.path = root_, .flags = kWatchRecursive | kWatchIncludeEntry}, kAccounts, &result);
  ASSERT_NE(watch, nullptr) << result.message;
  bool going = true;
  Write("a.txt", "x");
  std::vector<WatchRecord> events = Events(*watch, &going);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].kind, WatchEventKind::kCreate);
  EXPECT_EQ(events[0].name, "a.txt");
  EXPECT_TRUE(events[0].has_entry);
  EXPECT_EQ(events[0].entry.path, root_ + "/a.txt");

  ASSERT_EQ(mkdir((root_ + "/sub").c_str(), 0755), 0);
  events = Events(*watch, &going);
  Write("sub/b.txt", "y");
  std::vector<WatchRecord> more = Events(*watch, &going);
  events.insert(events.end(), more.begin(), more.end());
  auto kinds = Kinds(events);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(),
                      std::make_pair(WatchEventKind::kCreate, std::string("sub"))),
            kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(),
                      std::make_pair(WatchEventKind::kCreate, std::string("sub/b.txt"))),
            kinds.end());

  ASSERT_EQ(rename((root_ + "/a.txt").c_str(), (root_ + "/c.txt").c_str()), 0);
  ASSERT_EQ(unlink((root_ + "/c.txt").c_str()), 0);
  ASSERT_EQ(chmod((root_ + "/sub/b.txt").c_str(), 0600), 0);
  events.clear();
  for (int i = 0; i < 5 && events.size() < 4; ++i) {
    more = Events(*watch, &going);
    events.insert(events.end(), more.begin(), more.end());
  }
  EXPECT_EQ(Kinds(events), (std::vector<std::pair<WatchEventKind, std::string>>{
                               {WatchEventKind::kRename, "a.txt"},
                               {WatchEventKind::kCreate, "c.txt"},
                               {WatchEventKind::kRemove, "c.txt"},
                               {WatchEventKind::kChmod, "sub/b.txt"}}));
  EXPECT_TRUE(going);

  std::filesystem::remove_all(root_);
  for (int i = 0; i < 5 && going; ++i) Events(*watch, &going);
  EXPECT_FALSE(going);  // the directory is gone: so is the watch
}

TEST_F(AgentFilesTest, AWriteThroughTheHostIsTheFilesCreationAndAWrite) {
  EXPECT_TRUE(IsWriteTempName(".out.txt.airlock-Ab12Cd"));
  EXPECT_TRUE(IsWriteTempName("sub/.o.airlock-Ab12Cd"));
  EXPECT_FALSE(IsWriteTempName("out.txt.airlock-Ab12Cd"));
  EXPECT_FALSE(IsWriteTempName(".airlock-Ab12Cd"));
  EXPECT_FALSE(IsWriteTempName(".out.txt"));
  FsResult result;
  std::unique_ptr<DirWatch> watch = DirWatch::Start({.path = root_}, kAccounts, &result);
  ASSERT_NE(watch, nullptr) << result.message;
  // What the agent does for a kFileWrite: a temporary name beside the file, renamed over it.
  std::string temp = root_ + "/" + WriteTempName("out.txt");
  int fd = mkstemp(temp.data());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "data", 4), 4);
  ASSERT_EQ(fchmod(fd, 0644), 0);
  close(fd);
  ASSERT_EQ(rename(temp.c_str(), (root_ + "/out.txt").c_str()), 0);
  bool going = true;
  std::vector<WatchRecord> events;
  for (int i = 0; i < 5 && events.size() < 2; ++i) {
    std::vector<WatchRecord> more = Events(*watch, &going);
    events.insert(events.end(), more.begin(), more.end());
  }
  EXPECT_EQ(Kinds(events),
            (std::vector<std::pair<WatchEventKind, std::string>>{
                {WatchEventKind::kCreate, "out.txt"}, {WatchEventKind::kWrite, "out.txt"}}));
}

TEST_F(AgentFilesTest, AWatchNeedsADirectory) {
  Write("f", "");
  FsResult result;
  EXPECT_EQ(DirWatch::Start({.path = root_ + "/f"}, kAccounts, &result), nullptr);
  EXPECT_EQ(result.error, ENOTDIR);
  EXPECT_EQ(DirWatch::Start({.path = root_ + "/none"}, kAccounts, &result), nullptr);
  EXPECT_EQ(result.error, ENOENT);
}

}  // namespace
}  // namespace airlock::guest
