// What the page tests share: where screenshots go, and a private AIRLOCK_HOME for an airlockd
// of the test's own that shares the host's images and kernel.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const here = path.dirname(fileURLToPath(import.meta.url));

// $AIRLOCK_TEST_ARTIFACTS, default build/test-artifacts; made if missing.
export function artifactsDir() {
  const dir = process.env.AIRLOCK_TEST_ARTIFACTS ?? path.join(here, '../../build/test-artifacts');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// A new home under /tmp (`prefix` names it) and the environment that points the CLI at it.
export function privateHome(prefix) {
  const hostHome = process.env.AIRLOCK_HOME ?? '/var/lib/airlock';
  const home = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(home, 0o755);  // the VMM (uid 65534) reads the image through here
  fs.symlinkSync(path.join(hostHome, 'images'), path.join(home, 'images'));
  fs.mkdirSync(path.join(home, 'kernel'));
  fs.symlinkSync(fs.realpathSync(path.join(hostHome, 'kernel/vmlinux')), path.join(home, 'kernel/vmlinux'));
  const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_SOCKET: path.join(home, 'airlockd.sock'),
    AIRLOCK_HTTP_LISTEN: '127.0.0.1:0' };
  return { home, env };
}

// Debian's headless Chromium (or $CHROMIUM), driven by puppeteer-core; `options` add to the
// launch options (e.g. acceptInsecureCerts).
export function launchBrowser(options = {}) {
  return puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    ...options,
  });
}
