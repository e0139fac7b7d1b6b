// Writes a timeline page of N synthetic events of every kind, some with hostile strings, for
// the browser test's large case (tests/timeline/timeline_page_test.mjs): the page is what
// `airlock log --html` writes; only the events are made up.
// Usage: timeline_page_fixture N OUT.html
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/cli/timeline_render.h"
#include "src/common/file_util.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: timeline_page_fixture N OUT.html\n");
    return 2;
  }
  int n = std::atoi(argv[1]);
  std::vector<airlock::v1::TimelineEvent> events;
  int64_t t = 1796000000000;
  int exec_id = 0;
  for (int i = 0; i < n; ++i) {
    airlock::v1::TimelineEvent e;
    e.set_seq(i + 1);
    e.set_unix_ms(t += 37);
    switch (i % 5) {
      case 0:
        e.set_kind("exec");
        e.set_exec_id(++exec_id);
        e.add_argv("sh");
        e.add_argv("-c");
        e.add_argv(absl::StrCat("make step-", i));
        e.set_summary(absl::StrCat("$ sh -c make step-", i, "  (exit ", i % 3, ")"));
        e.set_exit_code(i % 3);
        e.set_failed(i % 3 != 0);
        e.set_duration_ms(i % 2000);
        e.set_output(absl::StrCat("building step ", i, "\n</script><script>alert(", i,
                                  ")</script>\n\x1b[31mred\x1b[0m\n"));
        e.set_output_total(e.output().size());
        break;
      case 1:
        e.set_kind("agent.tool_call");
        e.set_actor("claude");
        e.set_exec_id(exec_id);
        e.set_tool("Bash");
        e.set_tool_id(absl::StrCat("toolu_", i));
        e.set_text(absl::StrCat("{\"command\":\"make step-", i, "\"}"));
        e.set_summary(absl::StrCat("Bash: ", e.text()));
        break;
      case 2:
        e.set_kind("agent.tool_result");
        e.set_actor("claude");
        e.set_exec_id(exec_id);
        e.set_tool_id(absl::StrCat("toolu_", i - 1));
        e.set_text(absl::StrCat("<img src=x onerror=alert(", i, ")> done ", i));
        e.set_summary(e.text());
        break;
      case 3:
        if (i % 10 == 3) {
          // The activity record: a write the agent did not mention, every tenth event.
          e.set_kind("activity.write");
          e.set_actor("guest");
          e.set_exec_id(exec_id);
          e.set_pid(100 + i);
          e.set_process("python3");
          e.set_path(absl::StrCat("/root/.bashrc-", i, "\x1b[31m<b>"));
          e.set_summary(absl::StrCat("write /root/.bashrc-", i, "\\x1b[31m<b> by python3"));
          e.set_unmentioned(true);
          break;
        }
        e.set_kind("net.dns");
        e.set_actor("guest");
        e.set_failed(true);
        e.set_summary(absl::StrCat("egress: dns host-", i, ".example denied: no rule allows it"));
        break;
      default:
        e.set_kind("agent.message");
        e.set_actor("claude");
        e.set_text(absl::StrCat("Step ", i, " looks fine. [link](javascript:alert(", i, "))"));
        e.set_summary(e.text());
    }
    events.push_back(std::move(e));
  }
  absl::Status s =
      airlock::WriteFileAtomically(argv[2], airlock::RenderTimelineHtml("fixture", events), 0644);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
