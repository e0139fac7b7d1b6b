// `airlock dashboard` in Debian's headless Chromium (driven by puppeteer-core), as an operator
// would use it: a private airlockd with a TCP listener names the dashboard's client certificate
// as a read-only operator (--operator cert:dashboard); two tenants create sessions; the page
// (behind a token login, over HTTPS only) shows both tenants' sessions, updates when one is
// paused, and shows a command line with HTML in it as text. Nothing but the page's own script
// runs (no dialogs), the console stays clean. A screenshot is kept as a test artifact.
//
// Usage: node tests/pages/dashboard_page_test.mjs AIRLOCK_BINARY
// (as root, after scripts/setup.sh; runs its own airlockd on a private AIRLOCK_HOME that shares
// the host's images and kernel). Screenshots go to $AIRLOCK_TEST_ARTIFACTS (default
// build/test-artifacts).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { artifactsDir, privateHome, launchBrowser } from './test_home.mjs';

const [airlock] = process.argv.slice(2);
assert.ok(airlock, 'give the airlock binary');
const airlockd = path.join(path.dirname(airlock), 'airlockd');
const artifacts = artifactsDir();
const { home, env } = privateHome('airlock-dashboardtest-');
const socket = path.join(home, 'airlockd.sock');
delete env.AIRLOCK_OPERATORS;
const file = (name) => path.join(home, name);
const openssl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });

// A CA, airlockd's certificate, the dashboard's client certificate and its HTTPS certificate.
openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('ca.key'), '-out',
  file('ca.pem'), '-days', '2', '-subj', '/CN=airlock-dashboard-test-ca');
function issue(name, cn, san) {
  fs.writeFileSync(file(`${name}.ext`), `subjectAltName=${san}\n`);
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file(`${name}.key`), '-out',
    file(`${name}.csr`), '-subj', `/CN=${cn}`);
  openssl('x509', '-req', '-in', file(`${name}.csr`), '-CA', file('ca.pem'), '-CAkey', file('ca.key'),
    '-CAcreateserial', '-out', file(`${name}.pem`), '-days', '2', '-extfile', file(`${name}.ext`));
}
issue('server', 'airlock-test-server', 'DNS:airlock-test-server');
issue('dashboard', 'dashboard', 'DNS:dashboard');
issue('web', '127.0.0.1', 'IP:127.0.0.1');
const token = 'a-token-for-this-test-' + Date.now();
fs.writeFileSync(file('token'), token + '\n', { mode: 0o600 });

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}
const daemonPort = await freePort();
const webPort = await freePort();
const daemon = spawn(airlockd, ['--socket', socket, '--listen-tcp', `127.0.0.1:${daemonPort}`,
  '--tls-cert', file('server.pem'), '--tls-key', file('server.key'), '--tls-client-ca',
  file('ca.pem'), '--operator', 'cert:dashboard'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
const dashboardArgs = ['dashboard', '--listen', `127.0.0.1:${webPort}`, '--tls-cert', file('web.pem'),
  '--tls-key', file('web.key'), '--daemon', `127.0.0.1:${daemonPort}`, '--daemon-name',
  'airlock-test-server', '--client-cert', file('dashboard.pem'), '--client-key', file('dashboard.key'),
  '--ca', file('ca.pem'), '--token-file', file('token'), '--interval', '1'];
let dashboard;

// The page's certificate is the test CA's.
const browser = await launchBrowser({ acceptInsecureCerts: true });

after(async () => {
  await browser.close();
  dashboard?.kill('SIGTERM');
  daemon.kill('SIGTERM');
  await new Promise((r) => (daemon.exitCode !== null ? r() : daemon.on('exit', r)));
  fs.rmSync(home, { recursive: true, force: true });
});

const cli = (args, as) => {
  // Another tenant: a user of its own in the airlock group (which may use the socket).
  const argv = as ? ['setpriv', `--reuid=${as}`, `--regid=${as}`, `--groups=${airlockGid()}`, airlock, ...args]
    : [airlock, ...args];
  const r = spawnSync(argv[0], argv.slice(1), { env, encoding: 'utf8' });
  assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};
function airlockGid() {
  const line = fs.readFileSync('/etc/group', 'utf8').split('\n').find((l) => l.startsWith('airlock:'));
  assert.ok(line, 'the airlock group exists (scripts/setup.sh makes it)');
  return line.split(':')[2];
}

async function until(what, check, ms = 60000) {
  const end = Date.now() + ms;
  for (;;) {
    try { if (await check()) return; } catch {}
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const get = (url, options = {}) => new Promise((resolve, reject) => {
  const mod = url.startsWith('https:') ? https : http;
  const req = mod.get(url, { rejectUnauthorized: false, ...options }, (res) => {
    let body = '';
    res.on('data', (d) => { body += d; });
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
  });
  req.on('error', reject);
  req.setTimeout(5000, () => req.destroy(new Error('timeout')));
});

test('the dashboard refuses to serve without TLS', () => {
  const r = spawnSync(airlock, ['dashboard', '--listen', '127.0.0.1:1'], { env, encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /serves HTTPS only: give --tls-cert and --tls-key/);
});

test('the dashboard refuses to serve other machines without a token', () => {
  const args = dashboardArgs.filter((a, i) => a !== '--token-file' && dashboardArgs[i - 1] !== '--token-file');
  for (const listen of ['0.0.0.0:1', '[::]:1', '192.0.2.1:1']) {
    const r = spawnSync(airlock, args.map((a) => (a === `127.0.0.1:${webPort}` ? listen : a)),
                        { env, encoding: 'utf8' });
    assert.equal(r.status, 2, listen);
    assert.match(r.stderr, /others can reach: give --token-file FILE/, listen);
  }
});

test('two tenants\' sessions, live updates, HTML shown as text, no writes', async () => {
  await until('airlockd', () => fs.existsSync(socket));
  const mine = cli(['session', 'create']).trim();
  const theirs = cli(['session', 'create'], 61001).trim();
  const hostile = '<img src=x onerror=alert(1)><script>alert(2)</script>';
  cli(['exec', theirs, '--', 'echo', hostile], 61001);

  dashboard = spawn(airlock, dashboardArgs, { env, stdio: ['ignore', 'ignore', 'inherit'] });
  await until('the dashboard', async () => (await get(`https://127.0.0.1:${webPort}/login`)).status === 200);
  // Plain HTTP gets no page: the port speaks TLS only.
  await assert.rejects(get(`http://127.0.0.1:${webPort}/`));
  // Without signing in there is nothing to read.
  const api = await get(`https://127.0.0.1:${webPort}/api/state`);
  assert.equal(api.status, 401);
  assert.match(api.headers['content-security-policy'], /script-src 'self'/);

  const page = await browser.newPage();
  const trouble = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') trouble.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => trouble.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => { trouble.push(`dialog: ${d.message()}`); await d.dismiss(); });
  page.on('request', (r) => {
    if (!r.url().startsWith(`https://127.0.0.1:${webPort}/`)) trouble.push(`request: ${r.url()}`);
  });
  await page.setViewport({ width: 1400, height: 1000 });
  await page.goto(`https://127.0.0.1:${webPort}/`);
  await page.waitForSelector('input#token');  // sent to the login form first
  await page.type('input#token', 'not-the-token-at-all');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  assert.match(await page.$eval('.refused', (e) => e.textContent), /not this dashboard's token/);
  // The browser logs the refusal's 401 itself; nothing else may be in the console.
  assert.deepEqual(trouble.filter((t) => !/status of 401/.test(t)), []);
  trouble.length = 0;
  await page.type('input#token', token);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);

  const row = (id) => page.$eval(`tr[data-session="${id}"]`, (r) => r.textContent).catch(() => '');
  await until('both tenants\' sessions on the page', async () =>
    (await row(mine)).includes('uid:0') && (await row(theirs)).includes('uid:61001'))
    .catch(async (e) => {
      await page.screenshot({ path: path.join(artifacts, 'dashboard-failed.png'), fullPage: true });
      throw new Error(`${e.message}; the page says: ${await page.$eval('body', (b) => b.innerText)}`);
    });
  assert.match(await row(theirs), /running/);
  const tenants = await page.$eval('#tenants tbody', (t) => t.textContent);
  assert.ok(tenants.includes('uid:0') && tenants.includes('uid:61001'), tenants);
  // Samples arrive: a sparkline with a line in it for a running session.
  await until('a sparkline', async () =>
    (await page.$$eval(`tr[data-session="${theirs}"] svg polyline`, (l) => l.length)) >= 1);

  // The command line with HTML in it, as text, in the recent commands.
  cli(['exec', theirs, '--', 'echo', hostile], 61001);
  await until('the command on the page', async () =>
    (await page.$eval('#execs', (e) => e.textContent)).includes(hostile));
  assert.equal(await page.$$eval('main img', (x) => x.length), 0);
  assert.equal(await page.$$eval('script', (x) => x.length), 1);

  // Pausing a session shows on the page without a reload.
  cli(['pause', theirs], 61001);
  await until('the pause on the page', async () => /paused/.test(await row(theirs)));
  assert.match(await page.$eval('#states', (e) => e.textContent), /1\s*paused/);
  await page.screenshot({ path: path.join(artifacts, 'dashboard.png'), fullPage: true });

  assert.deepEqual(trouble, []);
  await page.close();
  cli(['rm', mine]);
  cli(['rm', theirs], 61001);
});
