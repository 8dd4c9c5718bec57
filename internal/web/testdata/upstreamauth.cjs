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
const { env, step, check, rest: restAs, run } = require('./harness.cjs');

const { base, adminKey, artifacts } = env;
const rest = (method, p) => restAs(adminKey, method, p);

run(async ({ newPage }) => {
  const page = await newPage();

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
});
