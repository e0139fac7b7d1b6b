// A loopback fake of the Anthropic Messages API for the agent tests (Claude Code, OpenCode):
// it answers a request that offers the scripted tool with a call of it, a request that already
// carries that call's result with a final text, and anything else (a title for the
// conversation) with a short text. It serves api.anthropic.com's name on port 443 with a
// certificate from the test CA airlockd trusts as the operator's (AIRLOCK_TEST_UPSTREAM), so
// an agent in a session reaches it through the egress proxy, and it keeps every x-api-key it
// was sent, so a test can check that only the real key ever arrived.
#ifndef AIRLOCK_TESTS_FAKE_MESSAGES_API_H_
#define AIRLOCK_TESTS_FAKE_MESSAGES_API_H_

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"
#include "tests/loopback_http_server.h"
#include "tests/test_certs.h"

namespace airlock {

class FakeMessagesApi {
 public:
  // The call the fake makes: tool `tool` with `input`, as tool_use id `tool_id`; `final_text`
  // once the call's result is back.
  FakeMessagesApi(std::string tool, nlohmann::json input, std::string tool_id,
                  std::string final_text)
      : tool_(std::move(tool)),
        input_(std::move(input)),
        tool_id_(std::move(tool_id)),
        final_text_(std::move(final_text)),
        server_(LoopbackHttpServer::RequestHandler(
                    [this](const std::string& path, const std::string& head) {
                      return Answer(path, head);
                    }),
                443, Upstream(), "anthropic") {}

  std::vector<std::string> keys() {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_;
  }
  // The bodies of the requests, in order.
  std::vector<std::string> bodies() { return server_.bodies(); }

 private:
  static std::string Upstream() {
    std::string upstream = std::getenv("AIRLOCK_TEST_UPSTREAM");
    Issue(upstream, "anthropic", "api.anthropic.com");
    return upstream;
  }

  static std::string Event(const std::string& type, const nlohmann::json& data) {
    return absl::StrCat("event: ", type, "\ndata: ", data.dump(), "\n\n");
  }

  static std::string JsonReply(int code, const nlohmann::json& body) {
    std::string text = body.dump();
    return absl::StrCat("HTTP/1.1 ", code, code == 200 ? " OK" : " Not Found",
                        "\r\nContent-Type: application/json\r\nContent-Length: ", text.size(),
                        "\r\nConnection: close\r\n\r\n", text);
  }

  // One streamed answer: a call of the tool, or text.
  std::string Streamed(const std::string& id, bool tool_call, const std::string& text) const {
    nlohmann::json message = {{"id", id},
                              {"type", "message"},
                              {"role", "assistant"},
                              {"model", "claude-sonnet-4-5-20250929"},
                              {"content", nlohmann::json::array()},
                              {"stop_reason", nullptr},
                              {"stop_sequence", nullptr},
                              {"usage", {{"input_tokens", 12}, {"output_tokens", 1}}}};
    std::string body = Event("message_start", {{"type", "message_start"}, {"message", message}});
    nlohmann::json block = tool_call ? nlohmann::json{{"type", "tool_use"},
                                                      {"id", tool_id_},
                                                      {"name", tool_},
                                                      {"input", nlohmann::json::object()}}
                                     : nlohmann::json{{"type", "text"}, {"text", ""}};
    nlohmann::json delta =
        tool_call ? nlohmann::json{{"type", "input_json_delta"}, {"partial_json", input_.dump()}}
                  : nlohmann::json{{"type", "text_delta"}, {"text", text}};
    body += Event("content_block_start",
                  {{"type", "content_block_start"}, {"index", 0}, {"content_block", block}});
    body += Event("content_block_delta",
                  {{"type", "content_block_delta"}, {"index", 0}, {"delta", delta}});
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

  std::optional<std::string> Answer(const std::string& path, const std::string& head) {
    std::string lower = absl::AsciiStrToLower(head);
    if (size_t at = lower.find("\r\nx-api-key:"); at != std::string::npos) {
      size_t start = head.find_first_not_of(' ', at + 12);
      std::lock_guard<std::mutex> lock(mu_);
      keys_.push_back(head.substr(start, head.find("\r\n", start) - start));
    }
    if (path != "/v1/messages") {
      return JsonReply(
          404, {{"type", "error"}, {"error", {{"type", "not_found_error"}, {"message", path}}}});
    }
    std::string body = server_.bodies().back();
    nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
    bool offers_tool = false;
    if (request.is_object() && request.contains("tools") && request["tools"].is_array()) {
      for (const nlohmann::json& t : request["tools"]) {
        offers_tool |= t.is_object() && t.value("name", "") == tool_;
      }
    }
    bool answered = absl::StrContains(body, tool_id_);
    std::string text = offers_tool ? final_text_ : "A note";
    if (request.is_object() && request.value("stream", false)) {
      return Streamed(answered ? "msg_02" : "msg_01", offers_tool && !answered, text);
    }
    return JsonReply(200, {{"id", "msg_00"},
                           {"type", "message"},
                           {"role", "assistant"},
                           {"model", "claude-haiku-4-5"},
                           {"content", {{{"type", "text"}, {"text", text}}}},
                           {"stop_reason", "end_turn"},
                           {"usage", {{"input_tokens", 5}, {"output_tokens", 2}}}});
  }

  std::string tool_;
  nlohmann::json input_;
  std::string tool_id_;
  std::string final_text_;
  std::mutex mu_;
  std::vector<std::string> keys_;
  LoopbackHttpServer server_;
};

// What a session's timeline (`airlock log --json`) shows of an agent's run: the command it ran
// in, and whether the agent's own record has the prompt, the fake's call (in that command), its
// result and the final text, and the activity record the call's file written by that command
// and mentioned by the agent.
struct AgentRun {
  uint64_t exec_id = 0;
  bool prompt = false, call = false, result = false, message = false, recorded = false;
};

inline AgentRun FindAgentRun(const nlohmann::json& events, const std::string& command,
                             const std::string& prompt, const std::string& tool,
                             const std::string& tool_id, const std::string& path,
                             const std::string& final_text) {
  AgentRun run;
  for (const nlohmann::json& e : events) {
    std::string kind = e["kind"];
    if (kind == "exec" && e["argv"][0] == command) run.exec_id = e["exec_id"];
    bool ours = run.exec_id != 0 && e.value("exec_id", 0ull) == run.exec_id;
    std::string text = e.value("text", "");
    if (kind == "agent.prompt" && absl::StrContains(text, prompt)) run.prompt = true;
    if (kind == "agent.tool_call" && e.value("tool_id", "") == tool_id) {
      run.call = e.value("tool", "") == tool && absl::StrContains(text, path) && ours;
    }
    if (kind == "agent.tool_result" && e.value("tool_id", "") == tool_id) run.result = true;
    if (kind == "agent.message" && absl::StrContains(text, final_text)) run.message = true;
    if (absl::StartsWith(kind, "activity.") &&
        (e.value("path", "") == path || e.value("path_to", "") == path)) {
      run.recorded = run.recorded || (ours && !e.value("unmentioned", true));
    }
  }
  return run;
}

inline void ExpectWholeRun(const AgentRun& run, const std::string& log) {
  EXPECT_NE(run.exec_id, 0u) << log;
  EXPECT_TRUE(run.prompt) << log;
  EXPECT_TRUE(run.call) << log;
  EXPECT_TRUE(run.result) << log;
  EXPECT_TRUE(run.message) << log;
  EXPECT_TRUE(run.recorded) << log;
}

// `airlock ARGS` (an `airlock agent` command) with ANTHROPIC_API_KEY=key in its environment:
// the session it made ("" if it said none), and what it printed in *r.
inline std::string RunAgent(const std::vector<std::string>& args, const char* key, Result* r) {
  setenv("ANTHROPIC_API_KEY", key, 1);
  Airlock agent(args);
  unsetenv("ANTHROPIC_API_KEY");
  // An agent's run is long (a JavaScript agent starting in a VM, under TCG, beside other suites):
  // a hang is what outlasts eight minutes.
  EXPECT_TRUE(agent.ReadUntil([] { return false; }, std::chrono::minutes(8))) << "the agent hung";
  *r = agent.Finish();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  size_t at = r->err.find("airlock agent: session ");
  return at == std::string::npos ? "" : r->err.substr(at + 23, 12);
}

}  // namespace airlock

#endif  // AIRLOCK_TESTS_FAKE_MESSAGES_API_H_
