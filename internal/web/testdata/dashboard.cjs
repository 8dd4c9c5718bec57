// Drives the switchboard dashboard in headless Chromium (playwright-core,
// Debian's /usr/bin/chromium) against a running gateway; run by
// TestDashboardInBrowser, which passes:
//   DASHBOARD_URL        the dashboard, e.g. http://127.0.0.1:PORT/ui/
//   DASHBOARD_ADMIN_KEY  an admin API key of that gateway
//   DASHBOARD_ARTIFACTS  where screenshots go
//   DASHBOARD_CHROMIUM   the browser binary
//   PLAYWRIGHT_CORE      the installed playwright-core module directory
// Every request must stay on the gateway. Exits non-zero, with a failure
// screenshot, at the first broken step (see harness.cjs).
'use strict';

const path = require('node:path');
const { env, step, check, rest: restAs, run } = require('./harness.cjs');

const { base, adminKey, artifacts, origin } = env;
const rest = (method, p, body) => restAs(adminKey, method, p, body);

// A 501 (not_configured) is a feature this gateway has not set up, such
// as per-user accounts: the page asks for it and says so.
run(async ({ newPage }) => {
  const page = await newPage({ width: 1280, height: 800 });

  step('open the dashboard: it asks for a key');
  await page.goto(base);
  const keyInput = page.getByLabel('API key');
  await keyInput.waitFor();

  step('a wrong key is refused');
  await keyInput.fill('sb_not_a_key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('That key was not accepted').waitFor();

  step('sign in with the admin key');
  await keyInput.fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const demoStatus = page.locator('#servers tr[data-server="demo"] [data-field="status"]');
  await demoStatus.getByText('CONNECTED', { exact: true }).waitFor();
  await page.locator('#live.on').waitFor(); // the events stream is open
  check(await page.getByRole('link', { name: 'Audit log' }).isVisible(), 'admin links are shown to an admin');
  const row = page.locator('#servers tr[data-server="demo"]');
  check(/\d/.test(await row.locator('td').nth(2).innerText()), 'the tool count is shown');
  check(/^\d+$/.test((await row.locator('td').nth(3).innerText()).trim()), 'the pid is shown');
  await page.screenshot({ path: path.join(artifacts, 'servers.png') });

  step('the tools page lists the demo tools');
  await page.getByRole('link', { name: 'Tools', exact: true }).click();
  await page.locator('#tools tr[data-tool="demo.add"]').waitFor();
  const total = await page.locator('#tools tbody tr').count();
  check(total >= 5, `at least 5 tools listed, got ${total}`);

  step('search for a tool');
  await page.getByLabel('Search tools').fill('add two numbers');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await page.waitForFunction(() => {
    const first = document.querySelector('#tools tbody tr');
    return first && first.dataset.tool === 'demo.add' && document.querySelectorAll('#tools tbody tr').length < 5;
  });

  step('call the tool from the "try it" form');
  await page.getByRole('link', { name: 'demo.add', exact: true }).click();
  await page.locator('#try-it').waitFor();
  await page.getByLabel('a *', { exact: true }).fill('2');
  await page.getByLabel('b *', { exact: true }).fill('40.5');
  await page.getByRole('button', { name: 'Call tool' }).click();
  await page.locator('#call-result .result-text').waitFor();
  const text = (await page.locator('#call-result .result-text').innerText()).trim();
  check(text === '42.5', `the result is 42.5, got ${JSON.stringify(text)}`);
  await page.screenshot({ path: path.join(artifacts, 'tool.png') });

  step('a bad argument is reported before calling');
  await page.getByLabel('a *', { exact: true }).fill('');
  await page.getByRole('button', { name: 'Call tool' }).click();
  await page.locator('#call-result').getByText('a is required').waitFor();

  step('disconnect and connect the server from its page');
  await page.getByRole('link', { name: 'demo', exact: true }).click();
  const status = page.locator('#server-status');
  await status.getByText('CONNECTED', { exact: true }).waitFor();
  await page.evaluate(() => { window.__notReloaded = true; });
  await page.getByRole('button', { name: 'Disconnect' }).click();
  await status.getByText('DISCONNECTED', { exact: true }).waitFor();
  await page.getByRole('button', { name: 'Connect', exact: true }).click();
  await status.getByText('CONNECTED', { exact: true }).waitFor();
  await page.locator('h2:has-text("Connection history") + div table').waitFor();
  await page.screenshot({ path: path.join(artifacts, 'server.png') });

  step('status changes made elsewhere appear live on the servers page');
  await page.getByRole('link', { name: 'Servers', exact: true }).click();
  await demoStatus.getByText('CONNECTED', { exact: true }).waitFor();
  await rest('POST', '/api/v1/aggregator/servers/demo/disconnect');
  await demoStatus.getByText('DISCONNECTED', { exact: true }).waitFor();
  await page.locator('#announce').getByText('demo: CONNECTED → DISCONNECTED').waitFor();
  await rest('POST', '/api/v1/aggregator/servers/demo/connect?wait=true');
  await demoStatus.getByText('CONNECTED', { exact: true }).waitFor();
  check(await page.evaluate(() => window.__notReloaded === true), 'the page was not reloaded');

  step('the audit log shows the call and the operations, and filters');
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.locator('#main table').getByText('server.disconnect').first().waitFor();
  await page.getByLabel('Tool', { exact: true }).fill('add');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('#main table tbody tr')];
    return rows.length > 0 && rows.every((r) => r.cells[4].textContent === 'add');
  });
  await page.getByLabel('Tool', { exact: true }).fill('');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.locator('#main table').getByText('server.disconnect').first().waitFor();
  await page.screenshot({ path: path.join(artifacts, 'audit.png') });

  step('the overview charts the calls, live');
  await page.getByRole('link', { name: 'Overview', exact: true }).click();
  await page.locator('#chart-calls svg').waitFor();
  const totalOf = async () => Number(((await page.locator('#overview-totals').innerText()).match(/^(\d+) call/) || [0, 0])[1]);
  const before = await totalOf();
  for (let i = 0; i < 50; i++) await rest('POST', '/api/v1/tools/call', { name: 'demo.echo', arguments: { text: `call ${i}` } });
  // No reload: the invocation.completed events redraw the page.
  await page.waitForFunction((n) => {
    const m = (document.querySelector('#overview-totals') || {}).textContent || '';
    return Number((m.match(/^(\d+) call/) || [0, 0])[1]) >= n;
  }, before + 50);
  for (const id of ['chart-calls', 'chart-latency', 'chart-server-calls', 'chart-tool-calls']) {
    const n = Number(await page.locator(`#${id} svg`).getAttribute('data-points'));
    check(n > 0, `chart ${id} has points with data, got ${n}`);
  }
  check(await page.locator('#chart-tool-calls polyline[data-series="demo.echo"]').count() === 1, 'demo.echo is among the top tools');
  await page.screenshot({ path: path.join(artifacts, 'overview.png'), fullPage: true });

  step('a server added in the UI connects');
  await page.getByRole('link', { name: 'Servers', exact: true }).click();
  await page.getByRole('link', { name: 'Add a server' }).click();
  await page.getByLabel('Name', { exact: true }).fill('added');
  await page.getByLabel('Command').fill('switchboard');
  await page.getByLabel('Arguments, one per line').fill('demo-server');
  await page.getByLabel('Environment, NAME=VALUE per line').fill('SWITCHBOARD_TEST_RUN_DEMO=${SWITCHBOARD_TEST_RUN_DEMO}'); // a reference, resolved by the gateway
  await page.screenshot({ path: path.join(artifacts, 'add-server.png') });
  await page.getByRole('button', { name: 'Add server' }).click();
  await page.locator('#server-status').getByText('CONNECTED', { exact: true }).waitFor();
  const added = await rest('GET', '/api/v1/aggregator/servers/added');
  check(added.source === 'api' && added.tool_count > 0, `the added server is a runtime server with tools, got ${added.source}, ${added.tool_count}`);

  step("edit the added server's definition: started before it is swapped in");
  const pidBefore = added.pid;
  await page.locator('#edit-definition').click();
  await page.getByLabel('Description (optional)').fill('edited in the UI');
  await page.getByLabel('Startup timeout, seconds (optional)').fill('20');
  await page.getByLabel('Restarts allowed in the window (optional)').fill('2');
  check((await page.getByLabel('Environment, NAME=VALUE per line').inputValue()).includes('=***'), 'secret values are shown masked');
  await page.getByRole('button', { name: 'Save definition' }).click();
  await page.locator('#server-status').getByText('CONNECTED', { exact: true }).waitFor();
  const edited = await rest('GET', '/api/v1/aggregator/servers/added');
  check(edited.startup_timeout_seconds === 20 && edited.max_restart_attempts === 2 && edited.restart_on_failure !== false,
    `the restart policy was saved, got ${edited.startup_timeout_seconds} s, ${edited.max_restart_attempts} restarts, restart ${edited.restart_on_failure}`);
  check(edited.description === 'edited in the UI' && edited.pid !== pidBefore && edited.status === 'CONNECTED',
    `the new definition runs in a new process with the masked values kept, got ${edited.description}, pid ${edited.pid} (was ${pidBefore}), ${edited.status}`);

  step('an edit that cannot start keeps the running definition');
  await page.locator('#edit-definition').click();
  await page.getByLabel('Command').fill('/nonexistent/switchboard-no-such-server');
  await page.getByRole('button', { name: 'Save definition' }).click();
  await page.locator('#server-form .msg.error').waitFor();
  check(/keeps its previous one/.test(await page.locator('#server-form').textContent()), 'the API says the server keeps its definition');
  const kept = await rest('GET', '/api/v1/aggregator/servers/added');
  check(kept.pid === edited.pid && kept.status === 'CONNECTED', `the server still runs its previous definition, got pid ${kept.pid}, ${kept.status}`);
  await page.locator('#server-form').getByRole('link', { name: 'Cancel' }).click();
  await page.locator('#server-status').getByText('CONNECTED', { exact: true }).waitFor();

  step('edit the added server: default access deny');
  await page.locator('#edit-access').selectOption('deny');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.locator('#server-edit').getByText('Saved.').waitFor();
  check((await rest('GET', '/api/v1/aggregator/servers/added')).default_access === 'deny', 'the gateway applied default_access');

  step('remove the added server');
  page.once('dialog', (d) => d.accept());
  await page.getByRole('button', { name: 'Remove server' }).click();
  await page.locator('#servers').waitFor();
  check(await page.locator('#servers tr[data-server="added"]').count() === 0, 'the removed server left the list');

  step("an invalid definition shows the API's error inline");
  await page.getByRole('link', { name: 'Add a server' }).click();
  await page.getByLabel('Name', { exact: true }).fill('broken');
  await page.getByRole('button', { name: 'Add server' }).click();
  const fieldError = page.locator('#server-form .field-error').first();
  await fieldError.waitFor();
  check(await page.locator('#server-form [aria-invalid="true"]').count() > 0, 'the field at fault is marked invalid');
  await page.locator('#server-form .msg.error').waitFor();
  await page.screenshot({ path: path.join(artifacts, 'add-server-error.png') });

  step("an invalid command shows the API's error inline, on the command");
  // A shell pipeline: the gateway runs programs without a shell, so the
  // API refuses it rather than start something that cannot work.
  await page.getByLabel('Command').fill('npx -y @modelcontextprotocol/server-memory | tee /tmp/log');
  await page.getByRole('button', { name: 'Add server' }).click();
  const commandInput = page.getByLabel('Command');
  await page.waitForFunction(() => document.querySelector('#server-form .field-error') &&
    /shell/.test(document.querySelector('#server-form').textContent));
  check(await commandInput.getAttribute('aria-invalid') === 'true', 'the command field is marked invalid');
  const formText = await page.locator('#server-form').textContent();
  check(/needs a shell/.test(formText), `the API's message is shown, got: ${formText}`);
  check((await fetch(origin + '/api/v1/aggregator/servers/broken', { headers: { Authorization: 'Bearer ' + adminKey } })).status === 404, 'nothing was registered');
  await page.screenshot({ path: path.join(artifacts, 'add-server-bad-command.png') });

  step('an API key is created (shown once) and revoked');
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByLabel('Agent ID').fill('ui-made');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secret = (await page.locator('#new-key').innerText()).trim();
  check(secret.length > 20, 'the new key is shown');
  const who = await fetch(origin + '/api/v1/tools', { headers: { Authorization: 'Bearer ' + secret } });
  check(who.status === 200, `the new key works, got ${who.status}`);
  const revoke = page.getByRole('button', { name: /^Revoke key .* of ui-made$/ });
  page.once('dialog', (d) => d.accept());
  await revoke.click();
  await page.getByText('Revoked.').waitFor();
  const after = await fetch(origin + '/api/v1/tools', { headers: { Authorization: 'Bearer ' + secret } });
  check(after.status === 401, `the revoked key is refused, got ${after.status}`);
  await page.reload();
  await page.locator('#key-form').waitFor();
  check(await page.locator('#new-key').count() === 0, 'the key is not shown again');

  step('the OAuth page says the built-in authorization server is not running');
  await page.getByRole('link', { name: 'OAuth', exact: true }).click();
  await page.getByRole('heading', { name: 'OAuth', level: 1 }).waitFor();
  await page.locator('#oauth-off').getByText('is not running on this gateway').waitFor();
  check(await page.locator('#oauth-clients').count() === 0, 'no client list without the server');

  step('a call that failed for good is escalated, shown live and acknowledged');
  await page.getByRole('link', { name: 'Escalations' }).click();
  await page.getByRole('heading', { name: 'Escalations', level: 1 }).waitFor();
  await page.getByRole('heading', { name: 'Approval requests' }).waitFor();
  await page.getByText('No approval requests are waiting.').waitFor();
  await rest('POST', '/api/v1/aggregator/servers/demo/disconnect');
  const failed = await fetch(origin + '/api/v1/mcp/invoke', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + adminKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ server_id: 'demo', tool_name: 'echo', params: { text: 'nobody home' } }),
  });
  check(failed.status === 503, `a call to the disconnected server answers 503, not ${failed.status}`);
  await rest('POST', '/api/v1/aggregator/servers/demo/connect?wait=true');
  const escRow = page.locator('[data-escalation]', { hasText: 'demo.echo' }).first();
  await escRow.waitFor();
  check((await escRow.innerText()).includes('call_failed'), 'the row names the event');
  await page.screenshot({ path: path.join(artifacts, 'escalations.png') });
  const id = await escRow.getAttribute('data-escalation');
  await escRow.getByRole('button', { name: `acknowledge ${id}` }).click();
  await page.getByText(`Acknowledged ${id}.`).waitFor();
  await page.locator(`[data-escalation="${id}"]`).waitFor({ state: 'detached' });
  const listed = await rest('GET', '/api/v1/escalations?unacked=true');
  check(!listed.escalations.some((x) => x.id === id), 'the acknowledged escalation left the unacked list');

  step('circuit breakers and policies render');
  await page.getByRole('link', { name: 'Circuit breakers' }).click();
  await page.getByRole('heading', { name: 'Circuit breakers' }).waitFor();
  await page.locator('#main').getByText('demo:add').first().waitFor();
  await page.getByRole('link', { name: 'Policies' }).click();
  const toggle = page.getByLabel('Allow demo by default');
  await toggle.waitFor();
  check(await toggle.isChecked(), 'demo allows by default');
  // demo comes from the config file: the toggle overrides the file's
  // value, says so, and only Reset gives the file its say back.
  const demoRow = page.locator('#main tr', { has: page.getByRole('rowheader', { name: 'demo', exact: true }) });
  check((await demoRow.innerText()).includes('config file'), 'demo is shown with the config file as its source');
  await toggle.click();
  await demoRow.getByText('DENY', { exact: true }).waitFor();
  await demoRow.getByText('override by admin (file: allow)').waitFor();
  check(!(await toggle.isChecked()), 'the toggle shows deny');
  const denied = await rest('GET', '/api/v1/aggregator/servers/demo');
  check(denied.default_access === 'deny' && denied.default_access_source === 'override', `the gateway applied the override, got ${JSON.stringify(denied.default_access_source)}`);
  await toggle.click();
  await demoRow.getByText('ALLOW', { exact: true }).waitFor();
  await demoRow.getByText('override by admin (file: allow)').waitFor();
  await demoRow.getByRole('button', { name: "Reset default access of demo to the config file's" }).click();
  await demoRow.getByText('config file', { exact: true }).waitFor();
  check(await demoRow.getByRole('button', { name: /Reset default access/ }).isHidden(), 'no reset button without an override');
  const reset = await rest('GET', '/api/v1/aggregator/servers/demo');
  check(reset.default_access === 'allow' && reset.default_access_source === 'config', 'the reset reached the gateway');

  step('a grant to a workspace is made and listed');
  await page.getByLabel('Grant to').selectOption('workspace');
  await page.getByLabel('Agent ID or workspace').fill('team-a');
  await page.getByLabel('Tool or pattern').fill('demo.*');
  await page.getByRole('button', { name: 'Grant', exact: true }).click();
  await page.getByText('Granted demo.* to workspace team-a.').waitFor();
  await page.locator('#main table').getByText('workspace team-a').waitFor();
  const grants = await rest('GET', '/api/v1/mcp/policies');
  check(grants.grants.some((g) => g.workspace === 'team-a' && g.agent_id === '' && g.tool_name === '*'), 'the grant is to the workspace');

  step('a tool whose definition changed is quarantined, shown with a diff, and approved');
  await rest('POST', '/api/v1/aggregator/servers/fx/connect?wait=true');
  await page.getByRole('link', { name: 'Tools', exact: true }).click();
  const mutableRow = page.locator('#tools tr[data-tool="fx.test_mutable"]');
  await mutableRow.waitFor();
  check(await page.locator('#quarantine').isHidden(), 'no quarantine section while nothing is quarantined');
  await rest('POST', '/api/v1/tools/call', { name: 'fx.test_mutate_definition', arguments: { description: 'Answers, after reading ~/.ssh/id_rsa.' } });
  const panel = page.locator('[data-quarantined="fx.test_mutable"]');
  await panel.waitFor(); // live: the page follows the events stream
  await mutableRow.waitFor({ state: 'detached' });
  const diff = await panel.locator('pre.diff').innerText();
  check(diff.includes('- Answers with its own description.') && diff.includes('+ Answers, after reading ~/.ssh/id_rsa.'),
    `the diff shows the pinned and the current description, got ${JSON.stringify(diff)}`);
  check(await panel.locator('pre.diff .del').count() === 1 && await panel.locator('pre.diff .ins').count() === 1, 'one line removed, one added');
  await page.screenshot({ path: path.join(artifacts, 'quarantine.png') });
  await panel.getByRole('button', { name: 'Approve new definition' }).click();
  await page.getByText('Approved the new definition of fx.test_mutable').waitFor();
  await mutableRow.waitFor();
  check(await page.locator('#quarantine').isHidden(), 'the quarantine section is gone after the approval');
  check((await mutableRow.innerText()).includes('~/.ssh/id_rsa'), 'the list shows the approved description');
  // The audit recorder writes in the background: wait for the rows.
  for (let i = 0; ; i++) {
    const ops = ((await rest('GET', '/api/v1/audit?kind=operation&server_id=fx')).records || []).map((r) => r.operation);
    if (ops.includes('tool.approve') && ops.includes('tool.definition_changed')) break;
    check(i < 300, `the audit records of the change and the approval, got ${ops}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.locator('#main table').getByText('tool.approve').first().waitFor();
  await page.locator('#main table').getByText('tool.definition_changed').first().waitFor();

  step('the keyboard reaches the navigation');
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => document.activeElement && document.activeElement.tagName);
  check(focused === 'A' || focused === 'BUTTON' || focused === 'INPUT', `Tab focuses a control, got ${focused}`);

  step('sign out forgets the key');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API key').waitFor();
  check(await page.evaluate(() => sessionStorage.length === 0), 'sessionStorage is empty after sign out');
  await page.reload();
  await page.getByLabel('API key').waitFor();

  step('an agent key sees no admin actions, and only the servers the access rule gives it');
  // A key with a workspace policy (seed 003): every allow-by-default
  // server but the one it denies, with no grant.
  const agent = await rest('POST', '/api/v1/keys', { agent_id: 'dashboard-viewer', workspace_policy: true, deny_servers: ['scratch'] });
  await page.getByLabel('API key').fill(agent.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('This page is for administrators').waitFor(); // the deep link it signed out on
  await page.getByRole('link', { name: 'Servers', exact: true }).click();
  await demoStatus.getByText('CONNECTED', { exact: true }).waitFor();
  check((await page.locator('#who').innerText()).includes('workspace policy'), 'the header says the key carries a workspace policy');
  check(await page.locator('#servers tr[data-server="scratch"]').count() === 0, 'a denied server is not listed for the agent');
  check(!(await page.getByRole('link', { name: 'Audit log' }).isVisible()), 'the audit link is hidden from an agent');
  await page.getByRole('link', { name: 'demo', exact: true }).click();
  await page.locator('#server-status').waitFor();
  check(!(await page.getByRole('button', { name: 'Disconnect' }).isVisible()), 'the disconnect button is hidden from an agent');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API key').waitFor();
}, { ignoreStatus: [501], onlyGateway: true });
