// E2B's own SDK (npm `e2b`, pinned) on volumes, which airlockd serves with its own: a volume
// created, listed, looked up and destroyed through E2B's volume API (its id is its name), mounted
// into a sandbox with volumeMounts, its data there for the next sandbox after the first is gone,
// and a second writer refused (Airlock lets one sandbox write a volume at a time).
//
// Usage: node tests/e2b/e2b_volume_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, Volume, VolumePathNotFoundError } from 'e2b';
import { startDaemon } from './e2b_daemon.mjs';

const [airlock] = process.argv.slice(2);
const { cli, opts: control } = await startDaemon(airlock, 'airlock-e2bvol-');
const opts = { ...control, sandboxUrl: control.apiUrl };

test('a volume is created, listed, found and destroyed through E2B\'s volume API', async () => {
  const volume = await Volume.create('e2b-data', opts);
  assert.equal(volume.name, 'e2b-data');
  assert.equal(volume.volumeId, 'e2b-data');
  assert.deepEqual((await Volume.list(opts)).map((v) => v.name), ['e2b-data']);
  assert.equal((await Volume.getInfo('e2b-data', opts)).name, 'e2b-data');
  assert.match(cli('volume', 'ls'), /^e2b-data +10\.0GiB +volume/m);  // the operator's default size
  await assert.rejects(Volume.create('e2b-data', opts), /already/);
  await assert.rejects(Volume.create('Not A Name', opts), /is not a volume's name/);
  assert.equal(await Volume.destroy('e2b-data', opts), true);
  assert.equal(await Volume.destroy('e2b-data', opts), false);
  await assert.rejects(Volume.getInfo('e2b-data', opts), /not found/);
});

test('volumeMounts: the data outlives the sandbox, and one sandbox writes a volume at a time', async () => {
  const volume = await Volume.create('e2b-work', opts);
  const first = await Sandbox.create({ ...opts, volumeMounts: { '/mnt/work': volume } });
  await first.commands.run('echo kept > /mnt/work/note');
  assert.deepEqual((await first.getInfo()).volumeMounts, [{ name: 'e2b-work', path: '/mnt/work' }]);
  await assert.rejects(Sandbox.create({ ...opts, volumeMounts: { '/mnt/work': 'e2b-work' } }),
    new RegExp(`is attached to session ${first.sandboxId} \\(running, read-write\\)`));
  await assert.rejects(Volume.destroy('e2b-work', opts), /remove those sessions first/);
  await first.kill();
  const second = await Sandbox.create({ ...opts, volumeMounts: { '/data': 'e2b-work' } });
  assert.equal((await second.commands.run('cat /data/note')).stdout, 'kept\n');
  await second.kill();
  await assert.rejects(Sandbox.create({ ...opts, volumeMounts: { '/data': 'nosuch' } }),
    /you have no volume named nosuch/);
  assert.equal(await Volume.destroy('e2b-work', opts), true);
});

test('a volume\'s files without a sandbox (the volume content API), and through one that mounts it', async () => {
  process.env.E2B_VOLUME_API_URL = control.apiUrl;  // what a user sets besides E2B_API_URL
  const volume = await Volume.create('e2b-files', opts);
  assert.match(volume.token, /^vt_[0-9a-f]+_[0-9a-f]{64}$/);
  const dir = await volume.makeDir('/notes', { mode: 0o750 });
  assert.equal(dir.type, 'directory');
  assert.equal(dir.mode, 0o750);
  const file = await volume.writeFile('/notes/a.txt', 'hello', { mode: 0o640, uid: 1000, gid: 1000 });
  assert.equal(file.path, '/notes/a.txt');
  assert.equal(file.size, 5);
  assert.equal(file.mode, 0o640);
  assert.equal(file.uid, 1000);
  assert.ok(file.mtime instanceof Date && !Number.isNaN(file.mtime.getTime()));
  assert.equal(await volume.readFile('/notes/a.txt'), 'hello');
  assert.deepEqual([...await volume.readFile('notes/a.txt', { format: 'bytes' })], [...Buffer.from('hello')]);
  await assert.rejects(volume.writeFile('/notes/a.txt', 'again'), /is there already: pass force: true/);
  await volume.writeFile('/notes/a.txt', 'replaced', { force: true });
  assert.equal(await volume.readFile('/notes/a.txt'), 'replaced');
  assert.deepEqual((await volume.list('/')).map((e) => e.path), ['/lost+found', '/notes']);  // ext4's own
  assert.deepEqual((await volume.list('/notes', { depth: 2 })).map((e) => e.path), ['/notes/a.txt']);
  assert.deepEqual((await volume.list('/', { depth: 2 })).map((e) => e.path),
    ['/lost+found', '/notes', '/notes/a.txt']);
  const changed = await volume.updateMetadata('/notes/a.txt', { mode: 0o600, gid: 0 });
  assert.equal(changed.mode, 0o600);
  assert.equal(changed.gid, 0);
  assert.equal(changed.uid, 1000);
  assert.equal((await volume.getInfo('/notes')).type, 'directory');
  assert.equal(await volume.exists('/nope'), false);
  await assert.rejects(volume.makeDir('/x/y'), VolumePathNotFoundError);  // its parent is not there
  await volume.makeDir('/x/y', { force: true });
  await volume.remove('/x');
  assert.equal(await volume.exists('/x/y'), false);
  await assert.rejects(volume.remove('/x'), /not found/i);
  await assert.rejects(volume.getInfo('/notes/../../etc'), /cannot go above the volume's root/);
  await assert.rejects(volume.readFile('/notes/missing'), /not found/i);
  const forged = new Volume('e2b-files', 'e2b-files', `${volume.token.slice(0, -4)}0000`);
  await assert.rejects(forged.getInfo('/'), /not volume e2b-files's/);
  await assert.rejects(new Volume('e2b-files', 'e2b-files', undefined).getInfo('/'), /needs the volume's token/);

  // A sandbox that mounts it takes it over from the content API's own session, sees its files,
  // and sees what the API writes meanwhile at once (the API writes through it).
  const sandbox = await Sandbox.create({ ...opts, volumeMounts: { '/data': volume } });
  assert.equal((await sandbox.commands.run('cat /data/notes/a.txt')).stdout, 'replaced');
  assert.equal((await sandbox.commands.run('stat -c %u:%g:%a /data/notes/a.txt')).stdout, '1000:0:600\n');
  await volume.writeFile('/live.txt', 'live');
  assert.equal((await sandbox.commands.run('cat /data/live.txt')).stdout, 'live');
  await sandbox.commands.run('echo from-sandbox > /data/s.txt');
  assert.equal(await volume.readFile('/s.txt'), 'from-sandbox\n');
  await sandbox.kill();
  assert.equal(await volume.readFile('/live.txt'), 'live');
  // Destroying it ends the content API's session first.
  assert.equal(await Volume.destroy('e2b-files', opts), true);
  await assert.rejects(volume.getInfo('/'), /not volume e2b-files's/);
});
