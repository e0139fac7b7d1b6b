// `airlock expose` in Debian's headless Chromium (driven by puppeteer-core), as a person would
// use it: a web app started in a session with `airlock exec -d`, its URL opened in the browser.
// The token in the URL becomes a cookie of that host alone and leaves the address bar; the
// page's own script fetches more from the app (same origin, the cookie sent); a browser without
// the cookie is refused and sees none of the app. A screenshot is kept as a test artifact.
//
// Usage: node tests/pages/expose_page_test.mjs AIRLOCK_BINARY
// (as root, after scripts/setup.sh; runs its own airlockd on a private AIRLOCK_HOME that shares
// the host's images and kernel). Screenshots go to $AIRLOCK_TEST_ARTIFACTS (default
// build/test-artifacts).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { artifactsDir, privateHome, launchBrowser } from './test_home.mjs';

const [airlock] = process.argv.slice(2);
assert.ok(airlock, 'give the airlock binary');
const airlockd = path.join(path.dirname(airlock), 'airlockd');
const artifacts = artifactsDir();
const { home, env } = privateHome('airlock-exposetest-');
const socket = path.join(home, 'airlockd.sock');
const daemon = spawn(airlockd, ['--socket', socket], { env, stdio: ['ignore', 'ignore', 'inherit'] });

function cli(...args) {
  const r = spawnSync(airlock, args, { env, encoding: 'utf8', timeout: 120000 });
  assert.equal(r.status, 0, `airlock ${args.join(' ')}: ${r.stderr}`);
  return r;
}

const browser = await launchBrowser();

after(async () => {
  await browser.close();
  daemon.kill('SIGTERM');
  await new Promise((r) => (daemon.exitCode !== null ? r() : daemon.on('exit', r)));
  fs.rmSync(home, { recursive: true, force: true });
});

const page = `<!doctype html>
<title>app in a session</title>
<h1>An app in a session</h1>
<p id="out">loading</p>
<script>
fetch('data.json').then((r) => r.json()).then((d) => { document.getElementById('out').textContent = d.message; });
</script>
`;

test('an exposed web app opens in a browser, its token kept as a cookie of its host', async () => {
  for (let i = 0; i < 100 && !fs.existsSync(socket); i++) await new Promise((r) => setTimeout(r, 100));
  const id = cli('session', 'create').stdout.trim();
  const wrote = spawnSync(airlock, ['exec', '-i', id, '--', 'sh', '-c',
    'mkdir -p /srv && cat > /srv/index.html'], { env, input: page, timeout: 120000 });
  assert.equal(wrote.status, 0, String(wrote.stderr));
  cli('exec', id, '--', 'sh', '-c', 'echo \'{"message": "fetched from the guest"}\' > /srv/data.json');
  const started = cli('exec', '-d', '-w', '/srv', id, '--', 'python3', '-m', 'http.server', '8000');
  assert.match(started.stderr, /detached; its output goes to/);
  cli('exec', id, '--', 'sh', '-c', 'until python3 -c "import socket; ' +
    'socket.create_connection((\'127.0.0.1\', 8000))" 2>/dev/null; do sleep 0.2; done');
  const url = new URL(cli('expose', id, '8000').stdout.trim());
  assert.equal(url.hostname, `8000-${id}.airlock.localhost`);
  const token = url.searchParams.get('airlock_token');

  const context = await browser.createBrowserContext();
  const tab = await context.newPage();
  const errors = [];
  tab.on('pageerror', (e) => errors.push(String(e)));
  const response = await tab.goto(url.href, { waitUntil: 'networkidle0' });
  assert.equal(response.status(), 200);
  // The token left the address bar, and lives on as a cookie of this host alone.
  assert.equal(tab.url(), `${url.origin}/`);
  await tab.waitForFunction(() => document.getElementById('out').textContent !== 'loading');
  assert.equal(await tab.$eval('#out', (e) => e.textContent), 'fetched from the guest');
  const cookies = await tab.cookies();
  const cookie = cookies.find((c) => c.name === 'airlock_token');
  assert.ok(cookie, JSON.stringify(cookies));
  assert.equal(cookie.value, token);
  assert.equal(cookie.domain, url.hostname);
  assert.equal(cookie.httpOnly, true);
  await tab.screenshot({ path: path.join(artifacts, 'expose-page.png') });
  // Again later: the cookie alone is enough (304: the browser's cache asked the app).
  const again = await tab.goto(`${url.origin}/data.json`);
  assert.ok([200, 304].includes(again.status()), String(again.status()));
  assert.deepEqual(errors, []);
  await context.close();

  // A browser without the token gets the gateway's refusal, not the app.
  const stranger = await browser.createBrowserContext();
  const other = await stranger.newPage();
  const refused = await other.goto(`${url.origin}/`);
  assert.equal(refused.status(), 401);
  const text = await other.evaluate(() => document.body.innerText);
  assert.match(text, /needs its token/);
  assert.doesNotMatch(text, /An app in a session/);
  await stranger.close();
  cli('rm', id);
});
