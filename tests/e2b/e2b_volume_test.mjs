// E2B's own SDK (npm `e2b`, pinned) on volumes, which airlockd serves with its own: a volume
// created, listed, looked up and destroyed through E2B's volume API (its id is its name), mounted
// into a sandbox with volumeMounts, its data there for the next sandbox after the first is gone,
// and a second writer refused (Airlock lets one sandbox write a volume at a time).
//
// Usage: node tests/e2b/e2b_volume_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, Volume } from 'e2b';
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
