// Drives the "Your account" panel of a credentials: per_user server in
// headless Chromium (playwright-core, Debian's /usr/bin/chromium); run by
// TestAccountPanelInBrowser, which passes what TestDashboardInBrowser
// passes to dashboard.cjs, and:
//   ACCOUNTS_USER_KEY  the API key of alice, no admin
//   ACCOUNTS_TOKEN     the personal token alice stores
// The pages as shown are saved to accounts-user.html and
// accounts-admin.html for the test to check. Exits non-zero, with a
// failure screenshot, at the first broken step.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { env, step, check, rest, run } = require('./harness.cjs');

const { base, adminKey, artifacts } = env;
const userKey = process.env.ACCOUNTS_USER_KEY;
const token = process.env.ACCOUNTS_TOKEN;

run(async ({ newPage }) => {
  let page;
  const open = async (key) => {
    page = await newPage();
    await page.goto(base);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.goto(base + '#/servers/crm');
    await page.getByRole('heading', { name: 'Your account' }).waitFor();
    return page;
  };

  step('alice opens crm: not linked');
  await open(userKey);
  const stateLine = page.locator('#account-status [data-field="account-state"]');
  await stateLine.waitFor();
  check((await stateLine.innerText()).includes('Not linked'), 'alice has nothing linked');

  step('alice stores a personal token');
  await page.getByLabel(/personal token/).fill(token);
  await page.getByRole('button', { name: 'Store the token' }).click();
  await page.locator('#main').getByText('Your token is stored.').waitFor();
  await page.waitForFunction(() => document.querySelector('#account-status').innerText.includes('Linked (bearer)'));
  check(await page.getByLabel(/personal token/).inputValue() === '', 'the form is emptied');
  check(await page.locator('#account-list tr').count() === 0, 'alice sees nobody else\u2019s accounts');
  const mine = await rest(userKey, 'GET', '/api/v1/me/accounts');
  check(mine.accounts.length === 1 && mine.accounts[0].kind === 'bearer', `alice's list: ${JSON.stringify(mine)}`);

  step('"Link my account" answers on the page');
  await page.getByRole('button', { name: 'Link my account' }).click();
  await page.waitForFunction(() => document.querySelector('#account-status').innerText.includes('Linking failed'));
  fs.writeFileSync(path.join(artifacts, 'accounts-user.html'), await page.content());

  step('the admin sees who linked what, never the token');
  await open(adminKey);
  const row = page.locator('#account-list tbody tr');
  await row.first().waitFor();
  check(await row.count() === 1, 'one linked account');
  const text = await row.first().innerText();
  check(text.includes('alice') && text.includes('bearer'), `the row names alice and bearer: ${text}`);
  fs.writeFileSync(path.join(artifacts, 'accounts-admin.html'), await page.content());
  await page.screenshot({ path: path.join(artifacts, 'accounts.png'), fullPage: true });

  step('the admin deletes alice\u2019s credential');
  await page.locator('#account-list button[data-subject="alice"]').click();
  await page.locator('#main').getByText('Deleted the credential of alice.').waitFor();
  await page.getByText('Nobody has linked an account yet.').waitFor();
  const left = await rest(userKey, 'GET', '/api/v1/me/accounts');
  check(left.accounts.length === 0, 'alice has nothing linked any more');
});
