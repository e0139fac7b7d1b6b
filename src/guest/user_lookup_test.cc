#include "src/guest/user_lookup.h"

#include <gtest/gtest.h>

namespace airlock::guest {
namespace {

constexpr char kPasswd[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# a comment\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    "app:x:1000:1000::/home/app:/bin/sh\n"
    "broken:x:notanumber:1::/:\n";
constexpr char kGroup[] =
    "root:x:0:\n"
    "staff:x:50:app,other\n"
    "app:x:1000:\n"
    "docker:x:999:app\n"
    "nogroup:x:65534:\n";

Identity Resolve(const std::string& spec) {
  Identity who;
  std::string error;
  EXPECT_TRUE(ResolveUser(spec, kPasswd, kGroup, &who, &error)) << spec << ": " << error;
  return who;
}

std::string Error(const std::string& spec, const std::string& passwd = kPasswd) {
  Identity who;
  std::string error;
  EXPECT_FALSE(ResolveUser(spec, passwd, kGroup, &who, &error)) << spec;
  return error;
}

TEST(UserLookupTest, NamesAndIdsResolveLikeDocker) {
  Identity root = Resolve("");
  EXPECT_EQ(root.uid, 0u);
  EXPECT_EQ(root.gid, 0u);
  EXPECT_EQ(root.home, "/root");

  Identity app = Resolve("app");
  EXPECT_EQ(app.uid, 1000u);
  EXPECT_EQ(app.gid, 1000u);
  EXPECT_EQ(app.home, "/home/app");
  EXPECT_EQ(app.groups, (std::vector<gid_t>{1000, 50, 999}));

  EXPECT_EQ(Resolve("1000").home, "/home/app");  // a uid finds its entry too
  Identity staff = Resolve("app:staff");
  EXPECT_EQ(staff.gid, 50u);
  EXPECT_EQ(staff.groups, (std::vector<gid_t>{50, 999}));
  EXPECT_EQ(Resolve("nobody:0").gid, 0u);

  Identity stranger = Resolve("4242:4343");  // ids need no entry
  EXPECT_EQ(stranger.uid, 4242u);
  EXPECT_EQ(stranger.gid, 4343u);
  EXPECT_EQ(stranger.groups, (std::vector<gid_t>{4343}));
  EXPECT_EQ(stranger.home, "/");
  EXPECT_EQ(Resolve("4242").gid, 0u);

  // Without any database at all, root and numeric ids still work.
  Identity bare;
  std::string error;
  ASSERT_TRUE(ResolveUser("0", "", "", &bare, &error));
  EXPECT_EQ(bare.home, "/root");
}

TEST(UserLookupTest, WhatIsMissingIsNamed) {
  EXPECT_EQ(Error("ghost"), "user ghost is not in the image's /etc/passwd");
  EXPECT_EQ(Error("app:ghosts"), "group ghosts is not in the image's /etc/group");
  EXPECT_NE(Error("broken").find("no valid uid"), std::string::npos);
  EXPECT_NE(Error("4294967295").find("not in the image's /etc/passwd"), std::string::npos);
  EXPECT_NE(Error("app", std::string(100, ':')).find("not in"), std::string::npos);
}

TEST(IdNamesTest, NamesIdsOfEitherFileAndSkipsBrokenLines) {
  std::map<uint32_t, std::string> users = IdNames(kPasswd);
  EXPECT_EQ(users.at(0), "root");
  EXPECT_EQ(users.at(1000), "app");
  EXPECT_EQ(users.size(), 3u);  // "broken" has no number
  std::map<uint32_t, std::string> groups = IdNames(kGroup);
  EXPECT_EQ(groups.at(50), "staff");
  EXPECT_EQ(groups.at(65534), "nogroup");
}

}  // namespace
}  // namespace airlock::guest
