// E2B's own SDK (npm `e2b`, pinned) on the filesystem half of envd airlockd's gateway serves:
// directories listed to a depth, entries looked up, made, renamed and removed, directories
// watched as the SDK's watchDir does (and as the Python SDK's polling watchers do, by raw
// Connect calls), each error as the SDK's own class.
//
// Usage: node tests/e2b/e2b_files_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { FileType, FilesystemEventType, NotFoundError, Sandbox, SandboxError } from 'e2b';
import { startDaemon } from './e2b_daemon.mjs';

const [airlock] = process.argv.slice(2);
const { gateway, cli, opts: control, beforeStop } = await startDaemon(airlock, 'airlock-e2bfiles-');
const opts = { ...control, sandboxUrl: gateway };

const sandbox = await Sandbox.create(opts);
beforeStop.push(() => sandbox.kill());

// Resolves once check() holds, polling; rejects after a minute with what describe() says.
function until(check, describe) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = () => {
      if (check()) return resolve();
      if (Date.now() - started > 60_000) return reject(new Error(describe()));
      setTimeout(poll, 50);
    };
    poll();
  });
}

test('directories are listed to a depth, entries looked up', async () => {
  await sandbox.commands.run(
    'mkdir -p /tmp/tree/a/b && echo -n 12345 > /tmp/tree/a/f.txt && chmod 640 /tmp/tree/a/f.txt' +
      ' && ln -s /etc /tmp/tree/link && chown nobody /tmp/tree/a/b',
  );
  const top = await sandbox.files.list('/tmp/tree');
  assert.deepEqual(top.map((e) => [e.name, e.type]), [['a', FileType.DIR], ['link', FileType.SYMLINK]]);
  const link = top[1];
  assert.equal(link.symlinkTarget, '/etc');
  assert.equal(link.path, '/tmp/tree/link');

  const deep = await sandbox.files.list('/tmp/tree', { depth: 3 });
  assert.deepEqual(deep.map((e) => e.path), [
    '/tmp/tree/a', '/tmp/tree/a/b', '/tmp/tree/a/f.txt', '/tmp/tree/link',
  ]);
  const file = deep.find((e) => e.name === 'f.txt');
  assert.equal(file.type, FileType.FILE);
  assert.equal(file.size, 5);
  assert.equal(file.mode, 0o640);
  assert.equal(file.permissions, '-rw-r-----');
  assert.equal(file.owner, 'root');
  assert.ok(file.modifiedTime instanceof Date && Math.abs(file.modifiedTime - Date.now()) < 600_000,
    String(file.modifiedTime));
  assert.equal(deep.find((e) => e.name === 'b').owner, 'nobody');

  const info = await sandbox.files.getInfo('/tmp/tree/a');
  assert.equal(info.type, FileType.DIR);
  assert.equal(info.permissions, 'drwxr-xr-x');
  assert.equal(await sandbox.files.exists('/tmp/tree/a/f.txt'), true);
  assert.equal(await sandbox.files.exists('/tmp/tree/nothing'), false);
  await assert.rejects(sandbox.files.getInfo('/tmp/tree/nothing'), NotFoundError);
  await assert.rejects(sandbox.files.list('/tmp/tree/nothing'), NotFoundError);
  await assert.rejects(sandbox.files.list('/tmp/tree/a/f.txt'), /Not a directory/i);
  // Metadata: user.e2b.* extended attributes of the file, set as it is written (keys arrive
  // lowercase, as HTTP carries them), read back by getInfo and list, gone with a rewrite.
  const meta = await sandbox.files.write('/root/meta.txt', 'm', { metadata: { owner: 'ada', 'build-id': '42' } });
  assert.deepEqual(meta.metadata, { 'build-id': '42', owner: 'ada' });
  assert.deepEqual((await sandbox.files.getInfo('/root/meta.txt')).metadata, { 'build-id': '42', owner: 'ada' });
  assert.equal((await sandbox.commands.run(
    'python3 -c "import os; print(os.getxattr(\'/root/meta.txt\', \'user.e2b.owner\').decode())"')).stdout, 'ada\n');
  assert.deepEqual((await sandbox.files.list('/root')).find((e) => e.name === 'meta.txt').metadata,
    { 'build-id': '42', owner: 'ada' });
  await sandbox.files.write('/root/meta.txt', 'again');
  assert.equal((await sandbox.files.getInfo('/root/meta.txt')).metadata, undefined);
  await assert.rejects(sandbox.files.write('/root/bad.txt', 'b', { metadata: { k: 'caf\u00e9' } }),
    /printable US-ASCII/);
  // Relative paths are under the user's home, as envd has them.
  await sandbox.files.write('rel.txt', 'r');
  assert.equal((await sandbox.files.getInfo('rel.txt')).path, '/root/rel.txt');
});

test('directories are made (owned by the user named), entries renamed and removed', async () => {
  assert.equal(await sandbox.files.makeDir('/tmp/made/x/y'), true);
  assert.equal(await sandbox.files.makeDir('/tmp/made/x/y'), false);
  assert.equal((await sandbox.files.getInfo('/tmp/made/x/y')).type, FileType.DIR);
  await sandbox.files.write('/tmp/made/x/y/f', 'moved');
  const moved = await sandbox.files.rename('/tmp/made/x/y/f', '/tmp/made/elsewhere/g');
  assert.equal(moved.path, '/tmp/made/elsewhere/g');
  assert.equal(moved.type, FileType.FILE);
  assert.equal(await sandbox.files.read('/tmp/made/elsewhere/g'), 'moved');
  await assert.rejects(sandbox.files.rename('/tmp/made/none', '/tmp/made/z'), NotFoundError);

  await sandbox.files.remove('/tmp/made');
  assert.equal(await sandbox.files.exists('/tmp/made'), false);
  await sandbox.files.remove('/tmp/made');  // as envd: what is not there is removed already
  await assert.rejects(sandbox.files.remove('/'), SandboxError);

  // The user a call names owns what it makes (as with envd, the user says whose files these
  // are and where relative paths start; it is not a permission check).
  assert.equal(await sandbox.files.makeDir('/tmp/nobodys/inner', { user: 'nobody' }), true);
  assert.equal((await sandbox.files.getInfo('/tmp/nobodys')).owner, 'nobody');
  assert.equal((await sandbox.files.getInfo('/tmp/nobodys/inner')).group, 'nogroup');
  await assert.rejects(sandbox.files.makeDir('/tmp/x', { user: 'nobody-at-all' }), /nobody-at-all/);
  // Every operation is the session's, in its audit log.
  assert.match(cli('audit', '-n', '500'), new RegExp(`file\\.mkdir.*${sandbox.sandboxId}|${sandbox.sandboxId}.*file\\.mkdir`));
});

test('a watched directory reports what happens in it until stopped', async () => {
  await sandbox.files.makeDir('/tmp/watched/sub');
  const events = [];
  let exited = false;
  const handle = await sandbox.files.watchDir('/tmp/watched', (e) => events.push(e), {
    recursive: true,
    includeEntry: true,
    timeoutMs: 0,
    onExit: () => (exited = true),
  });
  await sandbox.files.write('/tmp/watched/new.txt', 'data');
  await sandbox.files.write('/tmp/watched/sub/deep.txt', 'deeper');
  await sandbox.files.rename('/tmp/watched/new.txt', '/tmp/watched/renamed.txt');
  await sandbox.files.remove('/tmp/watched/renamed.txt');
  const seen = (name, type) => events.some((e) => e.name === name && e.type === type);
  const describe = () => JSON.stringify(events);
  // A write is the file's creation and a write, as with envd; Airlock's temporary file (it
  // writes beside the file and renames) is not reported.
  await until(() => seen('new.txt', FilesystemEventType.CREATE), describe);
  await until(() => seen('new.txt', FilesystemEventType.WRITE), describe);
  await until(() => seen('sub/deep.txt', FilesystemEventType.CREATE), describe);
  await until(() => seen('new.txt', FilesystemEventType.RENAME), describe);
  await until(() => seen('renamed.txt', FilesystemEventType.CREATE), describe);
  await until(() => seen('renamed.txt', FilesystemEventType.REMOVE), describe);
  assert.ok(!events.some((e) => e.name.includes('.airlock-')), describe());
  const written = events.find((e) => e.name === 'sub/deep.txt' && e.entry);
  assert.ok(written, describe());
  assert.equal(written.entry.path, '/tmp/watched/sub/deep.txt');

  // A directory made after the watch started is watched too.
  await sandbox.files.makeDir('/tmp/watched/later');
  await sandbox.files.write('/tmp/watched/later/x', 'x');
  await until(() => seen('later/x', FilesystemEventType.CREATE), describe);

  // A watched sandbox is in use: it does not pause under the watch.
  await assert.rejects(sandbox.pause(), /is in use/);
  await handle.stop();
  const count = events.length;
  await sandbox.files.write('/tmp/watched/after-stop', 'x');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(events.length, count, describe());
  assert.ok(exited);
  await assert.rejects(sandbox.files.watchDir('/tmp/not-there', () => {}), NotFoundError);
});

// A unary Connect call to the sandbox's envd: [status, parsed body].
function call(method, body) {
  const url = new URL(gateway);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const r = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: `/filesystem.Filesystem/${method}`,
        headers: {
          'Content-Type': 'application/json',
          'E2b-Sandbox-Id': sandbox.sandboxId,
          'E2b-Sandbox-Port': '49983',
          'X-Access-Token': sandbox.envdAccessToken,
          Authorization: `Basic ${Buffer.from('root:').toString('base64')}`,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve([res.statusCode, text ? JSON.parse(text) : {}]));
      },
    );
    r.on('error', reject);
    r.end(payload);
  });
}

test("a polling watcher (the Python SDK's) keeps events until asked and is removed", async () => {
  assert.ok(sandbox.envdAccessToken, 'the SDK was given the envd token');
  await sandbox.files.makeDir('/tmp/polled');
  let [status, body] = await call('CreateWatcher', { path: '/tmp/polled' });
  assert.equal(status, 200, JSON.stringify(body));
  const watcherId = body.watcherId;
  assert.ok(watcherId);
  await sandbox.files.write('/tmp/polled/one', '1');
  const events = [];
  for (let i = 0; !events.some((e) => e.name === 'one' && e.type === 'EVENT_TYPE_WRITE'); i++) {
    assert.ok(i < 600, JSON.stringify(events));
    [status, body] = await call('GetWatcherEvents', { watcherId });
    assert.equal(status, 200, JSON.stringify(body));
    events.push(...body.events);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(events.map((e) => [e.name, e.type]), [
    ['one', 'EVENT_TYPE_CREATE'], ['one', 'EVENT_TYPE_WRITE'],
  ]);
  [status, body] = await call('RemoveWatcher', { watcherId });
  assert.equal(status, 200, JSON.stringify(body));
  [status, body] = await call('GetWatcherEvents', { watcherId });
  assert.equal(status, 404, JSON.stringify(body));
  assert.equal(body.code, 'not_found');
  [status, body] = await call('CreateWatcher', { path: '/tmp/polled/one' });
  assert.equal(status, 400, JSON.stringify(body));
  assert.match(body.message, /not a directory/i);
  [status, body] = await call('ListDir', { path: '/tmp', depth: 1000 });
  assert.equal(status, 400, JSON.stringify(body));
  assert.match(body.message, /depth is at most 64/);
});
