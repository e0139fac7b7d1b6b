// Loads `airlock log --html` pages in Debian's headless Chromium (driven by puppeteer-core) as a
// person would read them: a real session's timeline whose commands printed hostile strings, and
// a large page of 10,000 events. Nothing may run but the page's own script (no dialogs), nothing
// may be fetched, the console stays clean, the hostile strings show as text, and the search box
// and filters narrow the events. A screenshot of each page is kept as a test artifact.
//
// Usage: node tests/timeline/timeline_page_test.mjs AIRLOCK_BINARY TIMELINE_PAGE_FIXTURE
// (as root, after scripts/setup.sh; runs its own airlockd on a private AIRLOCK_HOME that shares
// the host's images and kernel). Screenshots go to $AIRLOCK_TEST_ARTIFACTS (default
// build/test-artifacts).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { artifactsDir, privateHome, launchBrowser } from './test_home.mjs';

const [airlock, fixture] = process.argv.slice(2);
assert.ok(airlock && fixture, 'give the airlock binary and timeline_page_fixture');
const artifacts = artifactsDir();
const { home, env } = privateHome('airlock-timelinetest-');
const cli = (...args) => execFileSync(airlock, args, { env, encoding: 'utf8' });

const browser = await launchBrowser();

after(async () => {
  await browser.close();
  const pidFile = path.join(home, 'airlockd.pid');
  if (fs.existsSync(pidFile)) {
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    try { process.kill(pid, 'SIGTERM'); } catch {}
    for (let i = 0; i < 100; i++) {
      try { process.kill(pid, 0); } catch { break; }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  fs.rmSync(home, { recursive: true, force: true });
});

// Opens a page, recording everything that must not happen on it.
async function open(file) {
  const page = await browser.newPage();
  const trouble = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') trouble.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => trouble.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => { trouble.push(`dialog: ${d.message()}`); await d.dismiss(); });
  await page.setRequestInterception(true);
  page.on('request', (r) => {
    if (r.url() === `file://${file}`) return r.continue();
    trouble.push(`request: ${r.url()}`);
    r.abort();
  });
  await page.setViewport({ width: 1280, height: 900 });
  const started = Date.now();
  await page.goto(`file://${file}`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  return { page, trouble, readyMs: Date.now() - started };
}

const shownCount = (page) => page.$eval('#count', (e) => e.textContent);
const articleTexts = (page) => page.$$eval('article', (as) => as.map((a) => a.textContent));

test('a real session: hostile output is text, nothing runs, search and filters work', async () => {
  const id = cli('session', 'create').trim();
  const hostile = 'printf \'</script><script>alert(1)</script> <img src=x onerror=alert(2)> ' +
    '<a href="javascript:alert(3)">click</a> \\033[31mred\\033[0m \\377\\376 end\\n\'; ' +
    'echo second-line >&2; exit 5';
  assert.throws(() => cli('exec', id, '--', 'sh', '-c', hostile));
  cli('exec', id, '--', 'sh', '-c', 'echo findme-marker');
  execFileSync(airlock, ['file', 'write', id, '/tmp/note'], { env, input: 'x' });
  cli('rm', id);
  const file = path.join(home, 'timeline.html');
  cli('log', id, '--html', file);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);

  const { page, trouble } = await open(file);
  await page.screenshot({ path: path.join(artifacts, 'timeline-session.png'), fullPage: true });
  const texts = await articleTexts(page);
  const all = texts.join('\n');
  for (const kind of ['session.create', 'exec #', 'file.write', 'session.remove']) {
    assert.ok(all.includes(kind), `the page shows ${kind}`);
  }
  // The hostile output is there as text; none of it became an element.
  await page.$$eval('details', (ds) => ds.forEach((d) => { d.open = true; }));
  const pres = (await page.$$eval('pre', (ps) => ps.map((p) => p.textContent))).join('\n');
  assert.ok(pres.includes('</script><script>alert(1)</script>'), pres);
  assert.ok(pres.includes('<img src=x onerror=alert(2)>'));
  assert.ok(pres.includes('javascript:alert(3)'));
  assert.ok(pres.includes('\u001b[31mred'));
  assert.ok(pres.includes('\\xff\\xfe end'));
  assert.equal(await page.$$eval('img', (x) => x.length), 0);
  assert.equal(await page.$$eval('script', (x) => x.length), 2);
  const hrefs = await page.$$eval('a', (as) => as.map((a) => a.getAttribute('href')));
  assert.ok(hrefs.every((h) => /^#ev-\d+$/.test(h)), hrefs.join(' '));

  // Typing in the search box narrows the events to those that mention it: the command, and
  // the activity record's start of its shell.
  await page.type('#q', 'findme-marker');
  await page.waitForFunction(() => /^[12] of/.test(document.getElementById('count').textContent));
  const found = await articleTexts(page);
  assert.ok(found.every((t) => t.includes('findme-marker')), found.join('\n'));
  assert.ok(found.some((t) => t.includes('exec #') && t.includes('echo findme-marker')));
  assert.match(await shownCount(page), /^[12] of \d+ events$/);
  await page.$eval('#q', (q) => { q.value = ''; q.dispatchEvent(new Event('input')); });
  await page.waitForFunction(() => document.querySelectorAll('article').length > 1);
  // Unticking a kind hides it.
  await page.click('#kinds input[value="exec"]');
  assert.equal(await page.$$eval('article.exec', (a) => a.length), 0);
  // No agent ran here, so nothing is activity an agent did not mention.
  await page.click('#unmentioned');
  await page.waitForFunction(() => document.getElementById('count').textContent.startsWith('0 of'));
  assert.deepEqual(trouble, []);
  await page.close();
});

test('10,000 events: the page renders lazily and search still works', async () => {
  const file = path.join(home, 'large.html');
  execFileSync(fixture, ['10000', file]);
  const { page, trouble, readyMs } = await open(file);
  console.log(`# 10,000 events: ready in ${readyMs} ms (first paint of ${await page.$$eval('article', (a) => a.length)} events)`);
  await page.screenshot({ path: path.join(artifacts, 'timeline-large.png') });
  assert.equal(await shownCount(page), '10000 of 10000 events');
  assert.ok((await page.$$eval('article', (a) => a.length)) < 1000, 'only the first events are drawn');
  // Scrolling to the end draws more.
  const before = await page.$$eval('article', (a) => a.length);
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await page.waitForFunction((n) => document.querySelectorAll('article').length > n, {}, before);
  await page.type('#q', 'step-9995');
  await page.waitForFunction(() => document.getElementById('count').textContent.startsWith('1 of'));
  // A tool call links to the command it ran in, which is drawn and marked when followed.
  await page.$eval('#q', (q) => { q.value = 'toolu_9996'; q.dispatchEvent(new Event('input')); });
  await page.waitForFunction(() => document.getElementById('count').textContent.startsWith('2 of'));
  await page.click('article.agent .links a');
  await page.waitForSelector('article.target');
  // Only what the agent did not mention: the fixture's activity writes (every tenth event).
  await page.$eval('#q', (q) => { q.value = ''; q.dispatchEvent(new Event('input')); });
  await page.click('#unmentioned');
  await page.waitForFunction(() => document.getElementById('count').textContent.startsWith('1000 of'));
  const flagged = await page.$$eval('article', (as) => as.map((a) => a.className));
  assert.ok(flagged.every((c) => c.includes('activity') && c.includes('unmentioned')), flagged[0]);
  assert.equal(await page.$$eval('img', (x) => x.length), 0);
  assert.deepEqual(trouble, []);
  await page.close();
});
