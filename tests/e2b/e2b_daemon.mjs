// What the E2B tests share: their own airlockd (a private AIRLOCK_HOME that shares the host's
// images and kernel), its gateway's address, the airlock CLI, and an API key for E2B's SDK.
import { after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { privateHome } from '../pages/test_home.mjs';

// quotas: lines of an airlockd --quota-file, if the test needs other quotas than the default;
// templates: lines of an --e2b-templates file.
export async function startDaemon(airlock, prefix, { quotas, templates } = {}) {
  assert.ok(airlock, 'give the airlock binary');
  const airlockd = path.join(path.dirname(airlock), 'airlockd');
  const { home, env } = privateHome(prefix);
  if (quotas) {
    fs.writeFileSync(path.join(home, 'quotas'), quotas);
    env.AIRLOCK_QUOTA_FILE = path.join(home, 'quotas');
  }
  if (templates) {
    fs.writeFileSync(path.join(home, 'e2b-templates'), templates);
    env.AIRLOCK_E2B_TEMPLATES = path.join(home, 'e2b-templates');
  }
  const socket = path.join(home, 'airlockd.sock');
  const daemon = spawn(airlockd, ['--socket', socket], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  // The gateway's address, as airlockd says it at start.
  let said = '';
  const gateway = await new Promise((resolve, reject) => {
    daemon.stderr.on('data', (chunk) => {
      said += chunk;
      if (said.length > 1 << 20) said = said.slice(-(1 << 19));
      const m = said.match(/HTTP gateway on (http:\/\/[0-9.:]+)/);
      if (m) resolve(m[1]);
    });
    daemon.on('exit', () => reject(new Error(`airlockd ended: ${said}`)));
  });
  // What a test file leaves to do while airlockd still runs (its after hooks run later).
  const beforeStop = [];
  after(async () => {
    for (const f of beforeStop) await f();
    daemon.kill('SIGTERM');
    await new Promise((r) => (daemon.exitCode !== null ? r() : daemon.on('exit', r)));
    // What airlockd logged, for a failure's reason (ctest shows a test's output only then).
    process.stderr.write(`airlockd's log, last lines:\n${said.split('\n').slice(-60).join('\n')}\n`);
    fs.rmSync(home, { recursive: true, force: true });
  });
  function cli(...args) {
    const r = spawnSync(airlock, args, { env, encoding: 'utf8', timeout: 120000 });
    assert.equal(r.status, 0, `airlock ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }
  const key = cli('api-key', 'create', '--name', 'ci').trim();
  const opts = { apiKey: key, apiUrl: gateway, domain: 'airlock.localhost' };
  return { gateway, env, cli, key, opts, beforeStop };
}
