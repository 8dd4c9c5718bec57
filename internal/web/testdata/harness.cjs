// What every browser script of the dashboard's tests shares: the
// environment runScript (browser_test.go) passes, steps and checks, the
// gateway's API out of band of the page, and run, which drives headless
// Chromium (playwright-core, Debian's /usr/bin/chromium) through a script's
// steps. A page must not throw, log an error or get a server error; at the
// first broken step run saves a failure screenshot, prints what the page
// and the browser said, and makes the script exit non-zero.
//   DASHBOARD_URL        the dashboard, e.g. http://127.0.0.1:PORT/ui/
//   DASHBOARD_ADMIN_KEY  an admin API key of that gateway
//   DASHBOARD_ARTIFACTS  where screenshots and saved pages go
//   DASHBOARD_CHROMIUM   the browser binary
//   PLAYWRIGHT_CORE      the installed playwright-core module directory
'use strict';

const path = require('node:path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const base = process.env.DASHBOARD_URL;
const env = {
  base,
  adminKey: process.env.DASHBOARD_ADMIN_KEY,
  artifacts: process.env.DASHBOARD_ARTIFACTS,
  origin: new URL(base).origin,
};
const TIMEOUT = 30000;

let current = 'start';

// step names what the script does next: the failure message says where it
// broke.
function step(name) {
  current = name;
  console.log(`step: ${name}`);
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// rest calls the gateway's API with key, out of band of the page.
async function rest(key, method, p, body) {
  const r = await fetch(env.origin + p, {
    method,
    // The API wants JSON on every write, with a body or not.
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
  return r.json();
}

// run launches the browser and calls body({ browser, newPage }); a
// failure to launch exits at once. newPage
// opens a page in a new context (options: viewport, default 1400×900)
// whose problems are collected; the last page opened is the one a failure
// is screenshot from. opts:
//   ignoreStatus  server error statuses the script expects (e.g. 501)
//   onlyGateway   every request must go to the gateway (or be a data: URL)
function run(body, opts = {}) {
  drive(body, opts).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

async function drive(body, opts) {
  const ignore = new Set(opts.ignoreStatus || []);
  const browser = await chromium.launch({
    executablePath: process.env.DASHBOARD_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  const consoleLog = [];
  let last;
  const newPage = async (viewport = { width: 1400, height: 900 }) => {
    const context = await browser.newContext({ viewport });
    context.setDefaultTimeout(TIMEOUT);
    const page = await context.newPage();
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      consoleLog.push(`${m.type()}: ${m.text()}`);
      // Chromium logs every non-2xx fetch: the app probes routes that may
      // not exist (404) and scripts are refused (401) on purpose. Server
      // errors are caught by the response check below.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console error: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 500 && !ignore.has(r.status())) problems.push(`${r.status()} from ${r.request().method()} ${r.url()}`);
    });
    if (opts.onlyGateway) {
      page.on('request', (r) => {
        const u = r.url();
        if (!u.startsWith(env.origin + '/') && !u.startsWith('data:')) problems.push(`request outside the gateway: ${u}`);
      });
    }
    last = page;
    return page;
  };
  try {
    await body({ browser, newPage });
    check(problems.length === 0, 'no page errors:\n  ' + problems.join('\n  '));
    console.log('ok: every step passed');
  } catch (err) {
    if (last) await last.screenshot({ path: path.join(env.artifacts, 'failure.png') }).catch(() => {});
    console.error(`FAILED at step "${current}": ${err.message}`);
    if (problems.length) console.error('page problems:\n  ' + problems.join('\n  '));
    if (consoleLog.length) console.error('browser console:\n  ' + consoleLog.join('\n  '));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

module.exports = { env, step, check, rest, run };
