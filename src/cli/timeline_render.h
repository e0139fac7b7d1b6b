// `airlock log`: a session's timeline as text for a terminal, as JSON for programs, and as one
// self-contained HTML page. Every string from the guest (output, transcripts, names) is hostile:
// the text form shows control bytes as \xNN (no escape sequence reaches the terminal), the JSON
// form is valid UTF-8 (invalid bytes as \xNN), and the page shows everything as text (its data
// is JSON inside a non-executed script element; its code only ever sets textContent) under a
// Content-Security-Policy that runs nothing but the page's own script and fetches nothing.
#ifndef AIRLOCK_CLI_TIMELINE_RENDER_H_
#define AIRLOCK_CLI_TIMELINE_RENDER_H_

#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "proto/airlock/v1/airlock.pb.h"

namespace airlock {

// Bytes made safe to print on a terminal: valid UTF-8, and every control character other than
// newline and tab (C0, DEL, C1) as \xNN or \u{NN}.
std::string TerminalSafe(std::string_view bytes);

// One line per event (exec output indented below its command, at most output_lines lines).
std::string RenderTimelineText(const std::vector<v1::TimelineEvent>& events, size_t output_lines);

// One JSON object per event, in order.
nlohmann::json TimelineToJson(const std::vector<v1::TimelineEvent>& events);

// The page. title: what it is about (the session's id), shown as text.
std::string RenderTimelineHtml(const std::string& title,
                               const std::vector<v1::TimelineEvent>& events);

}  // namespace airlock

#endif  // AIRLOCK_CLI_TIMELINE_RENDER_H_
