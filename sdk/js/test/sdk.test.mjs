// The TypeScript SDK against a real airlockd (its own, on a private AIRLOCK_HOME that shares the
// host's images and kernel), as a program would use it: the shared scenario of the four SDKs
// (sdk/scenario.txt), sessions, commands, streams, files, pause/resume/fork, workspaces, secrets,
// the audit log, the version check, the errors, airlockd's TCP listener with mutual TLS, and
// the examples (examples/*.mjs) run as a user runs them.
//
// Usage: npm test (in sdk/js, after `npm run build`; as root after scripts/setup.sh; AIRLOCKD
// names the daemon binary, default build/airlockd)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as airlock from '../dist/index.js';
import { overrideApiLevelForTests } from '../dist/version.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const airlockd = process.env.AIRLOCKD ?? path.join(here, '..', '..', '..', 'build', 'airlockd');
const cliBinary = path.join(path.dirname(airlockd), 'airlock');  // built beside airlockd
const hostHome = process.env.AIRLOCK_HOME ?? '/var/lib/airlock';
const serverName = 'airlock-sdk-test-server';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-jssdk-'));
fs.chmodSync(dir, 0o755);  // the VMM (uid 65534) reads the image through here
const socket = path.join(dir, 'sock');
let address;
let daemon;
let home;

const openssl = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
function issue(name, cn) {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${dir}/${name}.key`, '-out',
          `${dir}/${name}.csr`, '-subj', `/CN=${cn}`);
  fs.writeFileSync(`${dir}/${name}.ext`, `subjectAltName=DNS:${cn}\n`);
  openssl('x509', '-req', '-in', `${dir}/${name}.csr`, '-CA', `${dir}/ca.pem`, '-CAkey',
          `${dir}/ca.key`, '-CAcreateserial', '-out', `${dir}/${name}.pem`, '-days', '1',
          '-extfile', `${dir}/${name}.ext`);
}
const tls = (name = 'client') => ({ ca: `${dir}/ca.pem`, cert: `${dir}/${name}.pem`,
                                    key: `${dir}/${name}.key`, serverName });

before(async () => {
  home = path.join(dir, 'home');
  fs.mkdirSync(path.join(home, 'kernel'), { recursive: true });
  fs.symlinkSync(path.join(hostHome, 'images'), path.join(home, 'images'));
  fs.symlinkSync(fs.realpathSync(path.join(hostHome, 'kernel/vmlinux')), path.join(home, 'kernel/vmlinux'));
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${dir}/ca.key`, '-out',
          `${dir}/ca.pem`, '-days', '1', '-subj', '/CN=airlock-sdk-test-ca');
  issue('server', serverName);
  issue('client', 'js-sdk-client');
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
  address = `127.0.0.1:${port}`;
  const log = fs.openSync(path.join(dir, 'airlockd.log'), 'w');
  daemon = spawn(airlockd, ['--socket', socket, '--listen-tcp', address, '--tls-cert',
                            `${dir}/server.pem`, '--tls-key', `${dir}/server.key`,
                            '--tls-client-ca', `${dir}/ca.pem`],
                 { env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_HTTP_LISTEN: '127.0.0.1:0' }, stdio: ['ignore', log, log] });
  const deadline = Date.now() + 30000;
  while (!fs.existsSync(socket)) {
    assert.ok(Date.now() < deadline && daemon.exitCode === null,
              'airlockd did not start: ' + fs.readFileSync(path.join(dir, 'airlockd.log'), 'utf8'));
    await new Promise((r) => setTimeout(r, 50));
  }
});

after(async () => {
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.exitCode !== null ? r() : daemon.once('exit', r));
  fs.rmSync(dir, { recursive: true, force: true });
});

async function withClient(use) {
  const c = await airlock.Client.connect(socket);
  try { return await use(c); } finally { c.close(); }
}

// The steps of sdk/scenario.txt with this SDK's API, one transcript line per step, which must be
// the file's transcript (the other SDKs print the same).
test('the shared scenario prints the transcript of sdk/scenario.txt', () => withClient(async (c) => {
  const file = fs.readFileSync(path.join(here, '..', '..', 'scenario.txt'), 'utf8');
  const expected = file.split('\n').filter((line) => line && !line.startsWith('#'));
  const lines = [];
  const s = await c.createSession({ memory: '1g' });
  let kids = [];
  try {
    lines.push(`create state=${s.state} memory=${s.info.limits.memory}`);

    const r = await s.exec(['sh', '-c', 'echo out; echo to-err >&2; exit 3']);
    lines.push(`exec exit=${r.exitCode} stdout=${JSON.stringify(r.stdout.toString())} stderr=${JSON.stringify(r.stderr.toString())}`);

    let [stdoutBytes, allZero, stderrBytes, exit] = [0, true, 0, undefined];
    let zeros = Buffer.alloc(0);
    for await (const e of s.execStream(['head', '-c', '67108864', '/dev/zero'])) {
      if (e.type === 'stdout') {
        if (zeros.length < e.data.length) zeros = Buffer.alloc(e.data.length);
        stdoutBytes += e.data.length;
        allZero &&= e.data.equals(zeros.subarray(0, e.data.length));
      } else if (e.type === 'stderr') {
        stderrBytes += e.data.length;
      } else {
        exit = e.exitCode;
      }
    }
    lines.push(`stream stdout_bytes=${stdoutBytes} all_zero=${allZero} stderr_bytes=${stderrBytes} exit=${exit}`);

    const content = Buffer.alloc((3 << 20) + 17);
    for (let i = 0; i < content.length; i++) content[i] = (i * 7) % 251;
    lines.push(`write bytes=${await s.files.write('/root/data.bin', content, 0o600)}`);
    lines.push(`read same=${(await s.files.read('/root/data.bin')).equals(content)}`);
    const stat = await s.exec(['stat', '-c', '%a %s', '/root/data.bin']);
    lines.push(`stat stdout=${JSON.stringify(stat.stdout.toString())}`);

    lines.push(`pause state=${(await s.pause()).state}`);
    lines.push(`resume state=${(await s.resume()).state}`);
    lines.push(`read same=${(await s.files.read('/root/data.bin')).equals(content)}`);

    kids = await s.fork(2);
    lines.push(`fork children=${kids.length} distinct_ids=${new Set([s.id, ...kids.map((k) => k.id)]).size}`);
    for (const k of kids) {
      const same = (await k.files.read('/root/data.bin')).equals(content);
      lines.push(`child same=${same} own_hostname=${k.info.hostname !== s.info.hostname}`);
      await k.remove();
    }
    kids = [];

    await s.remove();
    lines.push(`remove state=${(await c.getSession(s.id)).state}`);  // its record stays
  } finally {
    for (const k of kids) await k.remove().catch(() => undefined);
    await s.remove().catch(() => undefined);
  }
  assert.equal(lines.join('\n'), expected.join('\n'),
               `this SDK's transcript:\n${lines.join('\n')}\n\nsdk/scenario.txt's:\n${expected.join('\n')}`);
}));

test('exec splits output, takes stdin, and says how the command ended', () => withClient((c) =>
  c.withSession({}, async (s) => {
    let r = await s.exec(['sh', '-c', 'cat; echo to-err >&2; exit 3'], { stdin: Buffer.from('in\0put') });
    assert.deepEqual([r.exitCode, r.stdout.toString(), r.stderr.toString()], [3, 'in\0put', 'to-err\n']);
    const big = crypto.randomBytes(3 << 20);
    r = await s.exec(['sha256sum'], { stdin: big });
    assert.equal(r.stdout.toString().split(' ')[0], crypto.createHash('sha256').update(big).digest('hex'));
    const events = [];
    for await (const e of s.execStream(['sh', '-c', 'echo one; sleep 0.3; echo two >&2; exit 5'])) events.push(e);
    assert.deepEqual(events.map((e) => [e.type, e.data?.toString() ?? e.exitCode]),
                     [['stdout', 'one\n'], ['stderr', 'two\n'], ['exit', 5]]);
    async function* pieces() { yield 'from '; yield Buffer.from('an '); yield new TextEncoder().encode('iterator'); }
    assert.equal((await s.exec(['cat'], { stdin: pieces() })).stdout.toString(), 'from an iterator');
    r = await s.exec(['sh', '-c', 'echo $GREETING in $(pwd) as $(id -un)'],
                     { env: { GREETING: 'hello' }, cwd: '/tmp', user: 'nobody' });
    assert.equal(r.stdout.toString(), 'hello in /tmp as nobody\n');
    r = await s.exec(['no-such-command']);
    assert.equal(r.exitCode, 127);
    assert.match(r.message, /not found/);
    r = await s.exec(['sh', '-c', 'kill -TERM $$']);
    assert.deepEqual([r.exitCode, r.signal], [143, 15]);
    await assert.rejects(s.exec(['sh', '-c', 'echo started; sleep 30'], { timeout: 1 }), (e) => {
      assert.ok(e instanceof airlock.Timeout);
      assert.equal(e.result.stdout.toString(), 'started\n');
      return e.result.timedOut;
    });
    await assert.rejects(s.exec(['false'], { check: true }),
                         (e) => e instanceof airlock.CommandFailed && e.result.exitCode === 1);
  })));

test('a stream takes stdin and signals while it runs, and leaving it early ends the command', () =>
  withClient((c) => c.withSession({}, async (s) => {
    const stream = s.execStream(['sh', '-c', 'read line; echo got $line; sleep 300'], { stdin: true });
    await stream.write('hello\n');
    for await (const e of stream) {
      if (e.type === 'stdout' && e.data.toString() === 'got hello\n') stream.signal(15);
    }
    assert.deepEqual([stream.exit.exitCode, stream.exit.signal], [143, 15]);
    for await (const e of s.execStream(['sh', '-c', 'echo go; sleep 300'])) {
      assert.equal(e.data.toString(), 'go\n');
      break;  // cancels the command
    }
    const deadline = Date.now() + 30000;
    while ((await s.exec(['ps', '-eo', 'args'])).stdout.toString().includes('sleep 300')) {
      assert.ok(Date.now() < deadline, 'the abandoned command still runs');
      await new Promise((r) => setTimeout(r, 200));
    }
  })));

test('files, listings and one-shot runs', () => withClient(async (c) => {
  await c.withSession({}, async (s) => {
    const data = Buffer.alloc(1 << 20, 7);
    assert.equal(await s.files.write('/root/blob', data, 0o600), data.length);
    assert.ok((await s.files.read('/root/blob')).equals(data));
    assert.equal((await s.exec(['stat', '-c', '%a', '/root/blob'])).stdout.toString(), '600\n');
    await assert.rejects(s.files.read('/root/blob', 10), airlock.AirlockError);
    await assert.rejects(s.files.write('relative', 'x'), airlock.InvalidArgument);
    await assert.rejects(s.files.write('/root/x', 42), airlock.InvalidArgument);
    await assert.rejects(s.files.write('/root/x', '', '0644'), airlock.InvalidArgument);

    // Any size, from a generator or a Node.js stream, and back in pieces.
    const piece = Buffer.alloc(512 << 10);
    for (let i = 0; i < piece.length; i++) piece[i] = i & 0xff;
    async function* twelve() { for (let i = 0; i < 12; i++) yield piece; }
    assert.equal(await s.files.write('/root/big', twelve()), 6 << 20);
    let total = 0;
    for await (const got of s.files.readStream('/root/big')) {
      assert.ok(got.equals(piece.subarray(total % piece.length, total % piece.length + got.length)));
      total += got.length;
    }
    assert.equal(total, 6 << 20);
    const fromStream = Readable.from([piece, piece, piece]);
    assert.equal(await s.files.write('/root/from-stream', fromStream), 3 * piece.length);
    const sum = crypto.createHash('sha256').update(Buffer.concat([piece, piece, piece])).digest('hex');
    assert.equal((await s.exec(['sha256sum', '/root/from-stream'])).stdout.toString().slice(0, 64), sum);

    // Content that fails part-way leaves the old file, and its error is what rejects.
    async function* broken() { yield piece; throw new Error('the source went away'); }
    await assert.rejects(s.files.write('/root/big', broken()), /the source went away/);
    assert.equal((await s.exec(['stat', '-c', '%s', '/root/big'])).stdout.toString(), '6291456\n');
    assert.equal((await s.exec(['sh', '-c', 'ls -A /root | grep -c airlock || true'])).stdout.toString(), '0\n');
    assert.ok((await c.listSessions()).some((x) => x.id === s.id));
    assert.ok((await s.logs()).some((e) => e.stream === 'event'));
    const metrics = await s.metrics();
    assert.ok(metrics.memoryTotal > 0 && metrics.time instanceof Date && typeof metrics.netDenied === 'number');
    // The timeline in the SDK's own terms: dates, seconds, argv as bytes.
    const ran = (await s.timeline()).find((e) => e.kind === 'exec' && e.argv.map(String).join(' ') === 'stat -c %a /root/blob');
    assert.ok(ran, 'the timeline has the stat command');
    assert.ok(ran.time instanceof Date && Buffer.isBuffer(ran.output) && ran.duration >= 0 && ran.seq > 0);
    assert.deepEqual([ran.exitCode, ran.output.toString(), ran.failed], [0, '600\n', false]);
    assert.ok((await c.vms()).some((v) => v.sessionId === s.id && v.pid > 0));

    // A server in the session as a URL, reached through the gateway with its token.
    await s.files.write('/srv/hello.txt', 'hello\n');
    await s.exec(['sh', '-c', 'cd /srv && (setsid python3 -m http.server 8000 </dev/null >/dev/null 2>&1 &) && ' +
      'until python3 -c "import socket; socket.create_connection((\'127.0.0.1\', 8000))" 2>/dev/null; do sleep 0.2; done'],
    { check: true });
    const e = await s.ports.expose(8000);
    assert.equal(e.host, `8000-${s.id}.airlock.localhost`);
    assert.equal(e.url, `http://${e.host}:${new URL(e.url).port}/?airlock_token=${e.token}`);
    const page = await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: new URL(e.url).port, path: '/hello.txt',
        headers: { host: new URL(e.url).host, 'x-airlock-token': e.token } }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
    assert.equal(page, 'hello\n');
    assert.deepEqual((await s.ports.list()).map((x) => x.port), [8000]);
    await s.ports.unexpose(8000);
    assert.deepEqual(await s.ports.list(), []);
    // The same server through a listener here, as `airlock port-forward` does.
    const f = await s.ports.forward(8000);
    for (let i = 0; i < 2; i++) {
      const body = await new Promise((resolve, reject) => {
        http.get({ host: '127.0.0.1', port: f.port, path: '/hello.txt' }, (res) => {
          let text = '';
          res.on('data', (d) => { text += d; });
          res.on('end', () => resolve(text));
        }).on('error', reject);
      });
      assert.equal(body, 'hello\n');
    }
    await f.close();
    await assert.rejects(s.ports.expose(70000), airlock.InvalidArgument);
  });
  const r = await c.run(['sh', '-c', 'echo $((6*7))'], { memory: '256m' });
  assert.deepEqual([r.exitCode, r.stdout.toString()], [0, '42\n']);
  assert.ok((await c.images()).length > 0);
}));

test('images come in through airlockd, and a broken one imports nothing', () => withClient(async (c) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-js-image-'));
  fs.mkdirSync(path.join(dir, 'srv'));
  fs.writeFileSync(path.join(dir, 'srv', 'hello'), 'hello from an imported image\n');
  const archive = execFileSync('tar', ['-cf', '-', '-C', dir, 'srv']);
  fs.rmSync(dir, { recursive: true });
  const name = `sdk-test/tiny-js-${process.pid}:1`;
  try {
    const image = await c.importImage(Readable.from([archive.subarray(0, 2048), archive.subarray(2048)]), { name, rootfs: true });
    assert.equal(image.name, name);
    assert.match(image.digest, /^sha256:/);
    assert.ok((await c.images()).some((i) => i.name === name));
  } finally {
    await new Promise((resolve) => c.imagesStub.Remove({ names: [name] }, resolve));
  }
  async function* broken() { yield archive.subarray(0, 1024); throw new Error('the archive went away'); }
  await assert.rejects(c.importImage(broken(), { name, rootfs: true }), /the archive went away/);
  assert.ok(!(await c.images()).some((i) => i.name === name));
  await assert.rejects(c.importImage(archive, { rootfs: true }), airlock.InvalidArgument);
  await assert.rejects(c.importImage(archive, { name: 'Not A Name', rootfs: true }), airlock.InvalidArgument);
  await assert.rejects(c.pullImage(42), airlock.InvalidArgument);
  // A build: bad input is refused by airlockd before anything runs (a real one takes minutes).
  const lines = [];
  await assert.rejects(c.buildImage({ tag: name, suite: 'Bookworm!', packages: ['git'] }, (l) => lines.push(l)),
    (e) => e instanceof airlock.InvalidArgument && /is not a Debian suite name/.test(e.message));
  await assert.rejects(c.buildImage({ tag: name, suite: 'bookworm', npm: ['./local'] }), airlock.InvalidArgument);
  await assert.rejects(c.buildImage({ tag: name, suite: 'bookworm', packages: 'git' }), airlock.InvalidArgument);
  assert.deepEqual(lines, []);
  assert.ok(!(await c.images()).some((i) => i.name === name));
}));

test('volumes outlive sessions: one writer, then readers', () => withClient(async (c) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-js-volume-'));
  fs.writeFileSync(path.join(dir, 'greeting'), 'hello from a volume\n');
  const archive = execFileSync('tar', ['-cf', '-', '-C', dir, 'greeting']);
  fs.rmSync(dir, { recursive: true });
  const name = `sdk-js-${process.pid}`;
  const made = await c.createVolume(name, '32m');
  assert.deepEqual([made.name, made.size, made.snapshot], [name, 32 << 20, false]);
  try {
    assert.equal((await c.importVolume(name, archive)).generation, 1);
    await c.withSession({ volumes: [`${name}:/data`] }, async (s) => {
      assert.equal((await s.exec(['cat', '/data/greeting'])).stdout.toString(), 'hello from a volume\n');
      await s.exec(['sh', '-c', 'echo more > /data/more'], { check: true });
      const held = (await c.volumes()).find((v) => v.name === name);
      assert.deepEqual([held.holders, held.heldReadWrite], [[s.id], true]);
      await assert.rejects(c.createSession({ volumes: [`${name}:/data:ro`] }),
        (e) => e instanceof airlock.FailedPrecondition && /is attached to session/.test(e.message));
    });
    const r = await c.run(['cat', '/v/more'], { volumes: [`${name}:/v:ro`] });
    assert.equal(r.stdout.toString(), 'more\n');
    const snap = await c.snapshotVolume(name, `${name}@v1`);
    assert.deepEqual([snap.snapshot, snap.origin], [true, `snapshot of ${name}`]);
    await c.removeVolume(snap.name);
    await assert.rejects(c.createSession({ volumes: ['no-path'] }), airlock.InvalidArgument);
    // A host to make it on is a fleet's to honour: this airlockd alone refuses it.
    await assert.rejects(c.createSession({ host: 'host-b' }),
      (e) => e instanceof airlock.FailedPrecondition && /makes sessions only on itself: --host host-b/.test(e.message));
    await assert.rejects(c.run(['true'], { host: 'host-b' }), airlock.InvalidArgument);
    await assert.rejects(c.importVolume(name, Buffer.alloc(4096)), /not a tar archive/);
  } finally {
    await c.removeVolume(name);
  }
  await assert.rejects(c.removeVolume(name), (e) => e instanceof airlock.NotFound && /airlock volume ls/.test(e.message));
}));

test('errors are typed, and wrong types never reach the wire', () => withClient(async (c) => {
  await assert.rejects(c.getSession('0123456789ab'), airlock.NotFound);
  await assert.rejects(c.createSession({ memory: 'lots' }), /not a size/);
  await assert.rejects(c.createSession({ allow: 'pypi.org' }), airlock.InvalidArgument);
  await assert.rejects(c.createSession({ allow: ['not a rule!'] }), airlock.InvalidArgument);
  await assert.rejects(c.createSession({ memory: '64t' }), airlock.InvalidArgument);
  await c.withSession({}, async (s) => {
    await assert.rejects(s.fork(17), (e) => e instanceof airlock.LimitExceeded && /forks/.test(e.message));
    await assert.rejects(() => s.exec('echo not a list'), airlock.InvalidArgument);
    await assert.rejects(() => s.exec(['true'], { env: { A: 1 } }), airlock.InvalidArgument);
    await assert.rejects(s.fork(0), airlock.InvalidArgument);
    const busy = s.execStream(['sleep', '300']);
    const it = busy[Symbol.asyncIterator]();
    const pending = it.next();
    await new Promise((r) => setTimeout(r, 500));
    await assert.rejects(s.pause(), (e) => e instanceof airlock.FailedPrecondition && !(e instanceof airlock.SessionFailed));
    busy.cancel();
    await pending.catch(() => undefined);
    const vm = (await c.vms()).find((v) => v.sessionId === s.id);
    process.kill(vm.pid, 'SIGKILL');
    const deadline = Date.now() + 30000;
    while ((await s.refresh()).state !== 'failed') {
      assert.ok(Date.now() < deadline);
      await new Promise((r) => setTimeout(r, 100));
    }
    await assert.rejects(s.exec(['true']), (e) => e instanceof airlock.SessionFailed && e.reason.length > 0);
  });
  await assert.rejects(airlock.Client.connect(path.join(dir, 'no-such.sock'), { connectTimeout: 1 }), airlock.Unavailable);
  assert.throws(() => new airlock.Client(address), airlock.InvalidArgument);  // TCP without TLS
}));

test('watch sees states, commands and denials as they happen', () => withClient(async (c) => {
  const watch = c.watch();
  const seen = [];
  const following = (async () => { for await (const e of watch) seen.push(e); })();
  await new Promise((r) => setTimeout(r, 500));  // the call is under way before anything happens
  const s = await c.createSession();
  await s.exec(['sh', '-c', 'exit 3']);
  await s.exec(['python3', '-c', "import socket\ntry: socket.getaddrinfo('denied.test', 80)\nexcept OSError: pass"]);
  await s.pause();
  await s.exec(['true']);
  await s.remove();
  const deadline = Date.now() + 30000;
  while (!seen.some((e) => e.sessionId === s.id && e.state === 'stopped')) {
    assert.ok(Date.now() < deadline, JSON.stringify(seen));
    await new Promise((r) => setTimeout(r, 100));
  }
  watch.cancel();
  await following;
  const mine = seen.filter((e) => e.sessionId === s.id);
  const states = mine.filter((e) => e.kind === 'state').map((e) => e.state);
  assert.deepEqual(states.slice(0, 2), ['creating', 'running']);
  assert.ok(states.includes('paused'));
  assert.equal(states.at(-1), 'stopped');
  const start = mine.find((e) => e.kind === 'execStart');
  assert.deepEqual(start.argv.map(String), ['sh', '-c', 'exit 3']);
  const exit = mine.find((e) => e.kind === 'execExit');
  assert.deepEqual([exit.execId, exit.exitCode], [start.execId, 3]);
  assert.ok(mine.some((e) => e.kind === 'denied' && e.destination.startsWith('denied.test')), JSON.stringify(mine));
  const none = c.watch('0123456789ab');
  await assert.rejects((async () => { for await (const e of none) void e; })(), airlock.NotFound);
}));

test('mutual TLS: the certificate holder is its own tenant, a stranger cannot connect', async () => {
  const remote = await airlock.Client.connect(address, { tls: tls() });
  try {
    await remote.withSession({}, async (s) => {
      assert.equal((await s.exec(['echo', 'over tls'])).stdout.toString(), 'over tls\n');
      await withClient((local) => assert.rejects(local.getSession(s.id), airlock.NotFound));
    });
  } finally {
    remote.close();
  }
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${dir}/stranger.key`, '-out',
          `${dir}/stranger.pem`, '-days', '1', '-subj', '/CN=stranger');
  await assert.rejects(airlock.Client.connect(address, { tls: tls('stranger'), connectTimeout: 3 }), airlock.Unavailable);
});

test('the version check: airlockd answers its level, and a mismatch fails loudly and says what to upgrade', async () => {
  const v = await withClient((c) => c.version());
  assert.ok(v.level >= airlock.API_LEVEL && v.oldestClientLevel <= airlock.API_LEVEL, JSON.stringify(v));
  assert.match(v.daemonVersion, /^\d+\.\d+\.\d+/);

  // An SDK newer than the daemon: connecting fails, naming both levels.
  const before = overrideApiLevelForTests(v.level + 1);
  try {
    await assert.rejects(airlock.Client.connect(socket), (e) => {
      assert.ok(e instanceof airlock.VersionMismatch && e instanceof airlock.AirlockError, String(e));
      assert.deepEqual([e.daemonLevel, e.clientLevel], [v.level, v.level + 1]);
      assert.equal(e.message, `airlockd ${v.daemonVersion} speaks API level ${v.level}; this SDK needs ${v.level + 1}: upgrade airlockd`);
      return true;
    });
    // A client made without connect() checks before its first call; every call, streams too,
    // rejects with the same error and nothing reaches airlockd.
    const lazy = new airlock.Client(socket);
    try {
      await assert.rejects(lazy.listSessions(), airlock.VersionMismatch);
      await assert.rejects(lazy.createSession(), airlock.VersionMismatch);
      await assert.rejects(lazy.run(['true']), airlock.VersionMismatch);
      await assert.rejects((async () => { for await (const e of lazy.watch()) void e; })(), airlock.VersionMismatch);
      await assert.rejects(lazy.version(), airlock.VersionMismatch);
    } finally {
      lazy.close();
    }
    // An SDK older than the daemon serves.
    overrideApiLevelForTests(v.oldestClientLevel - 1);
    await assert.rejects(airlock.Client.connect(socket), (e) => e instanceof airlock.VersionMismatch &&
      e.message.endsWith(': upgrade the SDK') && e.daemonLevel === v.level);
  } finally {
    overrideApiLevelForTests(before);
  }

  // An airlockd from before API levels has no Api service: gRPC answers UNIMPLEMENTED.
  const old = new grpc.Server();
  const oldSocket = path.join(dir, 'old.sock');
  await new Promise((resolve, reject) => old.bindAsync(`unix:${oldSocket}`, grpc.ServerCredentials.createInsecure(),
                                                       (error) => (error ? reject(error) : resolve())));
  try {
    await assert.rejects(airlock.Client.connect(oldSocket), (e) => e instanceof airlock.VersionMismatch &&
      e.daemonLevel === 0 && /predates API levels.*: upgrade airlockd$/.test(e.message));
  } finally {
    old.forceShutdown();
  }

  // A client that passed the check works, and its sessions are what airlockd says.
  await withClient(async (c) => assert.ok(Array.isArray(await c.listSessions())));
});

// `airlock ARGS...` (the CLI built beside airlockd) against this test's airlockd.
function cli(...args) {
  return execFileSync(cliBinary, args, {
    encoding: 'utf8', env: { ...process.env, AIRLOCK_SOCKET: socket, AIRLOCK_HOME: home },
  });
}

test('a workspace the CLI made: its base, the diff against it, and its commits as a git bundle', async () => {
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'airlock-js-project-'));
  const git = (...args) => execFileSync('git', ['-C', project, '-c', 'user.name=Host User', '-c',
                                                'user.email=host@example.com', ...args], { encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  fs.mkdirSync(path.join(project, 'src'));
  fs.writeFileSync(path.join(project, 'README'), 'hello\n');
  fs.writeFileSync(path.join(project, 'src', 'app.py'), "print('v1')\n");
  git('add', '-A');
  git('commit', '-qm', 'first');
  const head = git('rev-parse', 'HEAD');
  const id = cli('session', 'create', '--workspace', project).trim();
  try {
    await withClient(async (c) => {
      const s = await c.getSession(id);
      const info = await s.workspace.info({ entries: true });
      assert.deepEqual([info.base.path, info.base.head, info.base.branch, info.synced],
                       [fs.realpathSync(project), head, 'main', undefined]);
      assert.match(info.base.treeDigest, /^sha256:[0-9a-f]{64}$/);
      const readme = info.entries.find((e) => e.path.toString() === 'README');
      assert.deepEqual([readme.mode, readme.size, readme.sha256],
                       [0o100644, 6, crypto.createHash('sha256').update('hello\n').digest('hex')]);
      assert.ok(info.entries.some((e) => e.path.toString() === 'src/app.py'));
      assert.deepEqual((await s.workspace.info()).entries, []);
      assert.deepEqual(await s.workspace.diff(), []);

      // The agent's work in the guest: a change, a new file and a removal, committed.
      const commit = 'git -c user.name=Agent -c user.email=agent@example.com commit -q';
      await s.exec(['sh', '-c', `cd /workspace && echo changed > README && echo new > NEW && rm src/app.py && git add -A && ${commit} -m 'agent change'`],
                   { check: true });
      const changes = await s.workspace.diff();
      assert.deepEqual(changes.map((x) => [x.kind, x.path.toString()]),
                       [['added', 'NEW'], ['modified', 'README'], ['deleted', 'src/app.py']]);
      const [added, modified, deleted] = changes;
      assert.deepEqual([added.oldMode, added.newMode, added.oldContent, String(added.newContent)], [0, 0o100644, undefined, 'new\n']);
      assert.deepEqual([modified.oldSize, modified.newSize, String(modified.oldContent), String(modified.newContent)],
                       [6, 8, 'hello\n', 'changed\n']);
      assert.deepEqual([modified.binary, modified.tooLarge, modified.omitted], [false, false, false]);
      assert.deepEqual([deleted.newMode, String(deleted.oldContent), deleted.newContent], [0, "print('v1')\n", undefined]);

      const dry = await s.workspace.bundle({ dryRun: true });
      assert.deepEqual([dry.info.baseCommit, dry.info.branch, dry.info.commits, dry.data.length], [head, 'main', 1, 0]);
      assert.match(dry.info.log, /agent change/);
      const bundle = await s.workspace.bundle({ branch: 'review' });
      assert.equal(bundle.info.commits, 1);
      assert.match(bundle.data.subarray(0, 16).toString(), /^# v[23] git bundle\n/);
      // It is git's own: the project takes the commit from it.
      const file = path.join(project, '..', `${path.basename(project)}.bundle`);
      fs.writeFileSync(file, bundle.data);
      try {
        git('fetch', '-q', file, `${bundle.info.ref}:refs/heads/review`);
      } finally {
        fs.rmSync(file);
      }
      assert.equal(git('rev-parse', 'review'), bundle.info.headCommit);
      assert.equal(git('log', '-1', '--format=%s', 'review'), 'agent change');

      // Work not committed: shown by a dry run, committed on top in the bundle only.
      await s.exec(['sh', '-c', 'cd /workspace && echo wip > WIP'], { check: true });
      assert.match((await s.workspace.bundle({ dryRun: true })).info.uncommittedDiff, /\+wip/);
      assert.equal((await s.workspace.bundle({ includeUncommitted: true, dryRun: true })).info.commits, 2);
      await assert.rejects(s.workspace.bundle({ branch: 7 }), airlock.InvalidArgument);
    });
  } finally {
    cli('rm', id);
    fs.rmSync(project, { recursive: true, force: true });
  }
});

test("a session's secrets, and the host's audit log", () => withClient(async (c) => {
  const s = await c.createSession({ secrets: { 'TOKEN=env:AIRLOCK_UNUSED@api.example.com': 's3cret-value' } });
  try {
    const [token, ...others] = await s.secrets.list();
    assert.deepEqual(others, []);
    assert.deepEqual([token.name, token.source, token.hosts, token.body, token.available, token.lastUsed],
                     ['TOKEN', 'env:AIRLOCK_UNUSED', ['api.example.com'], false, true, undefined]);
    const seen = (await s.exec(['sh', '-c', 'echo $TOKEN'])).stdout.toString();
    assert.equal(seen, `${token.placeholder}\n`);
    assert.ok(!seen.includes('s3cret-value'));
    const both = await s.secrets.set({ 'OTHER=env:AIRLOCK_UNUSED@other.example.com?body': 'v' });
    assert.deepEqual(both.map((x) => [x.name, x.body]).sort(), [['OTHER', true], ['TOKEN', false]]);
    assert.deepEqual((await s.secrets.remove(['TOKEN'])).map((x) => x.name), ['OTHER']);
    assert.deepEqual((await s.secrets.list()).map((x) => x.name), ['OTHER']);
    await assert.rejects(s.secrets.remove('OTHER'), airlock.InvalidArgument);

    // No workspace here: said, with how to make one.
    await assert.rejects(s.workspace.diff(), (e) => e instanceof airlock.FailedPrecondition && /has no workspace/.test(e.message));
    await assert.rejects(s.workspace.info(), airlock.FailedPrecondition);
  } finally {
    await s.remove();
  }

  // Root over the socket reads the audit log, which holds what was just done.
  const records = await c.audit.list(new Date(Date.now() - 3600 * 1000));
  assert.ok(records.some((r) => r.action === 'session.create' && r.target === s.id), JSON.stringify(records.at(-1)));
  assert.ok(records.every((r, i) => r.time instanceof Date && /^[0-9a-f]{64}$/.test(r.hash) && (i === 0 || r.seq > records[i - 1].seq)));
  assert.equal((await c.audit.list(undefined, 2)).length, 2);
  assert.deepEqual(await c.audit.list(new Date(Date.now() + 3600 * 1000)), []);
  await assert.rejects(c.audit.list('yesterday'), airlock.InvalidArgument);
  const verified = await c.audit.verify();
  assert.deepEqual([verified.ok, verified.problem, verified.firstBadSeq], [true, '', 0]);
  assert.ok(verified.records > 0 && verified.lastSeq >= records.at(-1).seq, JSON.stringify(verified));
}));

// examples/NAME.mjs run with node against this test's airlockd: its output, and when each piece
// of its stdout came (ms after it started).
function example(name) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, [path.join(here, '..', 'examples', `${name}.mjs`), socket],
                        { stdio: ['ignore', 'pipe', 'pipe'] });
    const run = { stdout: '', stderr: '', pieces: [] };
    child.stdout.on('data', (d) => { run.stdout += d; run.pieces.push([Date.now() - started, String(d)]); });
    child.stderr.on('data', (d) => { run.stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ ...run, code }));
  });
}

test('the examples run as a user runs them', () => withClient(async (c) => {
  const quick = await example('quickstart');
  assert.equal(quick.code, 0, quick.stderr);
  const [, id, hostname] = /^session (\S+) is running\nhello from (\S+)\nexit code 0\n$/.exec(quick.stdout) ?? [];
  assert.ok(id, quick.stdout);
  assert.equal((await c.getSession(id)).state, 'stopped');  // removed
  assert.equal((await c.getSession(id)).info.hostname, hostname);

  const stream = await example('stream');
  assert.equal(stream.code, 0, stream.stderr);
  assert.deepEqual([stream.stdout, stream.stderr], ['step 1\nstep 2\nstep 3\nstep 4\nstep 5\nexit code 0\n', 'done\n']);
  // As it came: five steps half a second apart, not all at the end.
  const at = (text) => stream.pieces.find(([, piece]) => piece.includes(text))[0];
  assert.ok(at('step 5') - at('step 1') >= 1500, JSON.stringify(stream.pieces));

  const fork = await example('fork');
  assert.equal(fork.code, 0, fork.stderr);
  const m = /^(\S+) \((\S+)\):\nbefore the fork\ncopy 0\n(\S+) \((\S+)\):\nbefore the fork\ncopy 1\n(\S+) \(the original\):\nbefore the fork\n$/
    .exec(fork.stdout);
  assert.ok(m, fork.stdout);
  assert.equal(new Set([m[1], m[3], m[5]]).size, 3);
  assert.notEqual(m[2], m[4]);
}));
