// airlockd's OpenTelemetry export, received on loopback and decoded with OpenTelemetry's own
// generated protobuf definitions (@opentelemetry/otlp-transformer's root): a trace of
// create -> restore/boot and exec -> exec continuing the caller's traceparent, the metrics, and
// the audit log as logs. Then a collector that answers 500, hangs, or is gone: sessions go on
// as before, and airlockd says what it dropped.
//
// Usage: node tests/otlp/otlp_test.mjs AIRLOCK_BINARY (as root, after scripts/setup.sh; runs its
// own airlockd on a private AIRLOCK_HOME that shares the host's images and kernel).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { privateHome } from '../pages/test_home.mjs';

const require = createRequire(import.meta.url);
const otlp = require('@opentelemetry/otlp-transformer/build/src/generated/root.js').opentelemetry.proto;

const [airlock] = process.argv.slice(2);
assert.ok(airlock, 'give the airlock binary');
const airlockd = path.join(path.dirname(airlock), 'airlockd');
const { home, env } = privateHome('airlock-otlptest-');
const socket = path.join(home, 'airlockd.sock');

// The receiver: decodes each request by its path, keeps them, and answers as `mode` says.
const received = { traces: [], metrics: [], logs: [] };
let mode = 'ok';  // 'ok' | '500' | 'hang'
const hanging = [];
const decoders = {
  '/v1/traces': ['traces', otlp.collector.trace.v1.ExportTraceServiceRequest],
  '/v1/metrics': ['metrics', otlp.collector.metrics.v1.ExportMetricsServiceRequest],
  '/v1/logs': ['logs', otlp.collector.logs.v1.ExportLogsServiceRequest],
};
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (mode === 'hang') { hanging.push(res); return; }
    if (mode === '500') { res.writeHead(500).end(); return; }
    const decoder = decoders[req.url];
    assert.ok(decoder, `airlockd posted to ${req.url}`);
    assert.equal(req.headers['content-type'], 'application/x-protobuf');
    assert.equal(req.headers['x-test-key'], 'k1');
    const message = decoder[1].decode(Buffer.concat(chunks));
    received[decoder[0]].push(decoder[1].toObject(message, { longs: Number, bytes: String }));
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const endpoint = `http://127.0.0.1:${receiver.address().port}`;

let daemonLog = '';
const daemon = spawn(airlockd, ['--socket', socket, '--otlp-endpoint', endpoint, '--otlp-header',
  'x-test-key=k1', '--otlp-interval', '1s'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
daemon.stderr.on('data', (d) => { daemonLog += d; });

after(async () => {
  daemon.kill('SIGTERM');
  await new Promise((r) => (daemon.exitCode !== null ? r() : daemon.on('exit', r)));
  for (const res of hanging) res.destroy();
  receiver.close();
  fs.rmSync(home, { recursive: true, force: true });
});

const cli = (args, extraEnv = {}) => {
  const r = spawnSync(airlock, args, { env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 120000 });
  assert.equal(r.status, 0, `airlock ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};
async function until(what, check, ms = 60000) {
  const end = Date.now() + ms;
  for (;;) {
    const got = check();
    if (got) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
const hex = (b64) => Buffer.from(b64, 'base64').toString('hex');
const attrs = (list) => Object.fromEntries((list ?? []).map((a) => [a.key, Object.values(a.value)[0]]));
const allSpans = () => received.traces.flatMap((r) => r.resourceSpans.flatMap((rs) =>
  rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ ...s, resource: attrs(rs.resource?.attributes) })))));
const allMetrics = () => received.metrics.flatMap((r) => r.resourceMetrics.flatMap((rm) =>
  rm.scopeMetrics.flatMap((sm) => sm.metrics.map((m) => ({ ...m, resource: attrs(rm.resource?.attributes) })))));
const allLogs = () => received.logs.flatMap((r) => r.resourceLogs.flatMap((rl) =>
  rl.scopeLogs.flatMap((sl) => sl.logRecords)));

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const callerSpan = '00f067aa0ba902b7';
const traceparent = `00-${traceId}-${callerSpan}-01`;
let id;

test('a trace of create and exec continues the caller\'s traceparent', async () => {
  await until('airlockd', () => fs.existsSync(socket));
  id = cli(['session', 'create'], { TRACEPARENT: traceparent }).trim();
  // The command itself gets the trace, as its exec span's child: W3C's TRACEPARENT.
  const inGuest = cli(['exec', id, '--', 'sh', '-c', 'echo "$TRACEPARENT"'], { TRACEPARENT: traceparent }).trim();
  assert.match(inGuest, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  const ours = () => allSpans().filter((s) => hex(s.traceId) === traceId);
  const spans = await until('the spans of create and exec', () => {
    const s = ours();
    return s.some((x) => x.name === 'exec') && s.some((x) => x.name === 'airlock.v1.Sessions/Exec') ? s : null;
  });
  const byName = (n) => spans.filter((s) => s.name === n);
  const create = byName('airlock.v1.Sessions/Create');
  assert.equal(create.length, 1, spans.map((s) => s.name).join(', '));
  assert.equal(hex(create[0].parentSpanId), callerSpan);
  assert.equal(create[0].kind, 2);  // SERVER
  assert.equal(attrs(create[0].attributes)['rpc.service'], 'airlock.v1.Sessions');
  assert.equal(create[0].resource['service.name'], 'airlockd');
  assert.ok(create[0].resource['host.name']);
  // The VM came from the image's template (restore) or a cold boot: either way a child of create.
  const start = spans.find((s) => s.name === 'restore' || s.name === 'boot');
  assert.ok(start, spans.map((s) => s.name).join(', '));
  assert.equal(hex(start.parentSpanId), hex(create[0].spanId));
  assert.equal(attrs(start.attributes)['airlock.session.id'], id);
  const exec = byName('exec')[0];
  assert.equal(inGuest.split('-')[2], hex(exec.spanId));
  const execCall = byName('airlock.v1.Sessions/Exec')[0];
  assert.equal(hex(exec.parentSpanId), hex(execCall.spanId));
  assert.equal(hex(execCall.parentSpanId), callerSpan);
  assert.ok(Number(exec.endTimeUnixNano) >= Number(exec.startTimeUnixNano));
  // A call without a traceparent starts a trace of its own.
  cli(['ls']);
  const ls = await until('the span of ls', () => allSpans().find((s) => s.name === 'airlock.v1.Sessions/List'));
  assert.notEqual(hex(ls.traceId), traceId);
  assert.equal(ls.parentSpanId ?? '', '');
});

test('metrics: sessions by state, the VM, commands and their durations', async () => {
  const metric = (name, pred = () => true) => allMetrics().filter((m) => m.name === name).flatMap((m) =>
    (m.gauge ?? m.sum ?? m.histogram).dataPoints.filter((p) => pred(attrs(p.attributes), p)));
  await until('metrics of the running session', () =>
    metric('airlock.sessions', (a, p) => a.state === 'running' && p.asDouble >= 1).length &&
    metric('airlock.vm.memory.usage', (a, p) => a['airlock.session.id'] === id && p.asDouble > 0).length &&
    metric('airlock.vm.cpu.utilization', (a) => a['airlock.session.id'] === id).length &&
    metric('airlock.exec.count', (a, p) => Number(p.asInt) >= 1).length &&
    metric('airlock.exec.duration', (a, p) => Number(p.count) >= 1).length);
  const sum = allMetrics().find((m) => m.name === 'airlock.exec.count').sum;
  assert.equal(sum.isMonotonic, true);
  assert.equal(sum.aggregationTemporality, 2);  // CUMULATIVE
  const h = metric('airlock.exec.duration').at(-1);
  assert.equal(h.bucketCounts.length, h.explicitBounds.length + 1);
  assert.ok(metric('airlock.vm.restores').length + metric('airlock.vm.boots').length >= 2);
  assert.equal(allMetrics()[0].resource['service.name'], 'airlockd');
});

test('the audit log arrives as logs', async () => {
  const record = await until('the audit record of the create', () => allLogs().find((l) => {
    const a = attrs(l.attributes);
    return a['airlock.audit.action'] === 'session.create' && a['airlock.audit.target'] === id;
  }));
  const a = attrs(record.attributes);
  assert.equal(a['airlock.audit.principal'], 'uid:0/gid:0');
  assert.match(a['airlock.audit.hash'], /^[0-9a-f]{64}$/);
  assert.ok(Number(a['airlock.audit.seq']) > 0);
  assert.match(Object.values(record.body)[0], /session\.create/);
});

test('a collector that fails, hangs or is gone never holds a session up', async () => {
  for (const m of ['500', 'hang']) {
    mode = m;
    const before = received.metrics.length;
    assert.equal(cli(['exec', id, '--', 'echo', m]), `${m}\n`);
    cli(['pause', id]);
    cli(['resume', id]);
    assert.equal(cli(['exec', id, '--', 'true']), '');
    assert.equal(received.metrics.length, before);
  }
  mode = '500';
  await until('airlockd to say what it dropped', () => /telemetry: \d+ request\(s\) to .* dropped so far/.test(daemonLog), 90000);
  console.log('# ' + daemonLog.split('\n').filter((l) => l.includes('telemetry')).join('\n# '));
  for (const res of hanging.splice(0)) res.destroy();
  await new Promise((r) => receiver.close(r));  // gone
  assert.equal(cli(['exec', id, '--', 'echo', 'still here']), 'still here\n');
  cli(['rm', id]);
});
