#include "src/gateway/e2b_control.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace airlock::gateway::e2b {
namespace {

TEST(E2bControlTest, RoutesAreE2BsPaths) {
  EXPECT_EQ(RouteOf("POST", "/v2/sandboxes").op, Op::kCreate);
  EXPECT_EQ(RouteOf("POST", "/sandboxes").op, Op::kCreate);
  EXPECT_EQ(RouteOf("GET", "/v2/sandboxes?state=running").op, Op::kList);
  Route get = RouteOf("GET", "/sandboxes/0123456789ab");
  EXPECT_EQ(get.op, Op::kGet);
  EXPECT_EQ(get.sandbox_id, "0123456789ab");
  EXPECT_EQ(RouteOf("DELETE", "/sandboxes/0123456789ab").op, Op::kKill);
  EXPECT_EQ(RouteOf("POST", "/sandboxes/0123456789ab/timeout").op, Op::kSetTimeout);
  EXPECT_EQ(RouteOf("POST", "/sandboxes/0123456789ab/pause").op, Op::kPause);
  EXPECT_EQ(RouteOf("POST", "/v2/sandboxes/0123456789ab/connect").op, Op::kConnect);
  EXPECT_EQ(RouteOf("POST", "/sandboxes/0123456789ab/resume").op, Op::kConnect);
  EXPECT_EQ(RouteOf("GET", "/sandboxes/0123456789ab/metrics?start=1&end=2").op, Op::kMetrics);
  EXPECT_EQ(RouteOf("POST", "/sandboxes/0123456789ab/snapshots").op, Op::kSnapshot);
  EXPECT_EQ(RouteOf("POST", "/sandboxes/0123456789ab/fork").op, Op::kFork);
  EXPECT_EQ(RouteOf("GET", "/snapshots?sandboxID=x").op, Op::kSnapshots);
  Route del = RouteOf("DELETE", "/templates/team%2Fmine");
  EXPECT_EQ(del.op, Op::kDeleteTemplate);
  EXPECT_EQ(del.template_id, "team/mine");
  EXPECT_EQ(RouteOf("POST", "/volumes").op, Op::kCreateVolume);
  EXPECT_EQ(RouteOf("GET", "/volumes").op, Op::kListVolumes);
  Route volume = RouteOf("GET", "/volumes/my%2Dvol");
  EXPECT_EQ(volume.op, Op::kGetVolume);
  EXPECT_EQ(volume.volume_id, "my-vol");
  EXPECT_EQ(RouteOf("DELETE", "/volumes/data").op, Op::kDeleteVolume);
  EXPECT_EQ(RouteOf("GET", "/volumecontent/data/dir").op, Op::kVolumeList);
  EXPECT_EQ(RouteOf("PUT", "/volumes/data").op, Op::kUnknown);
  EXPECT_EQ(RouteOf("GET", "/templates").op, Op::kUnknown);
  EXPECT_EQ(RouteOf("POST", "/templates/x").op, Op::kUnknown);
  EXPECT_EQ(RouteOf("GET", "/").op, Op::kNotApi);
  EXPECT_EQ(RouteOf("GET", "/index.html").op, Op::kNotApi);
}

TEST(E2bControlTest, VolumesAndTheirMountsAreAsTheSdkSendsThem) {
  absl::StatusOr<NewSandbox> n =
      ParseNewSandbox(R"({"volumeMounts":[{"name":"data","path":"/mnt/data"}]})");
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(n->volume_mounts.size(), 1u);
  EXPECT_EQ(n->volume_mounts[0], std::make_pair(std::string("data"), std::string("/mnt/data")));
  for (const char* bad : {R"({"volumeMounts":{"/mnt":"data"}})", R"({"volumeMounts":[{"name":1}]})",
                          R"({"volumeMounts":[{"name":"data"}]})"}) {
    EXPECT_FALSE(ParseNewSandbox(bad).ok()) << bad;
  }
  EXPECT_EQ(*ParseNewVolume(R"({"name":"data"})"), "data");
  EXPECT_FALSE(ParseNewVolume(R"({"name":""})").ok());
  EXPECT_FALSE(ParseNewVolume(R"({})").ok());
  nlohmann::json v = nlohmann::json::parse(VolumeJson("data", "vt_1"));
  EXPECT_EQ(v["volumeID"], "data");
  EXPECT_EQ(v["name"], "data");
  EXPECT_EQ(v["token"], "vt_1");
  nlohmann::json list = nlohmann::json::parse(VolumeListJson({"a", "b"}));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1]["volumeID"], "b");
  Sandbox s;
  s.volume_mounts = {{"data", "/mnt/data"}};
  nlohmann::json detail = nlohmann::json::parse(SandboxDetailJson(s));
  EXPECT_EQ(detail["volumeMounts"][0]["path"], "/mnt/data");
}

TEST(E2bControlTest, ACreateBodyIsCheckedFieldByField) {
  absl::StatusOr<NewSandbox> n = ParseNewSandbox(
      R"({"templateID":"base","timeout":60,"metadata":{"user":"ada"},"envVars":{"A":"1"},
          "allow_internet_access":false,"network":{"allowOut":["pypi.org"]},"unknown":1})");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->template_id, "base");
  EXPECT_EQ(n->timeout_seconds, 60u);
  EXPECT_EQ(n->metadata.at("user"), "ada");
  EXPECT_EQ(n->env_vars.at("A"), "1");
  EXPECT_EQ(n->allow_internet_access, false);
  EXPECT_EQ(n->allow_out, std::vector<std::string>{"pypi.org"});
  EXPECT_TRUE(n->allow_public_traffic);
  n = ParseNewSandbox(R"({"network":{"allowPublicTraffic":false}})");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_FALSE(n->allow_public_traffic);
  EXPECT_FALSE(ParseNewSandbox(R"({"network":{"allowPublicTraffic":"no"}})").ok());
  // Absent fields keep E2B's defaults.
  n = ParseNewSandbox("{}");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->template_id, "base");
  EXPECT_FALSE(n->timeout_seconds.has_value());
  for (const char* bad :
       {"", "[]", "{", R"({"timeout":0})", R"({"timeout":"60"})", R"({"timeout":99999999})",
        R"({"metadata":{"a":1}})", R"({"templateID":7})", R"({"network":{"allowOut":"x"}})"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseNewSandbox(bad).status())) << bad;
  }
  EXPECT_NE(ParseNewSandbox(R"({"timeout":-1})").status().message().find("timeout"),
            std::string::npos);
}

TEST(E2bControlTest, ALifecycleIsHonouredOrRefusedSayingWhy) {
  // What the SDK sends for lifecycle: {onTimeout: 'pause'} and {onTimeout: 'kill'}.
  absl::StatusOr<NewSandbox> n = ParseNewSandbox(R"({"autoPause":true})");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->auto_pause);
  n = ParseNewSandbox(
      R"({"autoPause":false,"autoPauseMemory":null,"autoResume":{"enabled":false}})");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_FALSE(n->auto_pause);
  EXPECT_FALSE(ParseNewSandbox("{}")->auto_pause);
  // What Airlock does not do is refused, never ignored.
  for (const auto& [body, says] : std::vector<std::pair<const char*, const char*>>{
           {R"({"autoPause":"yes"})", "autoPause must be true or false"},
           {R"({"autoPause":true,"autoPauseMemory":false})", "keepMemory"},
           {R"({"autoPause":true,"autoResume":{"enabled":true}})", "Sandbox.connect()"},
           {R"({"autoResume":true})", "autoResume"},
           {R"({"mcp":{"x":{}}})", "mcp"},
           {R"({"iam":{"tokens":{"t":{}}}})", "airlock secret"}}) {
    absl::Status s = ParseNewSandbox(body).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << body;
    EXPECT_NE(s.message().find(says), std::string::npos) << body << ": " << s;
  }
  Sandbox listed{.sandbox_id = "0123456789ab", .auto_pause = true};
  EXPECT_NE(
      SandboxDetailJson(listed).find(R"("lifecycle":{"autoResume":false,"onTimeout":"pause"})"),
      std::string::npos)
      << SandboxDetailJson(listed);
}

TEST(E2bControlTest, TimeoutBodies) {
  EXPECT_EQ(*ParseTimeout(R"({"timeout": 30})", true), 30u);
  EXPECT_FALSE(ParseTimeout("{}", true).ok());
  EXPECT_FALSE(ParseTimeout("", false)->has_value());
  EXPECT_FALSE(ParseTimeout("{}", false)->has_value());
}

TEST(E2bControlTest, ListQueriesAsTheSdkEscapesThem) {
  // metadata=user=ada&env=a b, escaped per pair, then as a whole, then by the query.
  absl::StatusOr<ListQuery> q = ParseListQuery(
      "/v2/sandboxes?state=running%2Cpaused&metadata=user%253Dada%2526env%253Da%252520b&limit=2"
      "&nextToken=4");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->states, (std::set<std::string>{"running", "paused"}));
  EXPECT_EQ(q->metadata, (std::map<std::string, std::string>{{"user", "ada"}, {"env", "a b"}}));
  EXPECT_EQ(q->limit, 2u);
  EXPECT_EQ(q->offset, 4u);
  EXPECT_FALSE(ParseListQuery("/v2/sandboxes?state=gone").ok());
  EXPECT_FALSE(ParseListQuery("/v2/sandboxes?limit=0").ok());
  EXPECT_FALSE(ParseListQuery("/v2/sandboxes?metadata=%zz").ok());
  EXPECT_TRUE(ParseListQuery("/v2/sandboxes")->states.empty());
}

TEST(E2bControlTest, AnswersCarryTheFieldsTheSdksRead) {
  Sandbox s{.sandbox_id = "0123456789ab",
            .template_id = "base",
            .state = "running",
            .started_ms = 1764806400000,
            .end_ms = 1764806700000,
            .cpu_count = 1,
            .memory_mb = 512,
            .disk_mb = 1024,
            .metadata = {{"user", "ada"}},
            .domain = "airlock.localhost"};
  nlohmann::json made = nlohmann::json::parse(SandboxJson(s));
  EXPECT_EQ(made["sandboxID"], "0123456789ab");
  EXPECT_EQ(made["templateID"], "base");
  EXPECT_EQ(made["envdVersion"], kEnvdVersion);
  EXPECT_EQ(made["domain"], "airlock.localhost");
  nlohmann::json detail = nlohmann::json::parse(SandboxDetailJson(s));
  EXPECT_EQ(detail["startedAt"], "2025-12-04T00:00:00.000Z");
  EXPECT_EQ(detail["endAt"], "2025-12-04T00:05:00.000Z");
  EXPECT_EQ(detail["state"], "running");
  EXPECT_EQ(detail["memoryMB"], 512);
  EXPECT_EQ(detail["metadata"]["user"], "ada");
  nlohmann::json list = nlohmann::json::parse(SandboxListJson({s, s}));
  EXPECT_EQ(list.size(), 2u);
  nlohmann::json error = nlohmann::json::parse(ErrorJson(404, "no sandbox \xff"));
  EXPECT_EQ(error["code"], 404);
}

TEST(E2bControlTest, ForksAndSnapshots) {
  absl::StatusOr<ForkRequest> fork = ParseForkRequest("");
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(fork->count, 1u);
  EXPECT_EQ(fork->timeout_seconds, 15u);  // E2B's default for forks
  fork = ParseForkRequest(R"({"count":3,"timeout":120})");
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(fork->count, 3u);
  EXPECT_EQ(fork->timeout_seconds, 120u);
  EXPECT_FALSE(ParseForkRequest(R"({"count":0})").ok());
  EXPECT_FALSE(ParseForkRequest(R"({"count":101})").ok());
  EXPECT_FALSE(ParseForkRequest(R"({"count":"2"})").ok());

  EXPECT_EQ(*ParseSnapshotRequest(""), std::nullopt);
  EXPECT_EQ(*ParseSnapshotRequest(R"({"name":"team/my-snap:v2"})"), "team/my-snap");
  EXPECT_FALSE(ParseSnapshotRequest(R"({"name":"Upper"})").ok());
  EXPECT_FALSE(ParseSnapshotRequest(R"({"name":"-x"})").ok());
  EXPECT_FALSE(ParseSnapshotRequest(R"({"name":""})").ok());
  EXPECT_EQ(SnapshotName("mine:default"), "mine");
  EXPECT_EQ(SnapshotName("a b"), std::nullopt);

  absl::StatusOr<SnapshotQuery> q =
      ParseSnapshotQuery("/snapshots?sandboxID=0123456789ab&name=mine%3Av1&limit=2&nextToken=4");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->sandbox_id, "0123456789ab");
  EXPECT_EQ(q->name, "mine");
  EXPECT_EQ(q->limit, 2u);
  EXPECT_EQ(q->offset, 4u);
  EXPECT_FALSE(ParseSnapshotQuery("/snapshots?limit=0").ok());

  EXPECT_EQ(nlohmann::json::parse(SnapshotListJson({{"mine", {"mine"}}, {"0123456789ab", {}}})),
            nlohmann::json::parse(R"([{"snapshotID":"mine","names":["mine"]},
                                      {"snapshotID":"0123456789ab","names":[]}])"));
  Sandbox s{.sandbox_id = "0123456789ab", .template_id = "base", .envd_access_token = "t"};
  nlohmann::json forks = nlohmann::json::parse(ForkResultsJson({s}));
  ASSERT_EQ(forks.size(), 1u);
  EXPECT_EQ(forks[0]["sandbox"]["sandboxID"], "0123456789ab");
  EXPECT_EQ(forks[0]["sandbox"]["envdAccessToken"], "t");
}

TEST(E2bControlTest, MetricsQueriesAreUnixSeconds) {
  absl::StatusOr<MetricsQuery> q = ParseMetricsQuery("/sandboxes/x/metrics");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->start_s, 0);
  EXPECT_EQ(q->end_s, INT64_MAX);
  q = ParseMetricsQuery("/sandboxes/x/metrics?start=100&end=200");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->start_s, 100);
  EXPECT_EQ(q->end_s, 200);
  EXPECT_FALSE(ParseMetricsQuery("/sandboxes/x/metrics?start=soon").ok());
  EXPECT_FALSE(ParseMetricsQuery("/sandboxes/x/metrics?start=-1").ok());
  EXPECT_FALSE(ParseMetricsQuery("/sandboxes/x/metrics?start=200&end=100").ok());
}

TEST(E2bControlTest, TemplateMapsAreNamesToImages) {
  absl::StatusOr<std::map<std::string, std::string>> m = ParseTemplateMap(
      "# E2B's names\n\ncode-interpreter-v1 airlock/bookworm-python  # the default\n"
      "base\tmy/image:2\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->at("code-interpreter-v1"), "airlock/bookworm-python");
  EXPECT_EQ(m->at("base"), "my/image:2");
  absl::StatusOr<std::map<std::string, std::string>> bad = ParseTemplateMap("a b\nonlyname\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseTemplateMap("a b\na c\n").ok());
}

TEST(E2bControlTest, PercentDecoding) {
  EXPECT_EQ(*PercentDecode("a%20b+c"), "a b+c");
  EXPECT_FALSE(PercentDecode("%").has_value());
  EXPECT_FALSE(PercentDecode("%4").has_value());
  EXPECT_FALSE(PercentDecode("%4g").has_value());
}

}  // namespace
}  // namespace airlock::gateway::e2b
