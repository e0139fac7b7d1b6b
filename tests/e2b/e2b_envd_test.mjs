// E2B's own SDK (npm `e2b`, pinned) against the envd API airlockd's gateway serves for each
// sandbox, reached as E2B_SANDBOX_URL (the routing headers) and by Host (49983-ID.DOMAIN):
// commands with their output, exit codes, environment and directory; background commands fed
// on stdin, listed, reconnected to and killed; a terminal; files written and read. The envd
// token is needed, the health check is not, and what is not served says what to use.
//
// Usage: node tests/e2b/e2b_envd_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { CommandExitError, NotFoundError, RateLimitError, Sandbox } from 'e2b';
import { startDaemon } from './e2b_daemon.mjs';

const [airlock] = process.argv.slice(2);
const { gateway, cli, opts: control, beforeStop } = await startDaemon(airlock, 'airlock-e2benvd-');
const opts = { ...control, sandboxUrl: gateway };

const sandbox = await Sandbox.create({ ...opts, envs: { GREETING: 'hello' } });
beforeStop.push(() => sandbox.kill());

// Resolves once the text shows up in what the callback collects.
function waitFor(collected, text) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = () => {
      if (collected().includes(text)) return resolve();
      if (Date.now() - started > 60_000) return reject(new Error(`no ${text} in ${collected()}`));
      setTimeout(poll, 50);
    };
    poll();
  });
}

test('a command gives its output, exit code, environment and directory', async () => {
  const r = await sandbox.commands.run('echo out; echo err >&2; echo $GREETING $WHO; pwd', {
    envs: { WHO: 'ada' },
  });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'out\nhello ada\n/root\n');
  assert.equal(r.stderr, 'err\n');
  const there = await sandbox.commands.run('pwd', { cwd: '/tmp' });
  assert.equal(there.stdout, '/tmp\n');
  await assert.rejects(sandbox.commands.run('echo no >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, String(e));
    assert.equal(e.exitCode, 3);
    assert.equal(e.stderr, 'no\n');
    return true;
  });
  // Every command is the session's, in its log.
  assert.match(cli('logs', sandbox.sandboxId), /echo out; echo err/);
});

test('a background command takes stdin, is listed, reconnected to and killed', async () => {
  let out = '';
  const cat = await sandbox.commands.run('cat', {
    background: true,
    stdin: true,
    onStdout: (d) => (out += d),
  });
  await sandbox.commands.sendStdin(cat.pid, 'ping\n');
  await waitFor(() => out, 'ping\n');
  const listed = await sandbox.commands.list();
  assert.ok(listed.some((p) => p.pid === cat.pid && p.cmd === '/bin/bash'), JSON.stringify(listed));
  await sandbox.commands.closeStdin(cat.pid);
  assert.equal((await cat.wait()).exitCode, 0);

  // A client that went away comes back to a command by its pid.
  const counter = await sandbox.commands.run('for i in 1 2 3; do echo n$i; sleep 0.5; done', {
    background: true,
  });
  await counter.disconnect();
  const again = await sandbox.commands.connect(counter.pid);
  const done = await again.wait();
  assert.match(done.stdout, /n3\n$/);

  const sleeper = await sandbox.commands.run('sleep 600', { background: true });
  // A sandbox is not paused while a command runs, and pause() says so rather than false.
  await assert.rejects(sandbox.pause(), /is in use/);
  assert.equal(await sandbox.commands.kill(sleeper.pid), true);
  await assert.rejects(sleeper.wait(), (e) => e instanceof CommandExitError);
  assert.equal(await sandbox.commands.kill(999999), false);
});

test('a terminal runs a shell that is typed into and resized', async () => {
  let screen = '';
  const decoder = new TextDecoder();
  const term = await sandbox.pty.create({
    cols: 80,
    rows: 24,
    onData: (d) => (screen += decoder.decode(d)),
  });
  await sandbox.pty.resize(term.pid, { cols: 100, rows: 30 });
  await sandbox.pty.sendInput(term.pid, new TextEncoder().encode('stty size; echo $((6*7))\n'));
  await waitFor(() => screen, '30 100');
  await waitFor(() => screen, '42');
  await sandbox.pty.sendInput(term.pid, new TextEncoder().encode('exit\n'));
  await term.wait();
});

test('files are written and read, relative ones under the home', async () => {
  await sandbox.files.write('/tmp/e2b/a.txt', 'hello file');
  assert.equal(await sandbox.files.read('/tmp/e2b/a.txt'), 'hello file');
  const bytes = new Uint8Array([0, 1, 2, 250, 255]);
  await sandbox.files.write('bin.dat', bytes.buffer);
  assert.deepEqual(await sandbox.files.read('/root/bin.dat', { format: 'bytes' }), bytes);
  const many = await sandbox.files.write([
    { path: '/tmp/e2b/one', data: '1' },
    { path: '/tmp/e2b/two', data: '2' },
  ]);
  assert.deepEqual(many.map((f) => f.path), ['/tmp/e2b/one', '/tmp/e2b/two']);
  assert.equal((await sandbox.commands.run('cat /tmp/e2b/one /tmp/e2b/two')).stdout, '12');
  await assert.rejects(sandbox.files.read('/no/such/file'), NotFoundError);
  // A stream that cannot start ends with the error, as Connect has it, for the SDK to read.
  await assert.rejects(sandbox.commands.connect(424242), NotFoundError);
});

// A raw request to the gateway: [status, body].
function request(method, path, headers, body = '') {
  const url = new URL(gateway);
  return new Promise((resolve, reject) => {
    const r = http.request(
      { host: url.hostname, port: url.port, method, path, headers },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve([res.statusCode, text]));
      },
    );
    r.on('error', reject);
    r.end(body);
  });
}

// One Connect envelope (flags 0 or 2, a 4-byte big-endian length, the JSON).
function envelope(message, flags = 0) {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

test('StreamInput: a client stream whose input reaches the command message by message', async () => {
  let out = '';
  const cat = await sandbox.commands.run('cat', { background: true, stdin: true, onStdout: (d) => (out += d) });
  const token = sandbox.envdAccessToken ?? (await sandbox.getInfo()).envdAccessToken;
  const url = new URL(gateway);
  const r = http.request({
    host: url.hostname, port: url.port, method: 'POST', path: '/process.Process/StreamInput',
    headers: { 'E2b-Sandbox-Id': sandbox.sandboxId, 'E2b-Sandbox-Port': '49983',
      'X-Access-Token': token, 'Content-Type': 'application/connect+json' },
  });
  const answer = new Promise((resolve, reject) => {
    r.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve([res.statusCode, Buffer.concat(chunks)]));
    });
    r.on('error', reject);
  });
  r.write(envelope({ start: { process: { pid: cat.pid } } }));
  r.write(envelope({ data: { input: { stdin: Buffer.from('one\n').toString('base64') } } }));
  // The first message arrives while the stream is still open (chunked, not yet ended).
  await waitFor(() => out, 'one\n');
  r.write(envelope({ keepalive: {} }));
  r.write(envelope({ data: { input: { stdin: Buffer.from('two\n').toString('base64') } } }));
  r.end();
  const [status, body] = await answer;
  assert.equal(status, 200);
  // One message ({}), then the end of the stream with no error.
  assert.equal(body[0], 0);
  const first = body.readUInt32BE(1);
  assert.deepEqual(JSON.parse(body.subarray(5, 5 + first).toString()), {});
  assert.equal(body[5 + first], 2);
  assert.deepEqual(JSON.parse(body.subarray(10 + first).toString()), {});
  await waitFor(() => out, 'one\ntwo\n');
  await sandbox.commands.closeStdin(cat.pid);
  assert.equal((await cat.wait()).exitCode, 0);

  // Input before start, or to no such process, ends the stream with the error.
  const [, refused] = await request('POST', '/process.Process/StreamInput', {
    'E2b-Sandbox-Id': sandbox.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': token,
    'Content-Type': 'application/connect+json',
  }, envelope({ data: { input: { stdin: 'eA==' } } }));
  assert.match(refused, /begins with start/);
});

test('envd needs the sandbox token; health does not; unknown sandboxes are 502', async () => {
  const routed = { 'E2b-Sandbox-Id': sandbox.sandboxId, 'E2b-Sandbox-Port': '49983' };
  const list = (headers) =>
    request('POST', '/process.Process/List', { 'Content-Type': 'application/json', ...headers }, '{}');
  let [status, body] = await list(routed);
  assert.equal(status, 401, body);
  assert.match(body, /unauthenticated/);
  [status, body] = await list({ ...routed, 'X-Access-Token': 'wrong' });
  assert.equal(status, 401, body);
  [status] = await request('GET', '/health', routed);
  assert.equal(status, 204);
  [status, body] = await request('GET', '/health', { ...routed, 'E2b-Sandbox-Id': 'abcdefabcdef' });
  assert.equal(status, 502);
  assert.match(body, /abcdefabcdef/);
  // By Host, as E2B's SDKs do when given a domain rather than a sandbox URL.
  [status, body] = await list({
    Host: `49983-${sandbox.sandboxId}.airlock.localhost`,
    'X-Access-Token': sandbox.envdAccessToken ?? (await sandbox.getInfo()).envdAccessToken,
  });
  assert.equal(status, 200, body);
  assert.match(body, /processes/);

  // A signed download URL opens the file without the token, until it expires; a changed one
  // opens nothing.
  await sandbox.files.write('/tmp/e2b/signed.txt', 'signed');
  const signed = new URL(await sandbox.downloadUrl('/tmp/e2b/signed.txt', {
    useSignatureExpiration: 60_000,
  }));
  const byHost = { Host: `49983-${sandbox.sandboxId}.airlock.localhost` };
  [status, body] = await request('GET', signed.pathname + signed.search, byHost);
  assert.equal(status, 200, body);
  assert.equal(body, 'signed');
  signed.searchParams.set('path', '/etc/shadow');
  [status] = await request('GET', signed.pathname + signed.search, byHost);
  assert.equal(status, 401);
});

test("a sandbox's ports are reached at getHost(port), with its traffic token if not public", async () => {
  // Tries a GET at the host until the server in the sandbox answers (it takes a moment to start).
  // (Until it listens, a connection is refused, 502, or cut if the server is half up.)
  async function get(host, headers = {}) {
    for (let i = 0; ; i++) {
      const answer = await request('GET', '/', { Host: host, ...headers }).catch((e) => {
        if (i === 100) throw e;
        return [502, String(e)];
      });
      if (answer[0] !== 502 || i === 100) return answer;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await sandbox.commands.run('mkdir -p /srv && echo served > /srv/index.html');
  await sandbox.commands.run('cd /srv && python3 -m http.server 8000', {
    background: true,
    timeoutMs: 0,
  });
  const host = sandbox.getHost(8000);
  assert.equal(host, `8000-${sandbox.sandboxId}.airlock.localhost`);
  let [status, body] = await get(host);
  assert.equal(status, 200, body);
  assert.equal(body, 'served\n');

  const closed = await Sandbox.create({ ...opts, network: { allowPublicTraffic: false } });
  beforeStop.push(() => closed.kill());
  assert.ok(closed.trafficAccessToken);
  await closed.commands.run('mkdir -p /srv && echo private > /srv/index.html');
  await closed.commands.run('cd /srv && python3 -m http.server 8000', {
    background: true,
    timeoutMs: 0,
  });
  [status] = await get(closed.getHost(8000));
  assert.equal(status, 401);
  [status, body] = await get(closed.getHost(8000), {
    'e2b-traffic-access-token': closed.trafficAccessToken,
  });
  assert.equal(status, 200, body);
  assert.equal(body, 'private\n');
});

test("envd's requests count against the tenant's connections quota", async () => {
  const tight = await startDaemon(airlock, 'airlock-e2bquota-', { quotas: 'default connections=1\n' });
  const o = { ...tight.opts, sandboxUrl: tight.gateway };
  const s = await Sandbox.create(o);
  tight.beforeStop.push(() => s.kill());
  // A command's stream holds the one place while it runs; nothing else gets in meanwhile.
  const held = await s.commands.run('sleep 2', { background: true });
  await assert.rejects(s.commands.list(), (e) => {
    assert.ok(e instanceof RateLimitError, String(e));
    assert.match(e.message, /connection quota of 1/);
    return true;
  });
  await held.wait();
  assert.deepEqual(await s.commands.list(), []);
});
