// Drives `airlock mcp` end to end with the official MCP TypeScript SDK client, as an agent's
// host would: every tool's schema, one-shot runs, a session's whole life, logs, metrics, files,
// progress, cancellation, and hostile guest output that must never corrupt the protocol.
//
// Usage: node tests/mcp/mcp_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh; it runs
// its own airlockd on a private AIRLOCK_HOME that shares the host's images and kernel)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const airlock = process.argv[2] ?? process.env.AIRLOCK_BINARY;
assert.ok(airlock, 'give the airlock binary');
const hostHome = process.env.AIRLOCK_HOME ?? '/var/lib/airlock';

// A private home (like the C++ VM tests'), so no other daemon answers.
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-mcptest-'));
fs.chmodSync(home, 0o755);
fs.symlinkSync(path.join(hostHome, 'images'), path.join(home, 'images'));
fs.mkdirSync(path.join(home, 'kernel'));
fs.symlinkSync(fs.realpathSync(path.join(hostHome, 'kernel/vmlinux')), path.join(home, 'kernel/vmlinux'));

// A web server on the host's loopback that sessions reach as web.test once allowed.
fs.writeFileSync(path.join(home, 'egress-ceiling'), 'allow *:*\nallow 127.0.0.1/32:*\n');
fs.writeFileSync(path.join(home, 'egress-hosts'), '127.0.0.1 web.test\n');
const seenAuth = [];
const web = http.createServer((req, res) => {
  if (req.headers.authorization) seenAuth.push(req.headers.authorization);
  res.end('hello from web.test');
});
await new Promise((r) => web.listen(0, '127.0.0.1', r));
const webPort = web.address().port;

// What the user lets the model use (airlock mcp's flags): this web server, two secrets bound to
// it, and projects under one directory.
const projects = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-mcp-projects-'));
const stderrLines = [];
// The SDK passes only a few variables by default: give the server what it needs explicitly.
const serverEnv = { PATH: process.env.PATH, HOME: process.env.HOME ?? '/root', AIRLOCK_HOME: home,
                    AIRLOCK_SOCKET: path.join(home, 'airlockd.sock'),
                    AIRLOCK_HTTP_LISTEN: '127.0.0.1:0',  // the gateway on a free port of its own
                    AIRLOCK_EGRESS_CEILING: path.join(home, 'egress-ceiling'),
                    AIRLOCK_EGRESS_HOSTS: path.join(home, 'egress-hosts'),
                    MCP_TEST_SECRET: 'mcp-secret-value-do-not-leak' };
const transport = new StdioClientTransport({
  command: airlock,
  args: ['mcp', '--allow', `web.test:${webPort}`,
         '--secret', 'API_KEY=env:MCP_TEST_SECRET@web.test',
         '--secret', 'UNSET_KEY=env:MCP_TEST_UNSET@web.test',
         '--workspace-root', projects, '--volume', 'mcpdata:ro', '--volume', 'mcpwork'],
  env: serverEnv,
  stderr: 'pipe',
});
transport.stderr?.on('data', (chunk) => stderrLines.push(chunk.toString()));
const client = new Client({ name: 'airlock-mcp-test', version: '1.0.0' });
await client.connect(transport);

after(async () => {
  await client.close();
  web.close();
  const pidFile = path.join(home, 'airlockd.pid');
  if (fs.existsSync(pidFile)) {
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    try { process.kill(pid, 'SIGTERM'); } catch {}
    for (let i = 0; i < 100; i++) {
      try { process.kill(pid, 0); } catch { break; }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  fs.rmSync(home, { recursive: true, force: true });
  fs.rmSync(projects, { recursive: true, force: true });
});

async function call(name, args, options) {
  return client.callTool({ name, arguments: args }, undefined, options);
}

async function ok(name, args) {
  const result = await call(name, args);
  assert.equal(result.isError, false, `${name}: ${JSON.stringify(result.content)}`);
  assert.ok(result.structuredContent, `${name} returned no structuredContent`);
  assert.equal(result.content[0].type, 'text');
  return result.structuredContent;
}

test('twenty-one tools, each with schemas and explicit annotations', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['file_read', 'file_write', 'network_allow', 'network_log', 'run_code',
    'session_create', 'session_exec', 'session_expose', 'session_fork', 'session_get', 'session_list',
    'session_logs', 'session_metrics', 'session_pause', 'session_remove', 'session_resume',
    'vm_list', 'volume_list', 'workspace_diff', 'workspace_promote', 'workspace_sync']);
  for (const t of tools) {
    assert.ok(t.description.length > 20, t.name);
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(t.outputSchema.type, 'object', t.name);
    for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
      assert.equal(typeof t.annotations[hint], 'boolean', `${t.name} ${hint}`);
    }
  }
  assert.equal(tools.find((t) => t.name === 'session_remove').annotations.destructiveHint, true);
  assert.equal(tools.find((t) => t.name === 'session_list').annotations.readOnlyHint, true);
});

test('run_code runs a snippet or a command in a fresh sandbox', async () => {
  let r = await ok('run_code', { code: 'print(6 * 7)' });
  assert.equal(r.exit_code, 0);
  assert.equal(r.stdout, '42\n');
  r = await ok('run_code', { command: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
  assert.equal(r.exit_code, 3);
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  r = await ok('run_code', { code: 'cat', language: 'sh', stdin: 'given\n' });
  assert.equal(r.stdout, 'given\n');
  r = await ok('run_code', { command: ['no-such-program'] });
  assert.equal(r.exit_code, 127);
});

test('network: denied until allowed, and the log says how to ask', async () => {
  const url = `http://web.test:${webPort}/`;
  const fetch = `import urllib.request; print(urllib.request.urlopen('${url}', timeout=20).read().decode())`;
  let r = await ok('run_code', { code: fetch, allow: [`web.test:${webPort}`] });
  assert.equal(r.exit_code, 0, r.stderr);
  assert.equal(r.stdout, 'hello from web.test\n');
  const session = await ok('session_create', {});
  r = await ok('session_exec', { session_id: session.id, code: fetch });
  assert.notEqual(r.exit_code, 0);
  const log = await ok('network_log', { session_id: session.id });
  const denied = log.events.find((e) => e.name === 'web.test' && !e.allowed);
  assert.ok(denied, JSON.stringify(log));
  assert.match(denied.reason, /--allow web\.test/);
  const policy = await ok('network_allow', { session_id: session.id, allow: [`web.test:${webPort}`] });
  assert.deepEqual(policy.rules, [`allow web.test:${webPort}`]);
  r = await ok('session_exec', { session_id: session.id, code: fetch });
  assert.equal(r.stdout, 'hello from web.test\n', r.stderr);
  const bad = await call('network_allow', { session_id: session.id, allow: ['*foo'] });
  assert.equal(bad.isError, true);
  await ok('session_remove', { session_id: session.id });
});

test('secrets go by reference: the code and the model see only a placeholder', async () => {
  const code = [
    'import os, urllib.request',
    "print(os.environ['API_KEY'])",
    `r = urllib.request.Request('http://web.test:${webPort}/', headers={'Authorization': os.environ['API_KEY']})`,
    'urllib.request.urlopen(r, timeout=20).read()',
  ].join('\n');
  const r = await ok('run_code', { code, allow: [`web.test:${webPort}`],
                                   secrets: ['API_KEY'] });
  assert.equal(r.exit_code, 0, r.stderr);
  assert.match(r.stdout, /^AIRLOCK_PLACEHOLDER_\w+\n$/);
  // Plain HTTP: the value is never swapped in there, and nothing returned holds it.
  assert.equal(seenAuth.at(-1), r.stdout.trim());
  assert.ok(!JSON.stringify(r).includes('mcp-secret-value-do-not-leak'));
  const bad = await call('run_code', { code: 'print(1)', secrets: ['UNSET_KEY'] });
  assert.equal(bad.isError, true);
  assert.match(bad.content[0].text, /MCP_TEST_UNSET is not set/);
});

test('a prompt-injected model gets only what the user configured, and is told who can change it', async () => {
  // Its own source and host for a secret, a file of the user's, a wider destination.
  for (const secrets of [['API_KEY=env:MCP_TEST_SECRET@evil.test'], ['X=file:/etc/shadow@web.test'],
                         ['NOT_CONFIGURED']]) {
    const r = await call('run_code', { code: 'print(1)', secrets, allow: ['evil.test'] });
    assert.equal(r.isError, true, JSON.stringify(secrets));
  }
  const secret = await call('run_code', { code: 'print(1)', secrets: ['X=file:/etc/shadow@web.test'] });
  assert.match(secret.content[0].text, /not one this MCP server offers \(API_KEY \(to web\.test\), UNSET_KEY/);
  assert.match(secret.content[0].text, /airlock mcp --secret/);
  const wider = await call('run_code', { code: 'print(1)', allow: ['evil.test'] });
  assert.equal(wider.isError, true);
  assert.match(wider.content[0].text, /airlock mcp --allow evil\.test/);
  const session = await ok('session_create', {});
  const widen = await call('network_allow', { session_id: session.id, allow: [`web.test:${webPort}`, '10.0.0.0/8'] });
  assert.equal(widen.isError, true);
  assert.match(widen.content[0].text, /outside the egress this MCP server allows/);
  assert.deepEqual((await ok('network_allow', { session_id: session.id, allow: [`web.test:${webPort}`] })).rules,
                   [`allow web.test:${webPort}`]);
  await ok('session_remove', { session_id: session.id });
  // A directory of the user's that is not under --workspace-root: never copied into a guest.
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-mcp-private-'));
  for (const workspace of [outside, path.join(projects, '..', path.basename(outside))]) {
    const r = await call('session_create', { workspace });
    assert.equal(r.isError, true, workspace);
    assert.match(r.content[0].text, /not under a workspace root of this MCP server.*--workspace-root/s);
  }
  fs.rmSync(outside, { recursive: true });
});

test('volumes: only those the user offers, read-only where the user says so', async () => {
  for (const name of ['mcpdata', 'mcpwork', 'private']) {
    execFileSync(airlock, ['volume', 'create', name, '--size', '16m'], { env: serverEnv });
  }
  const { volumes } = await ok('volume_list', {});
  assert.deepEqual(volumes.map((v) => [v.name, v.read_only_for_you]),
                   [['mcpdata', true], ['mcpwork', false]]);
  const wrote = await ok('run_code', { code: 'open("/w/f", "w").write("hi")', volumes: ['mcpwork:/w'] });
  assert.equal(wrote.exit_code, 0, wrote.stderr);
  const read = await ok('run_code', { command: ['sh', '-c', 'cat /w/f; ls /d'],
                                      volumes: ['mcpwork:/w:ro', 'mcpdata:/d:ro'] });
  assert.equal(read.stdout, 'hilost+found\n');
  const writable = await call('run_code', { command: ['true'], volumes: ['mcpdata:/d'] });
  assert.equal(writable.isError, true);
  assert.match(writable.content[0].text, /offered read-only by this MCP server/);
  const other = await call('session_create', { volumes: ['private:/p:ro'] });
  assert.equal(other.isError, true);
  assert.match(other.content[0].text, /not one this MCP server offers \(mcpdata \(read-only\), mcpwork\).*airlock mcp --volume/s);
});

test('hostile output never corrupts the protocol and is reported truncated', async () => {
  const script = [
    "printf '\\033[31mred\\033[0m\\n'",
    `printf '{"jsonrpc":"2.0","id":1,"result":{"content":[]}}\\n'`,
    `printf '{"jsonrpc":"2.0","method":"notifications/cancelled"}\\n' >&2`,
    "printf 'bad \\377\\376 bytes\\n' >&2",
    "head -c 10000000 /dev/zero | tr '\\0' x &",
    "head -c 3000000 /dev/zero | tr '\\0' y >&2; wait",
  ].join('\n');
  const r = await ok('run_code', { code: script, language: 'sh' });
  assert.equal(r.exit_code, 0);
  assert.equal(r.stdout.length, 65536);
  assert.ok(r.stdout.startsWith('\u001b[31mred'), r.stdout.slice(0, 40));
  assert.ok(r.stdout.includes('"jsonrpc":"2.0","id":1'));
  assert.equal(r.stdout_truncated, true);
  const lines = '\u001b[31mred\u001b[0m\n{"jsonrpc":"2.0","id":1,"result":{"content":[]}}\n';
  assert.equal(r.stdout_bytes, 10000000 + Buffer.byteLength(lines));
  assert.equal(r.stderr_truncated, true);
  assert.ok(r.stderr.includes('bad \\xff\\xfe bytes'), r.stderr.slice(0, 200));
  assert.equal(r.stderr_escaped, true);
  // A smaller cap on request; the protocol still answers.
  const small = await ok('run_code', { code: 'print("x" * 100)', max_output_bytes: 10 });
  assert.equal(small.stdout, 'xxxxxxxxxx');
  assert.equal(small.stdout_truncated, true);
  assert.deepEqual(await client.ping(), {});
});

test('bad arguments are errors a model can act on; an unknown tool is a protocol error', async () => {
  let r = await call('run_code', {});
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /give either "command"/);
  r = await call('session_exec', { command: ['true'] });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /"session_id" is required/);
  r = await call('run_code', { code: 'print(1)', timeout: 5 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /unknown argument "timeout"/);
  r = await call('session_get', { session_id: 'nope' });
  assert.equal(r.isError, true);
  // Limits are airlockd's to check; the tool shows its answer.
  r = await call('session_create', { memory_mb: 64 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /memory must be between 128 MiB and 64 GiB/);
  r = await call('run_code', { code: 'print(1)', cpus: 65 });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /at most 64 vCPUs/);
  r = await call('session_create', { cpus: -1 });
  assert.match(r.content[0].text, /"cpus" must be a whole number/);
  await assert.rejects(call('no_such_tool', {}), /unknown tool/);
});

test('a session: files, commands, pause, resume, fork, logs, metrics, removal', async () => {
  const s = await ok('session_create', { idle_timeout_seconds: 0 });
  assert.equal(s.state, 'running');
  const id = s.id;
  await ok('file_write', { session_id: id, path: '/root/main.py', content: 'print("from file")\n' });
  let r = await ok('session_exec', { session_id: id, command: ['python3', '/root/main.py'] });
  assert.equal(r.stdout, 'from file\n');
  assert.equal(r.session_id, id);
  const f = await ok('file_read', { session_id: id, path: '/root/main.py' });
  assert.equal(f.content, 'print("from file")\n');
  assert.equal((await call('file_read', { session_id: id, path: '/root/none' })).isError, true);
  // Files go as streams: larger than one message of the API, into directories made for them,
  // and empty ones too.
  const big = 'x'.repeat(5 * 1024 * 1024);
  assert.equal((await ok('file_write', { session_id: id, path: '/root/new/dir/big', content: big })).bytes,
    big.length);
  await ok('file_write', { session_id: id, path: '/root/empty', content: '' });
  r = await ok('session_exec', { session_id: id, command: ['sh', '-c', 'wc -c < /root/new/dir/big; wc -c < /root/empty'] });
  assert.equal(r.stdout, `${big.length}\n0\n`);
  // Read back whole up to 4 MiB (more than one unary reply could carry); past max_bytes, refused.
  const mid = 'y'.repeat(3.5 * 1024 * 1024);
  await ok('file_write', { session_id: id, path: '/root/mid', content: mid });
  assert.equal((await ok('file_read', { session_id: id, path: '/root/mid', max_bytes: 4194304 })).content, mid);
  assert.equal((await call('file_read', { session_id: id, path: '/root/new/dir/big', max_bytes: 4194304 })).isError,
    true);

  assert.equal((await ok('session_pause', { session_id: id })).state, 'paused');
  assert.equal((await ok('session_get', { session_id: id })).state, 'paused');
  assert.equal((await ok('session_resume', { session_id: id })).state, 'running');
  r = await ok('session_exec', { session_id: id, code: 'cat /root/main.py', language: 'sh' });
  assert.equal(r.stdout, 'print("from file")\n');

  // A server in the session as a URL: its token in it, the page through the gateway.
  await ok('session_exec', { session_id: id, language: 'sh',
    code: 'cd /root && (setsid python3 -m http.server 8000 </dev/null >/dev/null 2>&1 &) && ' +
      'until python3 -c "import socket; socket.create_connection((\'127.0.0.1\', 8000))"; do sleep 0.2; done' });
  const exposed = await ok('session_expose', { session_id: id, port: 8000 });
  const url = new URL(exposed.url);
  assert.equal(url.hostname, `8000-${id}.airlock.localhost`);
  const token = url.searchParams.get('airlock_token');
  assert.ok(token.length >= 32);
  const page = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: url.port, path: '/main.py',
      headers: { host: url.host, 'x-airlock-token': token } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
  assert.equal(page.status, 200);
  assert.equal(page.body, 'print("from file")\n');
  assert.equal((await call('session_expose', { session_id: id, port: 0 })).isError, true);

  const forks = (await ok('session_fork', { session_id: id, count: 2 })).sessions;
  assert.equal(forks.length, 2);
  await ok('session_exec', { session_id: forks[0].id, code: 'echo changed > /root/main.py', language: 'sh' });
  r = await ok('session_exec', { session_id: forks[1].id, command: ['python3', '/root/main.py'] });
  assert.equal(r.stdout, 'from file\n');

  const logs = await ok('session_logs', { session_id: id });
  assert.ok(logs.entries.some((e) => e.stream === 'stdout' && e.data.includes('from file')));
  const m = await ok('session_metrics', { session_id: id });
  assert.ok(m.memory_total_bytes > 0);
  const vms = await ok('vm_list', {});
  assert.ok(vms.vms.some((v) => v.session_id === id));
  const list = await ok('session_list', {});
  assert.ok(list.sessions.some((x) => x.id === forks[0].id));
  for (const x of [id, forks[0].id, forks[1].id]) {
    assert.equal((await ok('session_remove', { session_id: x })).removed, true);
  }
  assert.equal((await ok('session_get', { session_id: id })).state, 'stopped');
});

test('a workspace: the project in, a diff, a promotion only when asked', async () => {
  const project = fs.mkdtempSync(path.join(projects, 'ws-'));
  const git = (...args) => execFileSync('git', ['-C', project, '-c', 'user.name=T',
                                                '-c', 'user.email=t@example.com', ...args],
                                        { encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(project, 'app.py'), 'print(1)\n');
  git('add', '-A');
  git('commit', '-qm', 'base');
  const s = await ok('session_create', { workspace: project, idle_timeout_seconds: 0 });
  const id = s.id;
  await ok('session_exec', { session_id: id, cwd: '/workspace', language: 'sh',
    code: 'echo "print(2)" > app.py && git -c user.name=A -c user.email=a@x commit -qam fix' });
  const d = await ok('workspace_diff', { session_id: id });
  assert.deepEqual(d.files, ['app.py']);
  assert.match(d.diff, /-print\(1\)\n\+print\(2\)/);
  const dry = await ok('workspace_promote', { session_id: id });
  assert.match(dry.report, /Would create branch airlock\/\w+\/main/);
  assert.equal(git('branch', '--list', 'airlock/*'), '');
  const done = await ok('workspace_promote', { session_id: id, dry_run: false });
  assert.match(done.report, /Promoted 1 commit/);
  assert.equal(git('log', '--format=%s', '-1', `airlock/${id}/main`), 'fix');
  assert.equal(git('status', '--porcelain'), '');
  fs.writeFileSync(path.join(project, 'NEW'), 'host\n');
  const synced = await ok('workspace_sync', { session_id: id });
  assert.match(synced.report, /Copied into the session:\n  NEW/);
  await ok('session_remove', { session_id: id });
  fs.rmSync(project, { recursive: true, force: true });
});

test('long calls report progress and can be cancelled', async () => {
  const progress = [];
  const r = await call('run_code',
    { code: 'for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.4; done', language: 'sh' },
    { onprogress: (p) => progress.push(p) });
  assert.equal(r.structuredContent.exit_code, 0);
  assert.ok(progress.length >= 1, 'no progress notification');

  const abort = new AbortController();
  const started = Date.now();
  const pending = call('run_code', { command: ['sleep', '60'] }, { signal: abort.signal });
  setTimeout(() => abort.abort(), 1500);
  await assert.rejects(pending);
  assert.ok(Date.now() - started < 30000);
  assert.deepEqual(await client.ping(), {});
  // The cancelled command's VM is gone.
  for (let i = 0; i < 100; i++) {
    const vms = await ok('vm_list', {});
    if (vms.vms.length === 0) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal((await ok('vm_list', {})).vms.length, 0);
});

test('stderr carries diagnostics, stdout only protocol', () => {
  assert.ok(stderrLines.join('').includes('airlock mcp: serving 21 tools'));
});
