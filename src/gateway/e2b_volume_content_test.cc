#include "src/gateway/e2b_volume_content.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "src/gateway/e2b_control.h"

namespace airlock::gateway::e2b {
namespace {

TEST(E2bVolumeContentTest, RoutesNameTheVolumeAndTheOperation) {
  EXPECT_EQ(RouteOf("GET", "/volumecontent/data/dir?path=/").op, Op::kVolumeList);
  EXPECT_EQ(RouteOf("POST", "/volumecontent/data/dir?path=/a").op, Op::kVolumeMakeDir);
  EXPECT_EQ(RouteOf("GET", "/volumecontent/data/path?path=/a").op, Op::kVolumeStat);
  EXPECT_EQ(RouteOf("PATCH", "/volumecontent/data/path?path=/a").op, Op::kVolumeSetMetadata);
  EXPECT_EQ(RouteOf("DELETE", "/volumecontent/data/path?path=/a").op, Op::kVolumeRemove);
  EXPECT_EQ(RouteOf("GET", "/volumecontent/data/file?path=/a").op, Op::kVolumeRead);
  Route put = RouteOf("PUT", "/volumecontent/my%20data/file?path=/a");
  EXPECT_EQ(put.op, Op::kVolumeWrite);
  EXPECT_EQ(put.volume_id, "my data");
  EXPECT_TRUE(IsVolumeContent(put.op));
  // Known paths with other methods, or other parts, are the API's but not served.
  EXPECT_EQ(RouteOf("PUT", "/volumecontent/data/dir").op, Op::kUnknown);
  EXPECT_EQ(RouteOf("GET", "/volumecontent/data/other").op, Op::kUnknown);
  EXPECT_EQ(RouteOf("GET", "/volumecontent/data").op, Op::kUnknown);
  EXPECT_FALSE(IsVolumeContent(RouteOf("GET", "/volumes/data").op));
}

TEST(E2bVolumeContentTest, PathsStayInsideTheVolume) {
  absl::StatusOr<VolumeContentQuery> q =
      ParseVolumeContentQuery("/x?path=a/./b//c/&depth=3&uid=1000&gid=0&mode=420&force=TRUE");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->path, "/a/b/c");
  EXPECT_EQ(q->depth, 3u);
  EXPECT_EQ(q->uid, 1000u);
  EXPECT_EQ(q->gid, 0u);
  EXPECT_EQ(q->mode, 0644u);
  EXPECT_TRUE(q->force);
  EXPECT_EQ(ParseVolumeContentQuery("/x?path=/")->path, "/");
  EXPECT_EQ(ParseVolumeContentQuery("/x?path=")->path, "/");
  EXPECT_EQ(ParseVolumeContentQuery("/x?path=%2Fa")->depth, 1u);
  for (const char* bad : {"/x", "/x?path=../etc", "/x?path=/a/%2E%2E/..", "/x?path=/a/..",
                          "/x?path=/&depth=0", "/x?path=/&depth=65", "/x?path=/&mode=4096",
                          "/x?path=/&uid=-1", "/x?path=/&force=yes", "/x?path=%zz"}) {
    absl::StatusOr<VolumeContentQuery> refused = ParseVolumeContentQuery(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << bad;
  }
  EXPECT_NE(ParseVolumeContentQuery("/x?path=/a/..").status().message().find("(..)"),
            std::string::npos);
}

TEST(E2bVolumeContentTest, MetadataBodiesSetSomethingWithinRange) {
  absl::StatusOr<VolumeMetadata> m = ParseVolumeMetadata(R"({"uid": 1000, "mode": 493})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->uid, 1000u);
  EXPECT_FALSE(m->gid.has_value());
  EXPECT_EQ(m->mode, 0755u);
  for (const char* bad : {"", "[]", "{}", R"({"uid": null})", R"({"mode": 4096})", R"({"uid": -1})",
                          R"({"gid": "1"})", R"({"mode": 1.5})"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseVolumeMetadata(bad).status())) << bad;
  }
}

TEST(E2bVolumeContentTest, EntriesAreDescribedInsideTheVolume) {
  FsEntry file{.name = "b.txt",
               .path = "/volume/a/b.txt",
               .type = FsType::kFile,
               .size = 5,
               .mode = 0100640,
               .mtime_seconds = 1700000000,
               .uid = 1000,
               .gid = 100,
               .atime_seconds = 1700000001,
               .ctime_seconds = 1700000002,
               .ctime_nanos = 5};
  nlohmann::json j = nlohmann::json::parse(VolumeEntryJson(file, "/volume"));
  EXPECT_EQ(j["name"], "b.txt");
  EXPECT_EQ(j["path"], "/a/b.txt");
  EXPECT_EQ(j["type"], "file");
  EXPECT_EQ(j["size"], 5);
  EXPECT_EQ(j["mode"], 0640);
  EXPECT_EQ(j["uid"], 1000);
  EXPECT_EQ(j["gid"], 100);
  EXPECT_EQ(j["mtime"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["atime"], "2023-11-14T22:13:21Z");
  EXPECT_EQ(j["ctime"], "2023-11-14T22:13:22.000000005Z");
  EXPECT_FALSE(j.contains("target"));
  FsEntry root{.name = "volume", .path = "/volume", .type = FsType::kDirectory};
  FsEntry link{.name = "l", .path = "/volume/l", .type = FsType::kSymlink, .symlink_target = "b"};
  nlohmann::json list = nlohmann::json::parse(VolumeListingJson({root, link}, "/volume"));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["path"], "/");
  EXPECT_EQ(list[0]["name"], "/");
  EXPECT_EQ(list[0]["type"], "directory");
  EXPECT_EQ(list[1]["type"], "symlink");
  EXPECT_EQ(list[1]["target"], "b");
}

TEST(E2bVolumeContentTest, BearerTokensAreTakenFromAuthorization) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer   abc "), "abc");
  EXPECT_FALSE(BearerToken("Basic abc").has_value());
  EXPECT_FALSE(BearerToken("Bearer ").has_value());
  EXPECT_FALSE(BearerToken("").has_value());
}

}  // namespace
}  // namespace airlock::gateway::e2b
