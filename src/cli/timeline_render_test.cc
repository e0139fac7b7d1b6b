#include "src/cli/timeline_render.h"

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace airlock {
namespace {

std::vector<v1::TimelineEvent> Hostile() {
  std::vector<v1::TimelineEvent> events(2);
  events[0].set_seq(1);
  events[0].set_kind("exec");
  events[0].set_exec_id(7);
  events[0].set_summary("$ sh -c </script><script>alert(1)</script>");
  events[0].add_argv("sh");
  events[0].set_output(
      std::string("\x1b]0;owned\x07 <img src=x onerror=alert(2)> \xff\xfe \xc2\x9b"
                  "31m javascript:alert(3) \xe2\x80\xa8 & done\r\n"));
  events[0].set_output_total(events[0].output().size());
  events[1].set_seq(2);
  events[1].set_kind("agent.tool_result");
  events[1].set_tool_id("\"><script>alert(4)</script>");
  events[1].set_text("<!-- <script>alert(5)</script>");
  return events;
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(TimelineRenderTest, TextShowsControlBytesAsEscapes) {
  std::string text = RenderTimelineText(Hostile(), 20);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("\\x1b]0;owned\\x07"), std::string::npos) << text;
  EXPECT_NE(text.find("\\xff\\xfe"), std::string::npos) << text;
  EXPECT_NE(text.find("\\u{9b}31m"), std::string::npos) << text;
  EXPECT_EQ(TerminalSafe("tab\tand\nline"), "tab\tand\nline");
}

TEST(TimelineRenderTest, JsonIsValidUtf8WithTheBytesEscaped) {
  nlohmann::json j = TimelineToJson(Hostile());
  std::string dumped = j.dump();  // throws on invalid UTF-8
  EXPECT_EQ(j[0]["output"].get<std::string>().substr(0, 1), "\x1b");
  EXPECT_NE(j[0]["output"].get<std::string>().find("\\xff\\xfe"), std::string::npos);
  EXPECT_EQ(j[0]["exec_id"], 7);
  EXPECT_EQ(j[1]["tool_id"], "\"><script>alert(4)</script>");
}

TEST(TimelineRenderTest, TheActivityRecordNamesItsCommandAndStaysText) {
  v1::TimelineEvent e;
  e.set_seq(1);
  e.set_kind("activity.write");
  e.set_actor("guest");
  e.set_exec_id(12);
  e.set_pid(34);
  e.set_process("py\x1b[2J");
  e.set_path("/root/.bashrc\n\x1b]0;x\x07\xff");
  e.set_summary("write /root/.bashrc\n\x1b]0;x\x07 by py\x1b[2J (pid 34)");
  e.set_unmentioned(true);
  std::string text = RenderTimelineText({e}, 20);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_NE(text.find("activity.write #12 !"), std::string::npos) << text;
  nlohmann::json j = TimelineToJson({e});
  j.dump();  // valid UTF-8
  EXPECT_EQ(j[0]["pid"], 34);
  EXPECT_EQ(j[0]["process"], "py\x1b[2J");
  EXPECT_EQ(j[0]["path"], "/root/.bashrc\n\x1b]0;x\x07\\xff");
  EXPECT_EQ(j[0]["unmentioned"], true);
  EXPECT_FALSE(j[0].contains("path_to"));
}

TEST(TimelineRenderTest, ThePageHoldsGuestStringsOnlyAsEscapedData) {
  std::string html = RenderTimelineHtml("abc<def>", Hostile());
  // Exactly the page's two script elements (data and code), no markup from the events.
  EXPECT_EQ(Count(html, "<script"), 2u);
  EXPECT_EQ(Count(html, "</script"), 2u);
  EXPECT_EQ(Count(html, "<img"), 0u);
  EXPECT_EQ(Count(html, "<!--"), 0u);
  EXPECT_EQ(html.find('\x1b'), std::string::npos);
  EXPECT_EQ(html.find("\xe2\x80\xa8"), std::string::npos);
  EXPECT_NE(html.find("<title>airlock log abc&lt;def&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'; script-src 'sha256-"), std::string::npos);
  // The data parses back to the same events.
  size_t start = html.find("id=\"timeline-data\">");
  ASSERT_NE(start, std::string::npos);
  start += std::string("id=\"timeline-data\">").size();
  size_t end = html.find("</script>", start);
  nlohmann::json data = nlohmann::json::parse(html.substr(start, end - start));
  EXPECT_EQ(data["events"], TimelineToJson(Hostile()));
  EXPECT_EQ(data["title"], "abc<def>");
}

}  // namespace
}  // namespace airlock
