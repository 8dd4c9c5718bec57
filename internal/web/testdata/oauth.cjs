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
const { env, step, check, rest: restAs, run } = require('./harness.cjs');

const { base, adminKey, artifacts } = env;
const desktop = process.env.OAUTH_DESKTOP;
const remote = process.env.OAUTH_REMOTE;
const revoked = process.env.OAUTH_GRANT_ALICE_REMOTE;
const bob = process.env.OAUTH_GRANT_BOB;
const rest = (method, p) => restAs(adminKey, method, p);

run(async ({ newPage }) => {
  const page = await newPage();

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
});
