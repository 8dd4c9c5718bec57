// Drives the dashboard's OAuth page in headless Chromium (playwright-core,
// Debian's /usr/bin/chromium) against the API with a real authorization
// server; run by TestOAuthPageInBrowser, which passes what
// TestDashboardInBrowser passes to dashboard.cjs, and:
//   OAUTH_DESKTOP, OAUTH_REMOTE  the client IDs of "Claude Desktop" and "mcp-remote"
//   OAUTH_GRANT_ALICE_REMOTE     alice's grant to mcp-remote (revoked here)
//   OAUTH_GRANT_BOB              bob's grant to mcp-remote (left alone)
// alice also has a grant to Claude Desktop, which is deleted here. The page
// as shown is saved to oauth.html for the test to check. Exits non-zero,
// with a failure screenshot, at the first broken step.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const base = process.env.DASHBOARD_URL;
const adminKey = process.env.DASHBOARD_ADMIN_KEY;
const artifacts = process.env.DASHBOARD_ARTIFACTS;
const desktop = process.env.OAUTH_DESKTOP;
const remote = process.env.OAUTH_REMOTE;
const revoked = process.env.OAUTH_GRANT_ALICE_REMOTE;
const bob = process.env.OAUTH_GRANT_BOB;
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
      // The events stream is not enabled here (404): Chromium logs it.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console error: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 500) problems.push(`${r.status()} from ${r.request().method()} ${r.url()}`);
    });

    step('sign in and open the OAuth page');
    await page.goto(base);
    await page.getByLabel('API key').fill(adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'OAuth', exact: true }).click();
    await page.getByRole('heading', { name: 'OAuth', level: 1 }).waitFor();

    step('the clients are listed with their active grants');
    const desktopRow = page.locator(`#oauth-clients tr[data-client="${desktop}"]`);
    const remoteRow = page.locator(`#oauth-clients tr[data-client="${remote}"]`);
    await desktopRow.waitFor();
    check((await desktopRow.innerText()).includes('Claude Desktop'), 'the desktop client is named');
    check((await desktopRow.innerText()).includes('client_secret_post'), 'its auth method is shown');
    check((await remoteRow.locator('td.num').innerText()).trim() === '2', 'mcp-remote has 2 active grants');
    check((await desktopRow.locator('td.num').innerText()).trim() === '1', 'Claude Desktop has 1 active grant');

    step('the grants are listed, active ones only');
    await page.locator(`#oauth-grants tr[data-grant="${revoked}"]`).waitFor();
    check(await page.locator('#oauth-grants tbody tr').count() === 3, 'three active grants');
    await page.screenshot({ path: path.join(artifacts, 'oauth.png'), fullPage: true });
    fs.writeFileSync(path.join(artifacts, 'oauth.html'), await page.content());

    step('revoking asks first; dismissed, nothing happens');
    page.once('dialog', (d) => d.dismiss());
    await page.getByRole('button', { name: 'Revoke grant of alice to mcp-remote' }).click();
    check((await rest('GET', '/api/v1/oauth/grants?active=true')).grants.some((g) => g.id === revoked), 'the grant is still active');

    step('revoke alice\u2019s grant to mcp-remote');
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Revoke grant of alice to mcp-remote' }).click();
    await page.locator('#main').getByText('Revoked the grant of alice to mcp-remote.').waitFor(); // #announce says it too
    await page.locator(`#oauth-grants tr[data-grant="${revoked}"]`).waitFor({ state: 'detached' });
    check((await remoteRow.locator('td.num').innerText()).trim() === '1', 'mcp-remote has 1 active grant left');
    const after = (await rest('GET', '/api/v1/oauth/grants?subject=alice')).grants.find((g) => g.id === revoked);
    check(after && !after.active && after.revoked_reason === 'revoked by ops', `the gateway revoked it, got ${JSON.stringify(after)}`);

    step('the revoked grant shows with everything');
    await page.getByLabel('Also revoked and expired').check();
    const revokedRow = page.locator(`#oauth-grants tr[data-grant="${revoked}"]`);
    await revokedRow.waitFor();
    check((await revokedRow.locator('[data-field="status"]').innerText()).includes('revoked by ops'), 'the status says who revoked it');
    check(await revokedRow.getByRole('button').count() === 0, 'no revoke button on a revoked grant');

    step('filter by user');
    await page.getByLabel('User (agent ID)').fill('bob');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForFunction((id) => {
      const rows = [...document.querySelectorAll('#oauth-grants tbody tr')];
      return rows.length === 1 && rows[0].dataset.grant === id;
    }, bob);
    await page.getByLabel('User (agent ID)').fill('');
    await page.getByRole('button', { name: 'Apply' }).click();
    await revokedRow.waitFor();

    step('delete Claude Desktop');
    page.once('dialog', (d) => {
      if (!d.message().includes('Its active grant is revoked')) problems.push(`the confirmation does not say what happens: ${d.message()}`);
      d.accept();
    });
    await page.getByRole('button', { name: 'Delete client Claude Desktop' }).click();
    await page.locator('#main').getByText('Deleted Claude Desktop; its grants are revoked.').waitFor();
    await desktopRow.waitFor({ state: 'detached' });
    const clients = await rest('GET', '/api/v1/oauth/clients');
    check(clients.clients.length === 1 && clients.clients[0].client_id === remote, 'the gateway deleted the client');
    const active = await rest('GET', '/api/v1/oauth/grants?active=true');
    check(active.grants.length === 1 && active.grants[0].id === bob, `only bob's grant is active, got ${active.grants.map((g) => g.id)}`);

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
