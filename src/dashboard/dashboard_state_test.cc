#include "src/dashboard/dashboard_state.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

v1::Session Session(const std::string& id, const std::string& tenant, v1::SessionState state) {
  v1::Session s;
  s.set_id(id);
  s.set_tenant(tenant);
  s.set_state(state);
  s.set_image("airlock/bookworm-python");
  return s;
}

v1::Vm Vm(const std::string& id, double cpu, uint64_t rss) {
  v1::Vm vm;
  vm.set_session_id(id);
  vm.set_host_cpu_percent(cpu);
  vm.set_host_rss_bytes(rss);
  return vm;
}

TEST(DashboardStateTest, CountsSessionsByStateAndTenant) {
  DashboardState state;
  state.SetSessions({Session("a1", "uid:1000", v1::SESSION_STATE_RUNNING),
                     Session("a2", "uid:1000", v1::SESSION_STATE_PAUSED),
                     Session("b1", "cert:ci", v1::SESSION_STATE_RUNNING)},
                    1000);
  nlohmann::json j = state.ToJson(1000);
  EXPECT_EQ(j["by_state"]["running"], 2);
  EXPECT_EQ(j["by_state"]["paused"], 1);
  EXPECT_EQ(j["by_tenant"]["uid:1000"]["running"], 1);
  EXPECT_EQ(j["by_tenant"]["uid:1000"]["paused"], 1);
  EXPECT_EQ(j["by_tenant"]["cert:ci"]["running"], 1);
  ASSERT_EQ(j["sessions"].size(), 3u);
  EXPECT_EQ(j["sessions"][2]["tenant"], "cert:ci");
}

TEST(DashboardStateTest, KeepsFourMinutesOfSamplesAndEvents) {
  DashboardState state;
  state.SetSessions({Session("a1", "uid:1000", v1::SESSION_STATE_RUNNING)}, 0);
  const int64_t minute = 60 * 1000;
  for (int64_t t = 0; t <= 6 * minute; t += 2000) {
    state.AddVmSamples({Vm("a1", 50, 100 << 20), Vm("unknown-but-running", 1, 1)}, t);
    v1::SessionEvent e;
    e.set_unix_ms(t);
    e.set_session_id("a1");
    e.set_kind(v1::SessionEvent::KIND_EXEC_START);
    e.add_argv("true");
    state.AddEvent(e);
  }
  nlohmann::json j = state.ToJson(6 * minute);
  const nlohmann::json& samples = j["sessions"][0]["samples"];
  EXPECT_EQ(samples.size(), 121u);  // every 2 s for 4 minutes, both ends
  EXPECT_EQ(samples.front()[0], 2 * minute);
  EXPECT_EQ(samples.back()[1], 50.0);
  EXPECT_EQ(j["events"].size(), 121u);
  // A session that is gone takes its samples with it.
  state.SetSessions({}, 6 * minute);
  state.AddVmSamples({}, 6 * minute);
  EXPECT_TRUE(state.ToJson(6 * minute)["sessions"].empty());
  // Much later, nothing is left of the window.
  EXPECT_TRUE(state.ToJson(20 * minute)["events"].empty());
}

TEST(DashboardStateTest, EventsAreCappedAndTheirTextIsTextCut) {
  DashboardState state;
  for (size_t i = 0; i < DashboardState::kMaxEvents + 50; ++i) {
    v1::SessionEvent e;
    e.set_unix_ms(1000);
    e.set_kind(v1::SessionEvent::KIND_EXEC_EXIT);
    e.set_exit_code(1);
    e.set_reason(std::string(2000, 'x') + "\xff");
    state.AddEvent(e);
  }
  v1::SessionEvent html;
  html.set_unix_ms(1000);
  html.set_kind(v1::SessionEvent::KIND_DENIED);
  html.set_destination("<img src=x onerror=alert(1)>:443");
  html.set_reason("no rule");
  state.AddEvent(html);
  nlohmann::json j = state.ToJson(1000);
  ASSERT_EQ(j["events"].size(), DashboardState::kMaxEvents);
  EXPECT_TRUE(j["events"][0]["failed"].get<bool>());
  EXPECT_LE(j["events"][0]["text"].get<std::string>().size(), DashboardState::kMaxTextBytes + 3);
  // Given as it is: the page puts it in as text.
  EXPECT_EQ(j["events"].back()["text"], "<img src=x onerror=alert(1)>:443: no rule");
  EXPECT_EQ(j["events"].back()["kind"], "denied");
  // Serializes (invalid UTF-8 was replaced before it got here).
  EXPECT_FALSE(j.dump().empty());
}

TEST(DashboardStateTest, SaysWhenAirlockdCannotBeReached) {
  DashboardState state;
  state.SetDaemonError("cannot reach airlockd (connection refused)", 5);
  EXPECT_EQ(state.ToJson(5)["daemon_error"], "cannot reach airlockd (connection refused)");
  state.SetSessions({}, 6);
  EXPECT_EQ(state.ToJson(6)["daemon_error"], "");
}

}  // namespace
}  // namespace airlock
