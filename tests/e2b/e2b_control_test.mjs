// E2B's own SDK (npm `e2b`, pinned in package.json) against airlockd's E2B-compatible control API
// on its HTTP gateway, as a user of that SDK would switch to Airlock: an API key from `airlock
// api-key create` and E2B_API_URL pointed at the gateway. Sandboxes are created with metadata and
// a timeout, described, listed and filtered, given more time, paused, resumed by connect and
// killed; their metrics are kept as a history; a wrong key, an unknown template and a wish for
// the whole internet are refused with the SDK's own errors.
//
// Usage: node tests/e2b/e2b_control_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh;
// runs its own airlockd on a private AIRLOCK_HOME that shares the host's images and kernel)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { AuthenticationError, Sandbox } from 'e2b';
import { startDaemon } from './e2b_daemon.mjs';

const [airlock] = process.argv.slice(2);
const { env, cli, key, opts, gateway } = await startDaemon(airlock, 'airlock-e2btest-');

test('an API key is shown once and listed by name', () => {
  assert.match(key, /^e2b_[0-9a-f]{40}$/);
  assert.match(cli('api-key', 'ls'), /\nci +\d{4}-/);
  const again = spawnSync(airlock, ['api-key', 'create', '--name', 'ci'], { env, encoding: 'utf8' });
  assert.equal(again.status, 1);
  assert.match(again.stderr, /named ci already/);
});

test('sandboxes are sessions: create, describe, list, time, pause, connect, kill', async () => {
  const s = await Sandbox.create({ ...opts, metadata: { user: 'ada' }, timeoutMs: 120_000 });
  assert.match(s.sandboxId, /^[0-9a-f]{12}$/);
  assert.match(cli('ls'), new RegExp(`^${s.sandboxId} `, 'm'));
  const other = await Sandbox.create({ ...opts, metadata: { user: 'bob' } });

  let info = await s.getInfo();
  assert.equal(info.state, 'running');
  // What it uses now.
  const [now] = await s.getMetrics();
  assert.ok(now.cpuCount >= 1 && now.memTotal > now.memUsed && now.diskTotal > 0,
    JSON.stringify(now));
  assert.ok(now.timestamp instanceof Date, JSON.stringify(now));
  assert.equal(info.templateId, 'base');
  assert.deepEqual(info.metadata, { user: 'ada' });
  const lifetime = info.endAt.getTime() - info.startedAt.getTime();
  assert.ok(lifetime >= 119_000 && lifetime <= 121_000, String(lifetime));

  // Filtered by metadata, and page by page.
  const ada = await Sandbox.list({ ...opts, query: { metadata: { user: 'ada' } } }).nextItems();
  assert.deepEqual(ada.map((x) => x.sandboxId), [s.sandboxId]);
  const pages = Sandbox.list({ ...opts, limit: 1 });
  const seen = [];
  while (pages.hasNext) seen.push(...(await pages.nextItems()).map((x) => x.sandboxId));
  assert.deepEqual(seen.sort(), [s.sandboxId, other.sandboxId].sort());

  // More time, counted from now.
  await s.setTimeout(600_000);
  info = await s.getInfo();
  assert.ok(info.endAt.getTime() - Date.now() > 590_000, String(info.endAt));

  // Paused (once: a second pause says it already is), resumed by connect.
  assert.equal(await s.pause(), true);
  assert.equal((await s.getInfo()).state, 'paused');
  assert.equal(await s.pause(), false);
  const back = await Sandbox.connect(s.sandboxId, opts);
  assert.equal(back.sandboxId, s.sandboxId);
  assert.equal((await s.getInfo()).state, 'running');

  // Killed: gone from the list, and a second kill says so.
  assert.equal(await s.kill(), true);
  assert.equal(await Sandbox.kill(s.sandboxId, opts), false);
  const left = await Sandbox.list(opts).nextItems();
  assert.deepEqual(left.map((x) => x.sandboxId), [other.sandboxId]);
  await other.kill();

  // The audit names the key.
  assert.match(cli('log', s.sandboxId), /key:ci/);
});

test('a sandbox asked to pause at its timeout is paused, not killed, and connect resumes it', async () => {
  const o = { ...opts, sandboxUrl: gateway };  // its commands too
  const s = await Sandbox.create({ ...o, timeoutMs: 6_000, lifecycle: { onTimeout: 'pause' } });
  assert.equal((await s.getInfo()).lifecycle?.onTimeout, 'pause');
  await s.commands.run('setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! > /root/sleeper');
  let state = 'running';
  for (let i = 0; state === 'running'; i++) {
    assert.ok(i < 120, 'still running a minute after its timeout');
    await new Promise((r) => setTimeout(r, 500));
    state = (await s.getInfo()).state;
  }
  assert.equal(state, 'paused');
  const back = await Sandbox.connect(s.sandboxId, o);
  assert.equal((await back.commands.run('kill -0 $(cat /root/sleeper) && echo alive')).stdout,
    'alive\n');
  // Given E2B's default time again (300 s), not paused at once.
  const info = await back.getInfo();
  assert.equal(info.state, 'running');
  assert.ok(info.endAt.getTime() - Date.now() > 200_000, String(info.endAt));
  await back.kill();
  // What Airlock does not do is refused with the reason, never ignored.
  await assert.rejects(
    Sandbox.create({ ...opts, lifecycle: { onTimeout: 'pause', autoResume: true } }),
    /Sandbox.connect\(\)/);
  await assert.rejects(
    Sandbox.create({ ...opts, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } }),
    /keepMemory/);
});

test("metrics are a history of the sandbox's use, asked for by time", async () => {
  const s = await Sandbox.create(opts);
  const started = new Date();
  // A sample every 5 s, the first counting from the one before. Asked for a range that
  // ended a moment ago, only the history answers (a sandbox with none yet gets a sample of
  // now only when the range includes now).
  let all = [];
  for (let i = 0; all.length === 0; i++) {
    assert.ok(i < 120, 'no history of metrics after a minute');
    await new Promise((r) => setTimeout(r, 500));
    all = await s.getMetrics({ end: new Date(Date.now() - 1000) });
  }
  for (const m of all) {
    assert.ok(m.timestamp >= new Date(started.getTime() - 5000), JSON.stringify(m));
    assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100 && m.memTotal > 0, JSON.stringify(m));
  }
  const later = await s.getMetrics({ start: new Date(Date.now() + 3_600_000) });
  assert.deepEqual(later, []);
  await s.kill();
});

test('a wrong key, a removed one and an unknown template are refused', async () => {
  await assert.rejects(Sandbox.create({ ...opts, apiKey: 'e2b_' + '0'.repeat(40) }),
    AuthenticationError);
  await assert.rejects(Sandbox.create('no-such-template:1', opts), /no-such-template/);
  // The whole internet is not Airlock's to give; the error says what to do instead.
  await assert.rejects(Sandbox.create({ ...opts, allowInternetAccess: true }),
    /network\.allowOut/);
  const spare = cli('api-key', 'create', '--name', 'spare').trim();
  cli('api-key', 'rm', 'spare');
  await assert.rejects(Sandbox.list({ ...opts, apiKey: spare }).nextItems(), AuthenticationError);
});

test("an operator's template map gives E2B's names to images", async () => {
  const mapped = await startDaemon(airlock, 'airlock-e2btpl-', {
    templates: '# E2B names\ncode-interpreter-v1 airlock/bookworm-python\n',
  });
  const s = await Sandbox.create('code-interpreter-v1', mapped.opts);
  mapped.beforeStop.push(() => s.kill());
  assert.equal((await s.getInfo()).templateId, 'code-interpreter-v1');
  assert.match(mapped.cli('ls'), new RegExp(`^${s.sandboxId} .*airlock/bookworm-python`, 'm'));
});
