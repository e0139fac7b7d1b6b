// ComputeSDK's E2B provider (npm `@computesdk/e2b`, pinned), which benchmark suites use to drive
// E2B, pointed at airlockd's gateway with E2B's environment variables alone: a sandbox is made,
// runs commands, moves files, lists and is destroyed.
//
// Usage: node tests/e2b/computesdk_test.mjs AIRLOCK_BINARY   (as root, after scripts/setup.sh)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2b } from '@computesdk/e2b';
import { startDaemon } from './e2b_daemon.mjs';

const [airlock] = process.argv.slice(2);
const { gateway, key, cli } = await startDaemon(airlock, 'airlock-computesdk-');
// What a user of the provider sets: it passes only the key to E2B's SDK, which reads the rest.
Object.assign(process.env, { E2B_API_URL: gateway, E2B_SANDBOX_URL: gateway,
                             E2B_DOMAIN: 'airlock.localhost' });

test("ComputeSDK's E2B provider runs against Airlock unchanged", async () => {
  const sdk = e2b({ apiKey: key });
  const sandbox = await sdk.sandbox.create({ metadata: { suite: 'computesdk' } });
  assert.match(cli('ls'), new RegExp(`^${sandbox.sandboxId} `, 'm'));
  const version = await sandbox.runCommand('python3 -V');
  assert.equal(version.exitCode, 0, version.stderr);
  assert.match(version.stdout, /^Python 3\./);
  const there = await sandbox.runCommand('pwd', { cwd: '/tmp' });
  assert.equal(there.stdout, '/tmp\n');
  const failed = await sandbox.runCommand('exit 7');
  assert.equal(failed.exitCode, 7);

  await sandbox.filesystem.writeFile('/tmp/computesdk.txt', 'from computesdk');
  assert.equal(await sandbox.filesystem.readFile('/tmp/computesdk.txt'), 'from computesdk');
  assert.equal(await sandbox.getUrl({ port: 8000, protocol: 'http' }),
    `http://8000-${sandbox.sandboxId}.airlock.localhost`);

  const listed = await sdk.sandbox.list();
  assert.deepEqual(listed.map((s) => s.sandboxId), [sandbox.sandboxId]);
  await sandbox.destroy();
  assert.deepEqual(await sdk.sandbox.list(), []);
});
