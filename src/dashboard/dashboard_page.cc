#include "src/dashboard/dashboard_page.h"

namespace airlock {

const char kDashboardHtml[] = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Airlock</title>
<link rel="stylesheet" href="/style.css">
<script src="/app.js" defer></script>
</head>
<body>
<header>
  <h1>Airlock</h1>
  <span id="status">connecting…</span>
</header>
<main>
  <section>
    <h2>Sessions by state</h2>
    <div id="states" class="counts"></div>
  </section>
  <section>
    <h2>By tenant</h2>
    <table id="tenants"><thead><tr><th>Tenant</th><th>Creating</th><th>Running</th>
      <th>Paused</th><th>Stopped</th><th>Failed</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Sessions</h2>
    <table id="sessions"><thead><tr><th>Session</th><th>Tenant</th><th>Image</th>
      <th>State</th><th>Host CPU (4 min)</th><th>Host memory (4 min)</th><th>Last used</th>
      </tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Recent commands</h2>
    <ol id="execs" class="events"></ol>
  </section>
  <section>
    <h2>Denials and failures</h2>
    <ol id="problems" class="events"></ol>
  </section>
</main>
<footer>Read-only: nothing on this page changes anything. The last four minutes, kept in
memory only.</footer>
</body>
</html>
)html";

const char kDashboardScript[] = R"js('use strict';
// Everything shown comes from /api/state and goes into the page as text (textContent), never
// as HTML.
const STATES = ['creating', 'running', 'paused', 'stopped', 'failed'];
const SVG = 'http://www.w3.org/2000/svg';

function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

function ago(ms, now) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' d ago';
}

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

// A sparkline of samples [[ms, cpu, rss]] over the window, of column `column`; the last value
// beside it while the VM runs (a paused or stopped session's line is its past).
function spark(samples, column, now, windowMs, max, label, running) {
  const w = 160, h = 28;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', w);
  svg.setAttribute('height', h);
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('role', 'img');
  const last = samples.length && running ? samples[samples.length - 1][column] : null;
  svg.setAttribute('aria-label', last === null ? 'no samples' : label(last));
  if (samples.length) {
    const top = Math.max(max(samples.map((s) => s[column])), 1e-9);
    const points = samples.map((s) => {
      const x = w - ((now - s[0]) / windowMs) * w;
      const y = h - 2 - (s[column] / top) * (h - 4);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', points.join(' '));
    svg.appendChild(line);
  }
  const cell = el('td');
  cell.appendChild(svg);
  cell.appendChild(el('span', last === null ? '–' : label(last), 'value'));
  return cell;
}

function render(state) {
  const now = state.now_ms;
  const status = document.getElementById('status');
  status.textContent = state.daemon_error
    ? 'airlockd: ' + state.daemon_error
    : 'updated ' + ago(state.updated_ms, now);
  status.className = state.daemon_error ? 'bad' : '';

  const states = document.getElementById('states');
  states.replaceChildren(...STATES.map((s) => {
    const box = el('div', undefined, 'count ' + s);
    box.appendChild(el('strong', state.by_state[s] || 0));
    box.appendChild(el('span', s));
    return box;
  }));

  const tenants = document.querySelector('#tenants tbody');
  tenants.replaceChildren(...Object.keys(state.by_tenant).sort().map((t) => {
    const row = el('tr');
    row.appendChild(el('td', t));
    for (const s of STATES) row.appendChild(el('td', state.by_tenant[t][s] || 0));
    return row;
  }));

  const sessions = document.querySelector('#sessions tbody');
  sessions.replaceChildren(...state.sessions.map((s) => {
    const row = el('tr');
    row.dataset.session = s.id;
    row.appendChild(el('td', s.id, 'mono'));
    row.appendChild(el('td', s.tenant));
    row.appendChild(el('td', s.image));
    const st = el('td', s.state + (s.reason ? ' (' + s.reason + ')' : ''), 'state ' + s.state);
    row.appendChild(st);
    const running = s.state === 'running';
    row.appendChild(spark(s.samples, 1, now, state.window_ms, (v) => Math.max(100, ...v),
                          (v) => v.toFixed(0) + '%', running));
    row.appendChild(spark(s.samples, 2, now, state.window_ms, (v) => Math.max(...v),
                          (v) => bytes(v), running));
    row.appendChild(el('td', ago(s.last_used_ms, now)));
    return row;
  }));

  const line = (e) => {
    const li = el('li', undefined, e.failed ? 'failed' : '');
    li.appendChild(el('time', new Date(e.ms).toISOString().substring(11, 19)));
    li.appendChild(el('span', e.session_id, 'mono'));
    li.appendChild(el('span', e.tenant, 'tenant'));
    li.appendChild(el('span', e.kind, 'kind'));
    li.appendChild(el('span', e.text, 'text'));
    return li;
  };
  const newest = state.events.slice().reverse();
  document.getElementById('execs').replaceChildren(
    ...newest.filter((e) => e.kind === 'exec' || e.kind === 'exit').slice(0, 50).map(line));
  document.getElementById('problems').replaceChildren(
    ...newest.filter((e) => e.failed).slice(0, 50).map(line));
}

async function refresh() {
  try {
    const reply = await fetch('/api/state', { credentials: 'same-origin', cache: 'no-store' });
    if (reply.status === 401) { window.location.assign('/login'); return; }
    if (!reply.ok) throw new Error('the dashboard answered ' + reply.status);
    render(await reply.json());
  } catch (e) {
    const status = document.getElementById('status');
    status.textContent = 'cannot reach the dashboard: ' + e.message;
    status.className = 'bad';
  }
}

refresh();
setInterval(refresh, 2000);
)js";

const char kDashboardStyle[] = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2733; background: #f6f7f9; }
header { display: flex; align-items: baseline; gap: 1em; padding: 0.6em 1.2em;
         background: #1d2733; color: #fff; }
header h1 { font-size: 1.2em; margin: 0; }
#status.bad { color: #ffb4a8; }
main { padding: 0.6em 1.2em; }
h2 { font-size: 1em; margin: 1.2em 0 0.4em; }
.counts { display: flex; gap: 0.8em; }
.count { background: #fff; border: 1px solid #d5dae1; border-radius: 4px; padding: 0.4em 0.9em;
         min-width: 5em; }
.count strong { display: block; font-size: 1.6em; }
.count.failed strong { color: #b3261e; }
table { border-collapse: collapse; background: #fff; }
th, td { text-align: left; padding: 0.25em 0.7em; border-bottom: 1px solid #e3e6ea; }
td.state.running { color: #146c2e; }
td.state.paused { color: #8a5a00; }
td.state.failed { color: #b3261e; }
.mono { font-family: ui-monospace, monospace; }
svg polyline { fill: none; stroke: #2b6cb0; stroke-width: 1.5; }
svg { vertical-align: middle; background: #f0f3f7; }
.value { margin-left: 0.5em; }
.events { list-style: none; padding: 0; margin: 0; background: #fff; max-height: 22em;
          overflow-y: auto; border: 1px solid #e3e6ea; }
.events li { display: flex; gap: 0.8em; padding: 0.15em 0.6em; border-bottom: 1px solid #f0f1f3;
             white-space: pre-wrap; word-break: break-all; }
.events li.failed .kind { color: #b3261e; }
.events .tenant { color: #5b6675; }
footer { padding: 1em 1.2em; color: #5b6675; }
form { background: #fff; padding: 1.2em; max-width: 24em; margin: 3em auto; border: 1px solid #d5dae1; }
form input { width: 100%; box-sizing: border-box; margin: 0.5em 0; padding: 0.4em; }
.refused { color: #b3261e; }
)css";

const char kDashboardLoginHtml[] = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Airlock: sign in</title>
<link rel="stylesheet" href="/style.css">
</head>
<body>
<form method="post" action="/login">
  <h1>Airlock</h1>
  <p class="refused">%MESSAGE%</p>
  <label for="token">Access token</label>
  <input id="token" name="token" type="password" autocomplete="current-password" autofocus>
  <button type="submit">Sign in</button>
</form>
</body>
</html>
)html";

}  // namespace airlock
