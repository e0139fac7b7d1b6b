#include "src/cli/timeline_render.h"

#include <time.h>

#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "src/common/sha256.h"
#include "src/common/utf8.h"

namespace airlock {
namespace {

std::string IsoTime(int64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms / 1000);
  tm utc;
  gmtime_r(&t, &utc);
  char when[32];
  strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%03dZ", when, static_cast<int>(unix_ms % 1000));
}

std::string Utf8(std::string_view bytes) { return EscapeInvalidUtf8(bytes); }

// The page's style and code. Both are inline (one file, nothing fetched) and allowed by their
// hashes in the Content-Security-Policy, so nothing else on the page can run or style it.
constexpr char kStyle[] = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2327; background: #f6f7f9; }
header { padding: 12px 20px; background: #1d2327; color: #f6f7f9; }
header h1 { font-size: 17px; margin: 0 0 4px; }
header p { margin: 0; color: #c3c8ce; }
#controls { position: sticky; top: 0; z-index: 1; display: flex; flex-wrap: wrap; gap: 10px;
  align-items: center; padding: 10px 20px; background: #fff; border-bottom: 1px solid #d5d9de; }
#q { flex: 1 1 260px; padding: 6px 8px; font-size: 14px; }
#kinds label { margin-right: 8px; white-space: nowrap; }
#count { color: #5c6670; }
#exec { max-width: 320px; }
main { padding: 8px 20px 40px; }
.ev { background: #fff; border: 1px solid #e0e3e7; border-left: 4px solid #8c96a0;
  border-radius: 4px; margin: 6px 0; padding: 6px 10px; }
.ev.exec { border-left-color: #2f6fde; }
.ev.agent { border-left-color: #8a4fd8; }
.ev.net, .ev.network { border-left-color: #1a9c7a; }
.ev.activity { border-left-color: #b26b00; }
.ev.unmentioned .kind::after { content: " (not mentioned by the agent)"; color: #b32d2e; }
.ev.failed { border-left-color: #d63638; background: #fff7f7; }
.ev.target { outline: 2px solid #f0b429; }
.head { display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.head time { color: #5c6670; font-family: ui-monospace, monospace; font-size: 12px; }
.kind { font-weight: 600; }
.actor { color: #5c6670; }
.summary { font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
.dur { margin-left: auto; color: #5c6670; }
.meta, .links { color: #5c6670; font-size: 12px; margin-top: 2px; }
.links a { margin-right: 10px; }
pre { background: #f3f4f6; padding: 8px; margin: 6px 0 0; max-height: 420px; overflow: auto;
  white-space: pre-wrap; word-break: break-all; font-size: 12px; }
#more { height: 1px; }
)css";

constexpr char kScript[] = R"js(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('timeline-data').textContent);
  var events = data.events;
  var list = document.getElementById('events');
  var more = document.getElementById('more');
  var q = document.getElementById('q');
  var kinds = document.getElementById('kinds');
  var execSel = document.getElementById('exec');
  var unmentioned = document.getElementById('unmentioned');
  var count = document.getElementById('count');
  var CHUNK = 200;
  var shown = [];
  var rendered = 0;
  var enabled = {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function group(kind) {
    var i = kind.indexOf('.');
    return i < 0 ? kind : kind.slice(0, i);
  }
  function fmtTime(ms) {
    return new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
  }
  function fmtDur(ms) {
    if (ms < 0) return 'no end recorded';
    return ms < 1000 ? ms + ' ms' : (ms / 1000).toFixed(1) + ' s';
  }
  var bySeq = {}, execSeq = {}, callSeq = {}, resultSeq = {};
  events.forEach(function (e, i) {
    bySeq[e.seq] = i;
    if (e.kind === 'exec') execSeq[e.exec_id] = e.seq;
    if (e.kind === 'agent.tool_call' && e.tool_id) callSeq[e.tool_id] = e.seq;
    if (e.kind === 'agent.tool_result' && e.tool_id) resultSeq[e.tool_id] = e.seq;
  });
  var hay = events.map(function (e) {
    return [e.kind, e.summary, e.actor || '', (e.argv || []).join(' '), e.output || '',
            e.text || '', e.tool || '', e.tool_id || '', e.path || '', e.path_to || '',
            e.process || ''].join('\n').toLowerCase();
  });

  function link(text, seq) {
    var a = el('a', null, text);
    a.href = '#ev-' + seq;
    a.addEventListener('click', function (ev) {
      ev.preventDefault();
      reveal(seq);
    });
    return a;
  }
  function textBlock(row, label, text, open) {
    if (text.length <= 300 && text.indexOf('\n') < 0 && !open) {
      row.appendChild(el('pre', null, text));
      return;
    }
    var d = el('details');
    d.open = !!open;
    d.appendChild(el('summary', null, label));
    d.appendChild(el('pre', null, text));
    row.appendChild(d);
  }
  function render(i) {
    var e = events[i];
    var row = el('article', 'ev ' + group(e.kind) + (e.failed ? ' failed' : '') +
                 (e.unmentioned ? ' unmentioned' : ''));
    row.id = 'ev-' + e.seq;
    var head = el('div', 'head');
    head.appendChild(el('time', null, fmtTime(e.unix_ms)));
    head.appendChild(el('span', 'kind', e.kind === 'exec' ? 'exec #' + e.exec_id : e.kind));
    if (e.actor) head.appendChild(el('span', 'actor', e.actor));
    head.appendChild(el('span', 'summary', e.summary));
    if (e.kind === 'exec') head.appendChild(el('span', 'dur', fmtDur(e.duration_ms)));
    row.appendChild(head);
    if (e.kind === 'exec') {
      var where = [];
      if (e.user) where.push('as ' + e.user);
      if (e.cwd) where.push('in ' + e.cwd);
      if (e.tty) where.push('on a terminal');
      where.push('exit ' + e.exit_code);
      row.appendChild(el('div', 'meta', where.join(' \u00b7 ')));
      if (e.output) {
        textBlock(row, 'output: ' + e.output_total + ' bytes' +
                  (e.output_truncated ? ' (the first ' + e.output.length + ' characters shown)' : ''),
                  e.output, false);
      }
      if (e.text) row.appendChild(el('div', 'meta', e.text));
    } else if (e.text) {
      textBlock(row, (e.tool ? e.tool + ': ' : '') + e.text.length + ' characters', e.text, false);
    }
    if (group(e.kind) === 'activity' && e.kind !== 'activity.lost') {
      var facts = ['pid ' + e.pid];
      if (e.parent_pid) facts.push('parent ' + e.parent_pid);
      if (e.argv && e.argv.length) facts.push('argv ' + JSON.stringify(e.argv));
      row.appendChild(el('div', 'meta', facts.join(' \u00b7 ')));
    }
    var links = el('div', 'links');
    if (e.exec_id && e.kind !== 'exec' && execSeq[e.exec_id]) {
      links.appendChild(link('in exec #' + e.exec_id, execSeq[e.exec_id]));
    }
    if (e.kind === 'agent.tool_call' && resultSeq[e.tool_id]) {
      links.appendChild(link('its result', resultSeq[e.tool_id]));
    }
    if (e.kind === 'agent.tool_result' && callSeq[e.tool_id]) {
      links.appendChild(link('the call', callSeq[e.tool_id]));
    }
    if (links.childNodes.length) row.appendChild(links);
    return row;
  }
  function renderMore() {
    var end = Math.min(shown.length, rendered + CHUNK);
    var frag = document.createDocumentFragment();
    for (; rendered < end; rendered++) frag.appendChild(render(shown[rendered]));
    list.appendChild(frag);
  }
  function refilter() {
    var words = q.value.toLowerCase().split(/\s+/).filter(Boolean);
    var exec = execSel.value;
    shown = [];
    for (var i = 0; i < events.length; i++) {
      var e = events[i];
      if (!enabled[group(e.kind)]) continue;
      if (exec && String(e.exec_id) !== exec) continue;
      if (unmentioned.checked && !e.unmentioned) continue;
      var ok = true;
      for (var w = 0; w < words.length && ok; w++) ok = hay[i].indexOf(words[w]) >= 0;
      if (ok) shown.push(i);
    }
    list.textContent = '';
    rendered = 0;
    renderMore();
    count.textContent = shown.length + ' of ' + events.length + ' events';
  }
  function reveal(seq) {
    var i = bySeq[seq];
    var at = shown.indexOf(i);
    if (at < 0) {
      q.value = '';
      execSel.value = '';
      unmentioned.checked = false;
      Object.keys(enabled).forEach(function (g) { enabled[g] = true; });
      Array.prototype.forEach.call(kinds.querySelectorAll('input'), function (b) { b.checked = true; });
      refilter();
      at = shown.indexOf(i);
    }
    while (rendered <= at) renderMore();
    var target = document.getElementById('ev-' + seq);
    var old = list.querySelector('.target');
    if (old) old.classList.remove('target');
    target.classList.add('target');
    target.scrollIntoView({block: 'center'});
  }

  var groups = [];
  events.forEach(function (e) {
    var g = group(e.kind);
    if (groups.indexOf(g) < 0) groups.push(g);
  });
  groups.forEach(function (g) {
    enabled[g] = true;
    var label = el('label');
    var box = el('input');
    box.type = 'checkbox';
    box.checked = true;
    box.value = g;
    box.addEventListener('change', function () {
      enabled[g] = box.checked;
      refilter();
    });
    label.appendChild(box);
    label.appendChild(document.createTextNode(' ' + g));
    kinds.appendChild(label);
  });
  events.forEach(function (e) {
    if (e.kind !== 'exec') return;
    var o = el('option', null, '#' + e.exec_id + ' ' + e.summary.slice(0, 80));
    o.value = String(e.exec_id);
    execSel.appendChild(o);
  });
  var timer = null;
  q.addEventListener('input', function () {
    clearTimeout(timer);
    timer = setTimeout(refilter, 100);
  });
  execSel.addEventListener('change', refilter);
  unmentioned.addEventListener('change', refilter);
  new IntersectionObserver(function (entries) {
    if (entries[0].isIntersecting && rendered < shown.length) renderMore();
  }, {rootMargin: '800px'}).observe(more);
  refilter();
  document.body.setAttribute('data-ready', '1');
})();
)js";

// "sha256-BASE64" of text, for a Content-Security-Policy.
std::string CspHash(std::string_view text) {
  Sha256 sha;
  sha.Update(absl::string_view(text.data(), text.size()));
  return absl::StrCat("'sha256-", absl::Base64Escape(sha.FinishRaw()), "'");
}

std::string HtmlEscape(absl::string_view text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}, {"'", "&#39;"}});
}

}  // namespace

std::string TerminalSafe(std::string_view bytes) {
  std::string valid = EscapeInvalidUtf8(bytes);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(valid[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c == 0xc2 && i + 1 < valid.size() &&
               static_cast<unsigned char>(valid[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(valid[i + 1]) <= 0x9f) {
      // A C1 control (U+0080..U+009F): some terminals take U+009B as an escape sequence.
      absl::StrAppendFormat(&out, "\\u{%02x}", static_cast<unsigned char>(valid[++i]));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string RenderTimelineText(const std::vector<v1::TimelineEvent>& events, size_t output_lines) {
  std::string out;
  for (const v1::TimelineEvent& e : events) {
    std::string kind = e.kind() == "exec" ? absl::StrCat("exec #", e.exec_id()) : e.kind();
    if (absl::StartsWith(e.kind(), "activity.") && e.exec_id() != 0) {
      absl::StrAppend(&kind, " #", e.exec_id());
    }
    if (e.unmentioned()) absl::StrAppend(&kind, " !");
    absl::StrAppendFormat(&out, "%s  %-18s %-12s %s\n", IsoTime(e.unix_ms()), kind,
                          TerminalSafe(e.actor()), TerminalSafe(e.summary()));
    std::string detail;
    if (e.kind() == "exec") {
      detail = e.output();
      if (!e.text().empty()) detail = absl::StrCat(detail, detail.empty() ? "" : "\n", e.text());
    } else {
      detail = e.text();
    }
    if (detail.empty()) continue;
    detail = absl::StrReplaceAll(detail, {{"\r\n", "\n"}});  // a terminal's line endings
    if (detail.back() == '\n') detail.pop_back();
    size_t lines = 0, start = 0;
    while (start <= detail.size() && lines < output_lines) {
      size_t end = detail.find('\n', start);
      if (end == std::string::npos) end = detail.size();
      absl::StrAppend(&out, "    | ", TerminalSafe(detail.substr(start, end - start)), "\n");
      ++lines;
      start = end + 1;
    }
    if (start <= detail.size()) absl::StrAppend(&out, "    | ...\n");
  }
  return out;
}

nlohmann::json TimelineToJson(const std::vector<v1::TimelineEvent>& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const v1::TimelineEvent& e : events) {
    nlohmann::json j = {
        {"seq", e.seq()},      {"time", IsoTime(e.unix_ms())}, {"unix_ms", e.unix_ms()},
        {"kind", e.kind()},    {"summary", Utf8(e.summary())}, {"actor", Utf8(e.actor())},
        {"failed", e.failed()}};
    if (e.exec_id() != 0) j["exec_id"] = e.exec_id();
    if (e.kind() == "exec") {
      nlohmann::json argv = nlohmann::json::array();
      for (const std::string& a : e.argv()) argv.push_back(Utf8(a));
      j["argv"] = argv;
      j["user"] = Utf8(e.user());
      j["cwd"] = Utf8(e.cwd());
      j["tty"] = e.tty();
      j["duration_ms"] = e.duration_ms();
      j["exit_code"] = e.exit_code();
      j["output"] = Utf8(e.output());
      j["output_total"] = e.output_total();
      j["output_truncated"] = e.output_total() > e.output().size();
    }
    if (absl::StartsWith(e.kind(), "activity.")) {
      j["pid"] = e.pid();
      if (e.parent_pid() != 0) j["parent_pid"] = e.parent_pid();
      j["process"] = Utf8(e.process());
      if (!e.path().empty()) j["path"] = Utf8(e.path());
      if (!e.path_to().empty()) j["path_to"] = Utf8(e.path_to());
      if (e.argv_size() > 0) {
        nlohmann::json argv = nlohmann::json::array();
        for (const std::string& a : e.argv()) argv.push_back(Utf8(a));
        j["argv"] = argv;
      }
      if (e.kind() == "activity.exit") j["exit_code"] = e.exit_code();
      j["unmentioned"] = e.unmentioned();
    }
    if (!e.tool_id().empty()) j["tool_id"] = Utf8(e.tool_id());
    if (!e.tool().empty()) j["tool"] = Utf8(e.tool());
    if (!e.text().empty()) j["text"] = Utf8(e.text());
    out.push_back(std::move(j));
  }
  return out;
}

std::string RenderTimelineHtml(const std::string& title,
                               const std::vector<v1::TimelineEvent>& events) {
  nlohmann::json data = {{"title", Utf8(title)}, {"events", TimelineToJson(events)}};
  // ASCII only, and no '<', '>' or '&' even inside strings: nothing in the data can end the
  // script element that holds it or be taken for markup.
  std::string json = absl::StrReplaceAll(
      data.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace),
      {{"<", "\\u003c"}, {">", "\\u003e"}, {"&", "\\u0026"}});
  int64_t first = events.empty() ? 0 : events.front().unix_ms();
  int64_t last = events.empty() ? 0 : events.back().unix_ms();
  std::string csp =
      absl::StrCat("default-src 'none'; script-src ", CspHash(kScript), "; style-src ",
                   CspHash(kStyle), "; img-src 'none'; base-uri 'none'; form-action 'none'");
  return absl::StrCat(
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"",
      csp,
      "\">\n<meta name=\"referrer\" content=\"no-referrer\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
      HtmlEscape(absl::StrCat("airlock log ", title)), "</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n<header><h1>", HtmlEscape(absl::StrCat("Session ", title)),
      "</h1><p>", events.size(), " events",
      events.empty()
          ? ""
          : absl::StrCat(", ", HtmlEscape(IsoTime(first)), " to ", HtmlEscape(IsoTime(last))),
      "</p></header>\n<div id=\"controls\"><input id=\"q\" type=\"search\" "
      "placeholder=\"Search commands, output, messages\" aria-label=\"Search\">"
      "<span id=\"kinds\"></span><select id=\"exec\" aria-label=\"Command\">"
      "<option value=\"\">every command</option></select><label><input id=\"unmentioned\" "
      "type=\"checkbox\"> only activity the agent did not mention</label>"
      "<span id=\"count\"></span></div>\n"
      "<main><div id=\"events\"></div><div id=\"more\"></div></main>\n"
      "<script type=\"application/json\" id=\"timeline-data\">",
      json, "</script>\n<script>", kScript, "</script>\n</body>\n</html>\n");
}

}  // namespace airlock
