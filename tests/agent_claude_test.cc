// Claude Code in a session, end to end and without the internet: `airlock agent claude` runs
// the real agent (the airlock/claude image scripts/test.sh builds) against a loopback fake of
// the Anthropic Messages API that the test scripts: first a tool call that writes a file in
// /workspace, then a final message. The agent reaches the fake as api.anthropic.com through the
// egress proxy (the test resolver maps the name to the loopback), and the proxy puts the real
// key into its requests: the fake checks it got that key, and the guest only ever held a
// placeholder. Afterwards `airlock diff` shows the file and `airlock log --json` has the
// prompt, the tool call, its result and the command the agent ran in, and beside them the
// activity record's write of the file by that command, which the agent's call names.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "tests/loopback_http_server.h"
#include "tests/test_certs.h"

namespace airlock {
namespace {

constexpr char kRealKey[] = "sk-ant-api03-airlock-test-real-key-0123456789";
constexpr char kPrompt[] = "Write a note for the reviewers into /workspace/NOTES.md";
constexpr char kToolId[] = "toolu_01AirlockTestWrite";

std::string Event(const std::string& type, const nlohmann::json& data) {
  return absl::StrCat("event: ", type, "\ndata: ", data.dump(), "\n\n");
}

// One streamed Messages API answer: a tool call, or text.
std::string StreamedMessage(const std::string& id, bool tool_call) {
  nlohmann::json message = {{"id", id},
                            {"type", "message"},
                            {"role", "assistant"},
                            {"model", "claude-sonnet-4-5-20250929"},
                            {"content", nlohmann::json::array()},
                            {"stop_reason", nullptr},
                            {"stop_sequence", nullptr},
                            {"usage", {{"input_tokens", 12}, {"output_tokens", 1}}}};
  std::string body = Event("message_start", {{"type", "message_start"}, {"message", message}});
  if (tool_call) {
    body += Event("content_block_start", {{"type", "content_block_start"},
                                          {"index", 0},
                                          {"content_block",
                                           {{"type", "tool_use"},
                                            {"id", kToolId},
                                            {"name", "Write"},
                                            {"input", nlohmann::json::object()}}}});
    nlohmann::json input = {{"file_path", "/workspace/NOTES.md"},
                            {"content", "Reviewed by the agent in the airlock.\n"}};
    body += Event("content_block_delta",
                  {{"type", "content_block_delta"},
                   {"index", 0},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", input.dump()}}}});
  } else {
    body += Event("content_block_start", {{"type", "content_block_start"},
                                          {"index", 0},
                                          {"content_block", {{"type", "text"}, {"text", ""}}}});
    body +=
        Event("content_block_delta",
              {{"type", "content_block_delta"},
               {"index", 0},
               {"delta", {{"type", "text_delta"}, {"text", "Done: the note is in NOTES.md."}}}});
  }
  body += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  body +=
      Event("message_delta",
            {{"type", "message_delta"},
             {"delta",
              {{"stop_reason", tool_call ? "tool_use" : "end_turn"}, {"stop_sequence", nullptr}}},
             {"usage", {{"output_tokens", 20}}}});
  body += Event("message_stop", {{"type", "message_stop"}});
  return absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\nConnection: close\r\n\r\n",
      body);
}

std::string JsonReply(int code, const nlohmann::json& body) {
  std::string text = body.dump();
  return absl::StrCat("HTTP/1.1 ", code, code == 200 ? " OK" : " Not Found",
                      "\r\nContent-Type: application/json\r\nContent-Length: ", text.size(),
                      "\r\nConnection: close\r\n\r\n", text);
}

TEST(AgentClaudeTest, ClaudeCodeWorksInASessionAndItsTimelineShowsWhatItDid) {
  // The fake API, with a certificate for api.anthropic.com from the CA airlockd trusts as the
  // operator's (AIRLOCK_UPSTREAM_CA), on the port the agent dials.
  std::string upstream = std::getenv("AIRLOCK_TEST_UPSTREAM");
  Issue(upstream, "anthropic", "api.anthropic.com");
  std::vector<std::string> keys;
  std::mutex keys_mu;
  LoopbackHttpServer* server_ptr = nullptr;
  LoopbackHttpServer api(
      LoopbackHttpServer::RequestHandler(
          [&](const std::string& path, const std::string& head) -> std::optional<std::string> {
            std::string lower = absl::AsciiStrToLower(head);
            if (size_t at = lower.find("\r\nx-api-key:"); at != std::string::npos) {
              size_t start = head.find_first_not_of(' ', at + 12);
              std::lock_guard<std::mutex> lock(keys_mu);
              keys.push_back(head.substr(start, head.find("\r\n", start) - start));
            }
            if (path != "/v1/messages") {
              return JsonReply(404, {{"type", "error"},
                                     {"error", {{"type", "not_found_error"}, {"message", path}}}});
            }
            std::string body = server_ptr->bodies().back();
            bool answered = absl::StrContains(body, kToolId);
            nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
            if (request.is_object() && request.value("stream", false)) {
              return StreamedMessage(answered ? "msg_02" : "msg_01", !answered);
            }
            // A request that does not stream (e.g. a title for the conversation).
            return JsonReply(200, {{"id", "msg_00"},
                                   {"type", "message"},
                                   {"role", "assistant"},
                                   {"model", "claude-haiku-4-5"},
                                   {"content", {{{"type", "text"}, {"text", "A note"}}}},
                                   {"stop_reason", "end_turn"},
                                   {"usage", {{"input_tokens", 5}, {"output_tokens", 2}}}});
          }),
      443, upstream, "anthropic");
  server_ptr = &api;

  TestDir project;
  ASSERT_TRUE(WriteFileAtomically(project.path + "/README.md", "# A project\n", 0644).ok());
  setenv("ANTHROPIC_API_KEY", kRealKey, 1);
  Result r = RunAirlock({"agent", "claude", "--workspace", project.path, "--", "-p", kPrompt,
                         "--dangerously-skip-permissions"});
  unsetenv("ANTHROPIC_API_KEY");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Done: the note is in NOTES.md."), std::string::npos) << r.out << r.err;
  size_t at = r.err.find("airlock agent: session ");
  ASSERT_NE(at, std::string::npos) << r.err;
  std::string id = r.err.substr(at + 23, 12);

  // The API got the real key every time; the guest held a placeholder.
  {
    std::lock_guard<std::mutex> lock(keys_mu);
    ASSERT_FALSE(keys.empty());
    for (const std::string& k : keys) EXPECT_EQ(k, kRealKey);
  }
  Result env = RunAirlock({"exec", id, "--", "sh", "-c", "echo $ANTHROPIC_API_KEY"});
  EXPECT_EQ(env.out.find(kRealKey), std::string::npos);
  EXPECT_NE(env.out.find("AIRLOCK_PLACEHOLDER_"), std::string::npos) << env.out;

  // The agent's work, in the session (still running) and not on the host.
  Result diff = RunAirlock({"diff", id});
  EXPECT_NE(diff.out.find("NOTES.md"), std::string::npos) << diff.out << diff.err;
  EXPECT_NE(diff.out.find("+Reviewed by the agent in the airlock."), std::string::npos);
  EXPECT_FALSE(std::ifstream(project.path + "/NOTES.md").good());
  EXPECT_NE(RunAirlock({"ls"}).out.find(id), std::string::npos);

  // What it did, in its timeline.
  Result log = RunAirlock({"log", id, "--json"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json events = nlohmann::json::parse(log.out);
  uint64_t agent_exec = 0;
  bool prompt = false, call = false, result = false, message = false, recorded = false;
  for (const nlohmann::json& e : events) {
    std::string kind = e["kind"];
    if (kind == "exec" && e["argv"][0] == "claude") agent_exec = e["exec_id"];
    if (kind == "agent.prompt" && absl::StrContains(e.value("text", ""), kPrompt)) prompt = true;
    if (kind == "agent.tool_call" && e.value("tool_id", "") == kToolId) {
      call = e.value("tool", "") == "Write" &&
             absl::StrContains(e.value("text", ""), "/workspace/NOTES.md") &&
             e.value("exec_id", 0ull) == agent_exec && agent_exec != 0;
    }
    if (kind == "agent.tool_result" && e.value("tool_id", "") == kToolId) result = true;
    if (kind == "agent.message" && absl::StrContains(e.value("text", ""), "Done: the note"))
      message = true;
    // The activity record saw the file written, by the agent's command, and the agent said so.
    if (absl::StartsWith(kind, "activity.") && (e.value("path", "") == "/workspace/NOTES.md" ||
                                                e.value("path_to", "") == "/workspace/NOTES.md")) {
      recorded = recorded || (e.value("exec_id", 0ull) == agent_exec && agent_exec != 0 &&
                              !e.value("unmentioned", true));
    }
  }
  EXPECT_NE(agent_exec, 0u) << log.out;
  EXPECT_TRUE(prompt) << log.out;
  EXPECT_TRUE(call) << log.out;
  EXPECT_TRUE(result) << log.out;
  EXPECT_TRUE(message) << log.out;
  EXPECT_TRUE(recorded) << log.out;
  RunAirlock({"rm", id});
}

// What an agent's transcripts may hold is the guest's to choose: markup, escape sequences,
// invalid UTF-8, a 100 MB line, a symbolic link to a file the agent never wrote, a file that
// grows without end. The timeline keeps them as text, follows no link, and stays within caps.
TEST(AgentClaudeTest, HostileTranscriptsStayTextAndWithinTheCaps) {
  Result created = RunAirlock({"session", "create", "--disk", "2g"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string id(absl::StripTrailingAsciiWhitespace(created.out));
  const char* setup =
      "set -e; d=/root/.claude/projects/p; mkdir -p $d\n"
      "printf '%s\\n' '{\"type\":\"user\",\"message\":{\"content\":\"</script><script>"
      "alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3)) "
      "\\u001b[31mred\"}}' > $d/hostile.jsonl\n"
      "printf '{\"type\":\"user\",\"message\":{\"content\":\"bad \\377\\376 bytes\"}}\\n' "
      ">> $d/hostile.jsonl\n"
      "printf '{\"type\":\"user\",\"message\":{\"content\":\"SECRET-VIA-LINK\"}}\\n' > "
      "/tmp/secret.jsonl\n"
      "mkdir -p /tmp/elsewhere; cp /tmp/secret.jsonl /tmp/elsewhere/\n"
      "ln -s /tmp/secret.jsonl $d/evil.jsonl; ln -s /tmp/elsewhere $d/linked\n"
      "head -c 100000000 /dev/zero | tr '\\0' x > $d/huge.jsonl\n";
  Result r = RunAirlock({"exec", id, "--", "sh", "-c", setup});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The "agent": a command marked as Claude Code that makes a transcript grow without end.
  r = RunAirlock({"exec", "--agent", "claude", id, "--", "sh", "-c",
                  "while :; do echo '{\"type\":\"user\",\"message\":{\"content\":\"again\"}}'; "
                  "done > /root/.claude/projects/p/grow.jsonl & sleep 9; kill $!"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Result log = RunAirlock({"log", id, "--json"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  nlohmann::json events = nlohmann::json::parse(log.out);
  bool markup = false, bytes = false, skipped = false;
  size_t again = 0, agent_events = 0;
  for (const nlohmann::json& e : events) {
    std::string kind = e["kind"], text = e.value("text", "");
    if (kind.rfind("agent.", 0) != 0) continue;
    ++agent_events;
    EXPECT_EQ(text.find("SECRET-VIA-LINK"), std::string::npos);
    markup |= absl::StrContains(text, "</script><script>alert(1)</script> <img src=x");
    bytes |= text == "bad \\xff\\xfe bytes";
    skipped |= kind == "agent.note" && absl::StrContains(text, "huge.jsonl");
    again += text == "again";
  }
  EXPECT_TRUE(markup) << log.out.substr(0, 3000);
  EXPECT_TRUE(bytes) << log.out.substr(0, 3000);
  EXPECT_TRUE(skipped) << log.out.substr(0, 3000);
  EXPECT_GT(again, 0u);
  EXPECT_LE(agent_events, static_cast<size_t>(20000));
  // The text form shows the escape sequence as \x1b, not as a colour.
  Result text = RunAirlock({"log", id});
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos);
  EXPECT_NE(text.out.find("\\x1b[31mred"), std::string::npos);
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
