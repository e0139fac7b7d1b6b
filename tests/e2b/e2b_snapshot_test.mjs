// E2B's own SDK (npm `e2b`, pinned) on forks and snapshots, which airlockd serves with its own
// fork: a sandbox forked into several that start from its memory and files and then go their
// own ways; a snapshot kept (paused, never ending) under a name, new sandboxes created from it,
// listed by sandbox and name, replaced by a newer one of the same name, and deleted.
//
// Usage: node tests/e2b/e2b_snapshot_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NotFoundError, Sandbox } from 'e2b';
import { startDaemon } from './e2b_daemon.mjs';

const [airlock] = process.argv.slice(2);
const { cli, opts: control, beforeStop } = await startDaemon(airlock, 'airlock-e2bsnap-');
const opts = { ...control, sandboxUrl: control.apiUrl };

const source = await Sandbox.create({ ...opts, metadata: { role: 'source' }, envs: { WHO: 'ada' } });
beforeStop.push(() => source.kill());
// State in a file and in a running process, which forks and snapshots keep.
await source.files.write('/root/state.txt', 'before');
await source.commands.run('setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! > /root/sleeper.pid');

async function sleeperRuns(sandbox) {
  const r = await sandbox.commands.run('kill -0 $(cat /root/sleeper.pid) && echo alive');
  return r.stdout.trim() === 'alive';
}

test('a fork starts from the sandbox as it was and goes its own way', async () => {
  const forks = await source.fork({ count: 2, timeoutMs: 120_000 });
  assert.equal(forks.length, 2);
  for (const f of forks) {
    assert.ok(f instanceof Sandbox, String(f));
    beforeStop.push(() => f.kill());
    assert.notEqual(f.sandboxId, source.sandboxId);
    assert.equal(await f.files.read('/root/state.txt'), 'before');
    assert.ok(await sleeperRuns(f));
    assert.equal((await f.commands.run('echo $WHO')).stdout, 'ada\n');
    const info = await f.getInfo();
    assert.deepEqual(info.metadata, { role: 'source' });
    const lifetime = info.endAt.getTime() - Date.now();
    assert.ok(lifetime > 100_000 && lifetime <= 121_000, String(lifetime));
  }
  await forks[0].files.write('/root/state.txt', 'fork 0');
  assert.equal(await forks[1].files.read('/root/state.txt'), 'before');
  assert.equal(await source.files.read('/root/state.txt'), 'before');
  assert.equal((await source.getInfo()).state, 'running');
  await forks[0].kill();
  await forks[1].kill();
  await assert.rejects(Sandbox.fork('0123456789ab', { ...opts, count: 1 }), NotFoundError);
});

test('a snapshot is a template: sandboxes are created from it, it is listed and deleted', async () => {
  const snap = await source.createSnapshot({ name: 'with-state' });
  assert.equal(snap.snapshotId, 'with-state');
  assert.deepEqual(snap.names, ['with-state']);
  await source.files.write('/root/state.txt', 'after');

  const made = await Sandbox.create('with-state', { ...opts, metadata: { role: 'copy' } });
  beforeStop.push(() => made.kill());
  assert.equal(await made.files.read('/root/state.txt'), 'before');
  assert.ok(await sleeperRuns(made));
  const info = await made.getInfo();
  assert.equal(info.templateId, 'with-state');
  assert.deepEqual(info.metadata, { role: 'copy' });

  // A snapshot is not a sandbox: not listed as one, not reachable, not resumed.
  const sandboxes = (await Sandbox.list(opts).nextItems()).map((s) => s.sandboxId);
  assert.ok(sandboxes.includes(made.sandboxId) && sandboxes.includes(source.sandboxId));
  assert.equal(sandboxes.length, 2, JSON.stringify(sandboxes));

  // An unnamed one goes by its id; listed by the sandbox it was taken of and by name.
  const plain = await Sandbox.createSnapshot(made.sandboxId, opts);
  assert.match(plain.snapshotId, /^[0-9a-f]{12}$/);
  assert.deepEqual(plain.names, []);
  await assert.rejects(Sandbox.connect(plain.snapshotId, opts), NotFoundError);
  const ofSource = await Sandbox.listSnapshots({ ...opts, sandboxId: source.sandboxId }).nextItems();
  assert.deepEqual(ofSource.map((s) => s.snapshotId), ['with-state']);
  const byName = await Sandbox.listSnapshots({ ...opts, name: 'with-state' }).nextItems();
  assert.deepEqual(byName.map((s) => s.snapshotId), ['with-state']);
  const all = await Sandbox.listSnapshots(opts).nextItems();
  assert.deepEqual(all.map((s) => s.snapshotId).sort(), [plain.snapshotId, 'with-state'].sort());

  // A name taken again moves to the new snapshot; the older one is gone.
  await source.createSnapshot({ name: 'with-state' });
  const renamed = await Sandbox.create('with-state', opts);
  beforeStop.push(() => renamed.kill());
  assert.equal(await renamed.files.read('/root/state.txt'), 'after');
  assert.equal((await Sandbox.listSnapshots(opts).nextItems()).length, 2);

  assert.equal(await Sandbox.deleteSnapshot('with-state', opts), true);
  assert.equal(await Sandbox.deleteSnapshot('with-state', opts), false);
  assert.equal(await Sandbox.deleteSnapshot(plain.snapshotId, opts), true);
  assert.deepEqual(await Sandbox.listSnapshots(opts).nextItems(), []);
  await assert.rejects(Sandbox.create('with-state', opts), /no template with-state/);
  // Snapshots are sessions of the tenant (paused), audited; deleted ones are removed.
  assert.match(cli('audit', '-n', '500'), /snapshot deleted through the E2B API/);
});
