// Drives the server page of an OAuth-protected server in NEEDS_AUTH in
// headless Chromium (playwright-core, Debian's /usr/bin/chromium) against a
// real gateway; run by TestUpstreamConnectInBrowser, with what
// TestDashboardInBrowser passes to dashboard.cjs. The server's
// authorization server approves at once, so following the link the page
// gives ends at the gateway's callback. The page as shown at the end is
// saved to upstreamauth.html for the test to check. Exits non-zero, with a
// failure screenshot, at the first broken step.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const base = process.env.DASHBOARD_URL;
const adminKey = process.env.DASHBOARD_ADMIN_KEY;
const artifacts = process.env.DASHBOARD_ARTIFACTS;
const origin = new URL(base).origin;
const TIMEOUT = 30000;

let current = 'start';
function step(name) {
  current = name;
  console.log(`step: ${name}`);
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function rest(method, p) {
  const r = await fetch(origin + p, { method, headers: { Authorization: 'Bearer ' + adminKey } });
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
  return r.json();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.DASHBOARD_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  const consoleLog = [];
  let page;
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    context.setDefaultTimeout(TIMEOUT);
    page = await context.newPage();
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      consoleLog.push(`${m.type()}: ${m.text()}`);
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console error: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 500) problems.push(`${r.status()} from ${r.request().method()} ${r.url()}`);
    });

    step('sign in and open the server page');
    await page.goto(base);
    await page.getByLabel('API key').fill(adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.goto(base + '#/servers/prot');
    await page.getByRole('heading', { name: 'Authorization (OAuth)' }).waitFor();

    step('the server is NEEDS_AUTH, and the page says why');
    check((await page.locator('#server-status').innerText()).includes('NEEDS_AUTH'), 'the status badge says NEEDS_AUTH');
    await page.locator('#upstream-auth').getByText('not authorized').waitFor();
    check((await page.locator('#main').innerText()).includes('servers auth prot'), 'the reason names how to authorize');

    step('Connect with OAuth gives the authorization page');
    await page.getByRole('button', { name: 'Connect with OAuth' }).click();
    const link = page.locator('#upstream-auth-link');
    await link.waitFor();
    const href = await link.getAttribute('href');
    check(href && href.includes('/authorize?') && href.includes('code_challenge_method=S256'), `the link is the authorization request, got ${href}`);
    check((await link.getAttribute('target')) === '_blank' && (await link.getAttribute('rel')).includes('noopener'), 'it opens apart, without an opener');
    await page.screenshot({ path: path.join(artifacts, 'upstreamauth-pending.png'), fullPage: true });

    step('approve in another tab: the gateway\u2019s callback ends the flow');
    const [popup] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
    await popup.waitForLoadState();
    check(new URL(popup.url()).pathname === '/oauth/upstream/callback', `the approval returns to the callback, got ${popup.url()}`);
    await popup.close();

    step('the page follows: authorized, CONNECTED, without a restart');
    await page.locator('#upstream-auth').getByText('authorized (authorization_code)').waitFor();
    await page.locator('#server-status').getByText('CONNECTED').waitFor();
    check((await page.locator('[data-field="flow-state"]').innerText()).startsWith('done'), 'the last authorization is done');
    const s = await rest('GET', '/api/v1/aggregator/servers/prot');
    check(s.status === 'CONNECTED' && s.restarts === 0, `the gateway shows it connected, got ${s.status}, ${s.restarts} restarts`);
    await page.screenshot({ path: path.join(artifacts, 'upstreamauth.png'), fullPage: true });
    fs.writeFileSync(path.join(artifacts, 'upstreamauth.html'), await page.content());

    check(problems.length === 0, 'no page errors:\n  ' + problems.join('\n  '));
    console.log('ok: every step passed');
  } catch (err) {
    if (page) await page.screenshot({ path: path.join(artifacts, 'failure.png') }).catch(() => {});
    console.error(`FAILED at step "${current}": ${err.message}`);
    if (problems.length) console.error('page problems:\n  ' + problems.join('\n  '));
    if (consoleLog.length) console.error('browser console:\n  ' + consoleLog.join('\n  '));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
