// Fuzz target: what a guest answers to kTailFiles (Claude Code's transcripts) and to
// kReadAgentStore (OpenCode's store), decoded as the host decodes it, fed to the followers in
// two answers (the first byte picks the cut), and the events rendered as `airlock log` renders
// them. Whatever is accepted must keep its caps: clean
// names, at most the bytes asked for, texts cut at kAgentTextBytes, events as text only.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/cli/timeline_render.h"
#include "src/common/channel_messages.h"
#include "src/daemon/agent_transcripts.h"
#include "src/daemon/opencode_store.h"
#include "src/daemon/timeline.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t cut = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  cut = bytes.empty() ? 0 : cut * bytes.size() / 255;
  airlock::TranscriptFollower follower(*airlock::FindAgent("claude"), "", 7, 1000);
  std::vector<airlock::v1::TimelineEvent> shown;
  airlock::OpenCodeFollower store(*airlock::FindAgent("opencode"), "", 7, 1000);
  auto show = [&](const airlock::AgentEvent& e) {
    Check(e.text.size() <= airlock::kAgentTextBytes + 64);
    Check(e.unix_ms >= 0 && e.unix_ms <= 2000);
    airlock::v1::TimelineEvent t;
    t.set_kind(e.kind);
    t.set_text(e.text);
    t.set_tool(e.tool);
    t.set_tool_id(e.tool_id);
    shown.push_back(t);
  };
  for (std::string_view answer : {bytes.substr(0, cut), bytes.substr(cut)}) {
    airlock::AgentStoreMessage request = store.NextRequest();
    std::vector<airlock::StoreRow> rows;
    int number = 0;
    std::string what, store_error;
    if (airlock::DecodeStoreAnswer(answer, request, &number, &what, &rows, &store_error)) {
      Check(rows.size() <= request.max_rows);
      for (const airlock::AgentEvent& e : store.Take(rows, 2000, answer.empty())) show(e);
    }
    std::vector<airlock::TailRecord> records;
    std::string error;
    bool ok = airlock::DecodeTailRecords(answer, 1 << 20, &records, &error);
    if (!ok) {
      // Not records: still a transcript line, for the line parser on its own.
      for (const airlock::AgentEvent& e : airlock::ParseClaudeLine(answer, 7, 0, 2000)) {
        Check(e.text.size() <= airlock::kAgentTextBytes + 64);
      }
      continue;
    }
    size_t content = 0;
    for (const airlock::TailRecord& r : records) {
      Check(!r.name.empty() && r.name[0] != '/');
      Check(r.name != ".." && r.name.find("../") != 0 && r.name.find("/../") == std::string::npos &&
            (r.name.size() < 3 || r.name.compare(r.name.size() - 3, 3, "/..") != 0));
      content += r.bytes.size();
    }
    Check(content <= (1u << 20));
    for (const airlock::AgentEvent& e : follower.Take(records, 2000)) show(e);
  }
  std::string html = airlock::RenderTimelineHtml("fuzz", shown);
  Check(html.find("<script", html.find("timeline-data") + 1) != std::string::npos);
  std::string text = airlock::RenderTimelineText(shown, 5);
  Check(text.find('\x1b') == std::string::npos);
  return 0;
}
