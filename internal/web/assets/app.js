// The switchboard dashboard: a hash router over a few pages, each a view of
// the REST API. State that changes on its own (server status, breakers)
// arrives on the events stream; pages re-read what they show when told.

import { api, APIError, describe, EventStream, session } from './api.js';
import { add, badge, el, fmtDuration, fmtTime, put } from './dom.js';
import { schemaForm } from './form.js';
import { lineChart } from './chart.js';

const $ = (sel) => document.querySelector(sel);
const main = $('#main');
const enc = encodeURIComponent;

const state = {
  who: null,        // {agent_id, admin, method} when known
  admin: null,      // true, false, or null while unknown
  servers: new Map(), // name -> server, as last read or updated by events
  live: false,      // the events stream is open
};

// ---- page lifecycle -------------------------------------------------------

let routeSeq = 0;
let leaving = [];
const listeners = new Set();

/** onLeave registers cleanup for the current page. */
function onLeave(fn) { leaving.push(fn); }

/** onEvent subscribes the current page to gateway events until it is left. */
function onEvent(fn) {
  listeners.add(fn);
  onLeave(() => listeners.delete(fn));
}

/** every runs fn every ms while the page is shown. */
function every(ms, fn) {
  const t = setInterval(fn, ms);
  onLeave(() => clearInterval(t));
}

/** debounce coalesces bursts (a reconnect emits several events) into one call. */
function debounce(ms, fn) {
  let t = null;
  const d = () => { clearTimeout(t); t = setTimeout(fn, ms); };
  onLeave(() => clearTimeout(t));
  return d;
}

function announce(text) {
  const r = $('#announce');
  r.textContent = '';
  setTimeout(() => { r.textContent = text; }, 50);
}

function message(text, kind = 'error') {
  return el('div', { class: `msg ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

function page(title, ...children) {
  const h = el('h1', { tabindex: '-1' }, title);
  put(main, h, ...children);
  return h;
}

function table(headers, rows, caption) {
  return el('div', { class: 'table-wrap' },
    el('table', {},
      caption ? el('caption', { class: 'sr-only' }, caption) : null,
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col', class: h.num ? 'num' : null }, h.label || h)))),
      el('tbody', {}, rows)));
}

const json = (v) => JSON.stringify(v, null, 2);
const clip = (text, n) => (text.length > n ? text.slice(0, n - 1) + '…' : text);

/** forbidden notes a 403 from an admin route: the caller is no admin. */
function noteForbidden(err) {
  if (err instanceof APIError && err.status === 403 && state.admin !== false) {
    setAdmin(false);
  }
}

function setAdmin(admin) {
  state.admin = admin;
  document.body.classList.toggle('non-admin', admin === false);
}

// ---- router ---------------------------------------------------------------

const routes = [
  [/^\/overview$/, adminOnly('Overview', overviewPage), 'overview'],
  [/^\/servers\/new$/, adminOnly('Add a server', (m, seq) => serverFormPage(seq)), 'servers'],
  [/^\/servers\/(.+)\/edit$/, adminOnly('Edit a server', async (m, seq) => {
    const s = await api('GET', `/api/v1/aggregator/servers/${enc(decodeURIComponent(m[1]))}`);
    if (current(seq)) serverFormPage(seq, s);
  }), 'servers'],
  [/^\/keys$/, adminOnly('API keys', keysPage), 'keys'],
  [/^\/oauth$/, adminOnly('OAuth', oauthPage), 'oauth'],
  [/^\/servers\/(.+)$/, (m, seq) => serverPage(decodeURIComponent(m[1]), seq), 'servers'],
  [/^\/servers$/, (m, seq) => serversPage(m, seq), 'servers'],
  [/^\/tools\/(.+)$/, (m, seq) => toolPage(decodeURIComponent(m[1]), seq), 'tools'],
  [/^\/tools$/, (m, seq) => toolsPage(m, seq), 'tools'],
  [/^\/breakers$/, adminOnly('Circuit breakers', breakersPage), 'breakers'],
  [/^\/escalations$/, adminOnly('Escalations', escalationsPage), 'escalations'],
  [/^\/audit$/, adminOnly('Audit log', auditPage), 'audit'],
  [/^\/policies$/, adminOnly('Policies', policiesPage), 'policies'],
];

/** adminOnly shows a page to admins and says so to everyone else. */
function adminOnly(title, render) {
  return (m, seq) => {
    if (state.admin === false) {
      page(title, message('This page is for administrators; your key is not an admin key.', 'info'),
        el('p', {}, el('a', { href: '#/servers' }, 'Go to the servers')));
      return undefined;
    }
    return render(m, seq);
  };
}

async function route() {
  for (const fn of leaving) fn();
  leaving = [];
  const seq = ++routeSeq;
  const path = location.hash.replace(/^#/, '') || '/servers';
  for (const [re, render, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.page === nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    try {
      await render(m, seq);
    } catch (err) {
      if (seq !== routeSeq) return;
      noteForbidden(err);
      page('Something went wrong', message(describe(err)));
    }
    if (seq === routeSeq) {
      const h = main.querySelector('h1');
      if (h && document.activeElement === document.body) h.focus({ preventScroll: true });
    }
    return;
  }
  location.hash = '#/servers';
}

/** current reports whether the page that started at seq is still shown. */
const current = (seq) => seq === routeSeq;

// ---- sign-in and session --------------------------------------------------

const stream = new EventStream(dispatch, (s, status) => {
  const live = $('#live');
  live.hidden = false;
  state.live = s === 'live';
  live.className = 'live ' + (s === 'live' ? 'on' : 'off');
  live.textContent = s === 'live' ? 'live' : s === 'reconnecting' ? 'reconnecting…' : 'updates every 10 s';
  live.title = s === 'unavailable' ? `the events stream answered ${status}; polling instead` : '';
  if (s === 'live') refreshServers().catch(() => {}); // catch up on what the gap missed
});

function dispatch(ev) {
  const e = ev.data && typeof ev.data === 'object' ? ev.data : {};
  const type = e.type || ev.type;
  const data = e.data || {};
  if (type === 'server.status_changed' && data.server) {
    const s = state.servers.get(data.server) || { name: data.server };
    s.status = data.to;
    s.error_message = data.error || '';
    state.servers.set(data.server, s);
    announce(`${data.server}: ${data.from || '?'} → ${data.to}${data.error ? ' (' + data.error + ')' : ''}`);
  }
  for (const fn of [...listeners]) fn(type, data);
}

function showSignIn(note) {
  stream.stop();
  for (const fn of leaving) fn();
  leaving = [];
  routeSeq++;
  $('#nav').hidden = true;
  $('#signout').hidden = true;
  $('#live').hidden = true;
  $('#who').textContent = '';
  const input = el('input', { type: 'password', id: 'apikey', name: 'apikey', autocomplete: 'off', 'aria-describedby': 'apikey-hint' });
  const status = el('div', { 'aria-live': 'polite' });
  const form = el('form', { class: 'panel signin' },
    el('h1', { tabindex: '-1' }, 'Sign in'),
    note ? message(note, 'info') : null,
    el('div', { class: 'field' },
      el('label', { for: 'apikey' }, 'API key'),
      input,
      el('p', { class: 'hint', id: 'apikey-hint' }, 'An admin key sees everything; an agent key sees its own tools. On a local gateway without an auth section, leave it empty.')),
    el('button', { type: 'submit' }, 'Sign in'),
    status);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    put(status);
    session.key = input.value.trim();
    try {
      await api('GET', '/api/v1/aggregator/servers', undefined, { noAuthHook: true });
    } catch (err) {
      session.key = '';
      put(status, message(err.status === 401 ? `That key was not accepted: ${err.message}` : describe(err)));
      input.focus();
      return;
    }
    signedIn();
  });
  put(main, form);
  input.focus();
}

async function identify() {
  try {
    const w = await api('GET', '/api/v1/whoami');
    state.who = w;
    setAdmin(!!w.admin);
  } catch (err) {
    if (err.status === 401) throw err;
    // No whoami route: an admin-only read tells.
    state.who = null;
    try {
      await api('GET', '/api/v1/mcp/circuit-breakers');
      setAdmin(true);
    } catch (e2) {
      if (e2.status === 401) throw e2;
      setAdmin(e2.status === 403 ? false : null);
    }
  }
  const who = $('#who');
  if (state.who) {
    const w = state.who;
    const kind = w.admin ? ' (admin)' : w.workspace_policy ? ` (workspace policy${w.workspace ? ` of ${w.workspace}` : ''})` : w.workspace ? ` (workspace ${w.workspace})` : '';
    who.textContent = `${w.agent_id || 'unknown'}${kind}`;
  }
  else who.textContent = state.admin ? 'admin' : state.admin === false ? 'agent' : '';
}

async function signedIn() {
  try {
    await identify();
  } catch (err) {
    if (err.status === 401) return showSignIn('Your key was not accepted; sign in again.');
  }
  $('#nav').hidden = false;
  $('#signout').hidden = false;
  if (state.admin !== false) stream.start();
  else stream.onState('unavailable', 403);
  if (!location.hash || location.hash === '#') location.hash = '#/servers';
  else route();
}

$('#signout').addEventListener('click', () => {
  session.key = '';
  state.who = null;
  state.servers.clear();
  setAdmin(null);
  showSignIn('Signed out.');
});

session.onUnauthorized = () => showSignIn('Your key was not accepted (or has expired); sign in again.');
window.addEventListener('hashchange', () => { if (!$('#nav').hidden) route(); });

// Uptimes tick in place: cells carry the start time.
setInterval(() => {
  for (const c of document.querySelectorAll('[data-started]')) {
    c.textContent = fmtDuration((Date.now() - Date.parse(c.dataset.started)) / 1000);
  }
}, 1000);

async function boot() {
  try {
    await api('GET', '/api/v1/aggregator/servers', undefined, { noAuthHook: true });
  } catch (err) {
    if (err.status === 401) return showSignIn();
    page('Cannot load the dashboard', message(describe(err)),
      el('button', { type: 'button', onclick: () => boot() }, 'Try again'));
    return;
  }
  signedIn();
}

// ---- servers --------------------------------------------------------------

async function refreshServers() {
  const body = await api('GET', '/api/v1/aggregator/servers');
  const list = body.servers || [];
  state.servers = new Map(list.map((s) => [s.name, s]));
  return list;
}

function healthText(s) {
  const h = s.health;
  if (!h || (!h.last_check && !h.checks_total)) return { text: '—', cls: 'unknown', title: 'no health check yet' };
  if (h.last_check_ok) return { text: `ok · ${Math.round(h.response_time_ms)} ms`, cls: 'ok', title: `${h.method}, checked ${fmtTime(h.last_check)}` };
  return { text: `failing ×${h.consecutive_failures}`, cls: 'failing', title: h.last_check_error || '' };
}

const serving = (status) => status === 'CONNECTED' || status === 'DEGRADED';

function uptimeCell(s) {
  if (serving(s.status) && s.started_at) {
    return el('td', { class: 'num', 'data-started': s.started_at }, fmtDuration((Date.now() - Date.parse(s.started_at)) / 1000));
  }
  return el('td', { class: 'num' }, '—');
}

/** INSECURE_TITLE explains the insecure_transport flag of a server. */
const INSECURE_TITLE = 'Reached over plain HTTP (no TLS) at a host other than loopback: traffic and credentials cross the network unencrypted. settings.require_tls_upstreams refuses such servers.';

function serverRow(s) {
  const h = healthText(s);
  return el('tr', { 'data-server': s.name },
    el('th', { scope: 'row' }, el('a', { href: `#/servers/${enc(s.name)}` }, s.name)),
    el('td', { 'data-field': 'status' }, badge(s.status)),
    el('td', {}, el('span', { class: `s-${h.cls}`, title: h.title }, h.text)),
    el('td', { class: 'num' }, String(s.tool_count ?? '—')),
    el('td', { class: 'num' }, s.pid ? String(s.pid) : '—'),
    uptimeCell(s),
    el('td', { class: 'num' }, String(s.restarts ?? 0)),
    el('td', { class: 'muted' }, (s.transport_type || '').toLowerCase(),
      s.insecure_transport ? [' ', el('span', { class: 's-DEGRADED', 'data-field': 'insecure', title: INSECURE_TITLE }, 'plain http')] : null),
    el('td', { class: 'err', 'data-field': 'error' }, s.error_message || ''));
}

/** patchStatus updates one row's status in place, keeping focus and scroll. */
function patchStatus(tbody, name) {
  const s = state.servers.get(name);
  const tr = tbody.querySelector(`tr[data-server="${CSS.escape(name)}"]`);
  if (!s || !tr) return false;
  put(tr.querySelector('[data-field="status"]'), badge(s.status));
  tr.querySelector('[data-field="error"]').textContent = s.error_message || '';
  return true;
}

async function serversPage(_m, seq) {
  const list = await refreshServers();
  if (!current(seq)) return;
  const tbody = el('tbody');
  const render = () => {
    const rows = [...state.servers.values()].sort((a, b) => a.name.localeCompare(b.name)).map(serverRow);
    put(tbody, ...rows);
  };
  const refresh = async () => {
    try {
      await refreshServers();
      if (current(seq)) render();
    } catch (err) { /* the next event or tick tries again */ }
  };
  const later = debounce(400, refresh);
  const t = el('div', { class: 'table-wrap' },
    el('table', { id: 'servers' },
      el('caption', { class: 'sr-only' }, 'Upstream servers and their status'),
      el('thead', {}, el('tr', {}, ['Server', 'Status', 'Health', { label: 'Tools', num: true }, { label: 'PID', num: true },
        { label: 'Uptime', num: true }, { label: 'Restarts', num: true }, 'Transport', 'Last error']
        .map((h) => el('th', { scope: 'col', class: h.num ? 'num' : null }, h.label || h)))),
      tbody));
  page('Servers',
    el('p', { class: 'muted' }, `${list.length} server${list.length === 1 ? '' : 's'}. Status changes appear here as they happen.`),
    t,
    el('div', { class: 'actions' }, el('button', { type: 'button', class: 'secondary', onclick: refresh }, 'Refresh'),
      el('a', { href: '#/servers/new', class: 'button admin-only', id: 'add-server' }, 'Add a server')));
  render();
  onEvent((type, data) => {
    if (type === 'server.status_changed') {
      if (!patchStatus(tbody, data.server)) render();
      later(); // pid, uptime, tools follow a status change
    } else if (type.startsWith('server.')) {
      later();
    }
  });
  every(10000, () => { if (!state.live) refresh(); });
}

async function serverPage(name, seq) {
  const s = await api('GET', `/api/v1/aggregator/servers/${enc(name)}`);
  if (!current(seq)) return;
  state.servers.set(s.name, s);
  const statusBox = el('span', { id: 'server-status' }, badge(s.status));
  const details = el('div', { class: 'panel' });
  const toolsBox = el('div', { class: 'panel' }, el('p', { class: 'muted' }, 'Loading tools…'));
  const historyBox = el('div', {});
  const logsBox = el('div', {});
  const result = el('div', { 'aria-live': 'polite' });

  const fillDetails = (s) => {
    const h = healthText(s);
    const rows = [
      ['Status', badge(s.status)],
      ['Transport', s.insecure_transport
        ? [s.transport_type, ' ', el('span', { class: 's-DEGRADED', 'data-field': 'insecure', title: INSECURE_TITLE }, 'insecure: plain HTTP to a remote host')]
        : s.transport_type],
      ['Source', s.source],
      ['PID', s.pid || '—'],
      ['Uptime', serving(s.status) && s.started_at ? el('span', { 'data-started': s.started_at }, fmtDuration((Date.now() - Date.parse(s.started_at)) / 1000)) : '—'],
      ['Restarts', String(s.restarts ?? 0)],
      ['In flight', String(s.in_flight ?? 0)],
      ['Health', el('span', { class: `s-${h.cls}`, title: h.title }, h.text)],
      s.health ? ['Health checks', `${s.health.checks_total} total, ${s.health.checks_failed} failed, error rate ${(100 * (s.health.error_rate || 0)).toFixed(1)} %`] : null,
      s.health && s.health.last_check_error ? ['Last health error', s.health.last_check_error] : null,
      ['Connected at', fmtTime(s.connected_at)],
      s.server_info ? ['Server', `${s.server_info.name} ${s.server_info.version || ''}`] : null,
      s.protocol_version ? ['Protocol', s.protocol_version] : null,
      s.default_access ? ['Default access', s.default_access_source === 'override'
        ? `${s.default_access} (overrides the config file's ${s.file_default_access || 'allow'}, set by ${s.default_access_set_by || 'an admin'})`
        : s.default_access] : null,
      s.last_exit ? ['Last exit', s.last_exit] : null,
      s.next_restart_at ? ['Next restart', fmtTime(s.next_restart_at)] : null,
      s.error_message ? ['Error', el('span', { class: 's-ERROR' }, s.error_message)] : null,
    ].filter(Boolean);
    put(details, el('dl', { class: 'props' }, rows.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
  };

  const loadTools = async () => {
    try {
      const body = await api('GET', `/api/v1/tools?server_id=${enc(s.id || name)}`);
      const tools = body.tools || [];
      put(toolsBox, tools.length === 0 ? el('p', { class: 'muted' }, 'No tools (the server is not connected, or none are visible to you).')
        : el('ul', { class: 'plain' }, tools.map((t) => el('li', {},
          el('a', { href: `#/tools/${enc(t.name)}` }, t.name), ' ',
          el('span', { class: 'muted' }, t.description || '')))));
      const rejected = (body.servers || []).flatMap((g) => g.rejected_tools || []);
      if (rejected.length) add(toolsBox, el('h3', {}, 'Refused by the catalog'), el('ul', { class: 'plain' }, rejected.map((r) => el('li', {}, `${r.kind} ${r.name}: ${r.reason}`))));
    } catch (err) { put(toolsBox, message(describe(err))); }
  };
  const loadHistory = async () => {
    try {
      const body = await api('GET', `/api/v1/aggregator/servers/${enc(s.id || name)}/history?limit=50`);
      const rows = (body.history || []).map((e) => el('tr', {},
        el('td', {}, fmtTime(e.at)), el('td', {}, badge(e.from_status)), el('td', {}, badge(e.to_status)), el('td', { class: 'err' }, e.error || '')));
      put(historyBox, rows.length ? table(['When', 'From', 'To', 'Error'], rows, 'Connection history') : el('p', { class: 'muted' }, 'No connection history yet.'));
    } catch (err) { put(historyBox, message(describe(err))); }
  };
  const loadLogs = async () => {
    try {
      const body = await api('GET', `/api/v1/aggregator/servers/${enc(s.id || name)}/logs?lines=100`);
      const lines = (body && body.lines) || [];
      put(logsBox, lines.length ? el('pre', { class: 'logs', tabindex: '0', 'aria-label': 'Recent log lines' }, lines.join('\n')) : el('p', { class: 'muted' }, 'No logs.'));
    } catch (err) {
      noteForbidden(err);
      put(logsBox, err.status === 404 || err.status === 403 || err.status === 501 ? el('p', { class: 'muted' }, 'No logs.') : message(describe(err)));
    }
  };
  const reload = async () => {
    try {
      const fresh = await api('GET', `/api/v1/aggregator/servers/${enc(s.id || name)}`);
      if (!current(seq)) return;
      state.servers.set(fresh.name, fresh);
      put(statusBox, badge(fresh.status));
      fillDetails(fresh);
    } catch { /* keep what is shown */ }
    loadHistory();
    loadTools();
  };
  const later = debounce(400, reload);

  const buttons = [];
  const act = (label, fn, cls) => {
    const b = el('button', { type: 'button', class: cls || 'secondary' }, label);
    b.addEventListener('click', async () => {
      for (const x of buttons) x.disabled = true;
      put(result, message(`${label}…`, 'info'));
      try {
        const text = await fn();
        put(result, message(text, 'ok'));
      } catch (err) {
        noteForbidden(err);
        put(result, message(`${label} failed: ${describe(err)}`));
      } finally {
        for (const x of buttons) x.disabled = false;
        later();
      }
    });
    buttons.push(b);
    return b;
  };
  const path = `/api/v1/aggregator/servers/${enc(s.id || name)}`;
  const connect = async () => (await api('POST', path + '/connect')).message || 'Connection initiated';
  const disconnect = async () => {
    const r = await api('POST', path + '/disconnect');
    return `Disconnected (${r.pending_requests || 0} calls were in flight).`;
  };
  const actions = el('div', { class: 'actions admin-only', role: 'group', 'aria-label': 'Server actions' },
    act('Connect', connect, 'primary'),
    act('Disconnect', disconnect, 'danger'),
    act('Restart', async () => { await api('POST', path + '/disconnect'); await api('POST', path + '/connect'); return 'Restarted: connecting again.'; }),
    act('Discover', async () => { const r = await api('POST', path + '/discover'); return `Discovered ${r.tool_count} tools.`; }));

  // A per_user server's accounts are linked by each caller (accountBox).
  const authBox = s.auth && s.credentials !== 'per_user' ? upstreamAuthPanel(s, path, seq, later) : null;
  const editBox = s.source === 'api' || s.default_access ? serverEditPanel(s, path) : null;
  const accountBox = s.credentials === 'per_user' ? accountPanel(s) : null;
  const h = page('', );
  put(h, el('a', { href: '#/servers', class: 'muted', 'aria-label': 'Back to servers' }, 'Servers /'), ' ', s.name, ' ', statusBox);
  add(main, 
    s.description ? el('p', {}, s.description) : null,
    actions, result, authBox, editBox, accountBox,
    el('div', { class: 'grid2' },
      el('section', { 'aria-labelledby': 'h-details' }, el('h2', { id: 'h-details' }, 'Details'), details),
      el('section', { 'aria-labelledby': 'h-tools' }, el('h2', { id: 'h-tools' }, 'Tools'), toolsBox)),
    el('section', { 'aria-labelledby': 'h-logs' }, el('h2', { id: 'h-logs' }, 'Recent log lines'), logsBox),
    el('section', { 'aria-labelledby': 'h-history' }, el('h2', { id: 'h-history' }, 'Connection history'), historyBox));
  fillDetails(s);
  loadTools();
  loadHistory();
  loadLogs();
  onEvent((type, data) => {
    if (data.server !== s.name) return;
    if (type === 'server.status_changed') {
      put(statusBox, badge(data.to));
      later();
    } else if (type.startsWith('server.')) {
      later();
    }
  });
  every(10000, () => { if (!state.live) reload(); });
}

// ---- per-user credentials --------------------------------------------------

/**
 * accountPanel is the "Your account" section of a server with
 * credentials: per_user: what the signed-in caller linked (never the
 * credential itself), a button that starts the OAuth linking of their
 * account (the authorization URL opens in a new tab), a form for a personal
 * token (write-only), and Unlink. Administrators also see who linked what,
 * and may delete another caller's credential, nothing more.
 */
function accountPanel(s) {
  const path = `/api/v1/me/accounts/${enc(s.name)}`;
  const box = el('section', { class: 'panel', id: 'account', 'aria-labelledby': 'h-account' });
  const status = el('div', { id: 'account-status', 'aria-live': 'polite' });
  const note = el('div', { 'aria-live': 'polite' });
  const others = el('div', { id: 'account-list' });
  const describeLink = (g) => !g.authorized ? 'Not linked: your calls to this server fail with upstream_auth_required.'
    : `Linked (${g.type}${g.issuer ? `, issued by ${g.issuer}` : ''})${g.problem ? `: ${g.problem}` : ''}.`;
  const load = async () => {
    try {
      const f = await api('GET', path);
      put(status, el('p', { 'data-field': 'account-state' }, describeLink(f.grant || {})),
        f.state === 'pending' && f.authorization_url
          ? el('p', {}, 'Waiting for you to sign in: ', el('a', { href: f.authorization_url, target: '_blank', rel: 'noopener noreferrer', id: 'account-url' }, 'open the sign-in page'))
          : null,
        f.state === 'failed' ? message(`Linking failed: ${f.error}`) : null);
    } catch (err) { put(status, message(describe(err))); }
    if (!state.admin) return;
    try {
      const body = await api('GET', `/api/v1/aggregator/servers/${enc(s.name)}/accounts`);
      const rows = (body.accounts || []).map((a) => {
        const del = el('button', { type: 'button', class: 'danger', 'data-subject': a.subject }, 'Delete');
        del.addEventListener('click', async () => {
          try {
            await api('DELETE', `/api/v1/aggregator/servers/${enc(s.name)}/accounts/${enc(a.subject)}`);
            put(note, message(`Deleted the credential of ${a.subject}.`, 'ok'));
          } catch (err) { put(note, message(describe(err))); }
          load();
        });
        return el('tr', {}, el('td', {}, a.subject), el('td', {}, a.kind + (a.header ? ` (${a.header})` : '')),
          el('td', {}, a.issuer || '—'), el('td', {}, fmtTime(a.updated_at)), el('td', { class: 'err' }, a.problem || ''), el('td', {}, del));
      });
      put(others, el('h3', {}, 'Linked by the callers (administrators may only delete them)'),
        rows.length ? table(['Caller', 'Kind', 'Issuer', 'Updated', 'Problem', ''], rows, 'Linked accounts') : el('p', { class: 'muted' }, 'Nobody has linked an account yet.'));
    } catch (err) { put(others, message(describe(err))); }
  };
  const linkBtn = el('button', { type: 'button', class: 'primary', id: 'account-link' }, 'Link my account');
  linkBtn.addEventListener('click', async () => {
    put(note, message('Starting the sign-in…', 'info'));
    try {
      const f = await api('POST', path + '/connect');
      put(note, f.authorization_url
        ? message(['Sign in to link your account: ', el('a', { href: f.authorization_url, target: '_blank', rel: 'noopener noreferrer' }, 'open the sign-in page')], 'ok')
        : message(f.error || 'The server gave no sign-in page.'));
    } catch (err) { put(note, message(`Linking failed: ${describe(err)}`)); }
    load();
  });
  const unlinkBtn = el('button', { type: 'button', class: 'danger', id: 'account-unlink' }, 'Unlink');
  unlinkBtn.addEventListener('click', async () => {
    try {
      await api('DELETE', path);
      put(note, message('Unlinked.', 'ok'));
    } catch (err) { put(note, message(describe(err))); }
    load();
  });
  const token = el('input', { id: 'account-token', type: 'password', autocomplete: 'off', 'data-field': 'token' });
  const form = el('form', { id: 'account-token-form' },
    el('div', { class: 'field' }, el('label', { for: 'account-token' }, 'Or store a personal token (sent as Authorization: Bearer; nobody can read it back)'), token),
    el('button', { type: 'submit', class: 'secondary' }, 'Store the token'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api('PUT', path, { type: 'bearer', token: token.value });
      token.value = '';
      put(note, message('Your token is stored.', 'ok'));
    } catch (err) { put(note, message(describe(err))); }
    load();
  });
  add(box, el('h2', { id: 'h-account' }, 'Your account'),
    el('p', { class: 'muted' }, 'This server is called with each caller\'s own account (credentials: per_user).'),
    status, el('div', { class: 'actions', role: 'group', 'aria-label': 'Account actions' }, linkBtn, unlinkBtn), form, note, others);
  load();
  return box;
}

// upstreamAuthPanel is the OAuth authorization of a server with `auth`
// (docs/auth.md, "Upstream servers"): the stored grant (never a token),
// and a Connect button that starts the flow. For the authorization-code
// grant it shows the authorization server's page as a link to open, then
// follows the flow until the gateway's callback ends it; a client
// credentials grant is fetched at once. onDone refreshes the page.
function upstreamAuthPanel(s, path, seq, onDone) {
  const info = el('div', { id: 'upstream-auth', 'aria-live': 'polite' });
  const show = (f) => {
    const g = f.grant || {};
    const rows = [
      ['Grant', g.authorized ? `authorized (${g.type || 'oauth'})` : 'not authorized'],
      g.issuer ? ['Issuer', g.issuer] : null,
      g.expires_at ? ['Token expires', fmtTime(g.expires_at)] : null,
      g.scopes && g.scopes.length ? ['Scopes', g.scopes.join(' ')] : null,
      g.problem ? ['Problem', el('span', { class: 's-ERROR' }, g.problem)] : null,
      f.state ? ['Last authorization', el('span', { 'data-field': 'flow-state' }, f.state + (f.error ? `: ${f.error}` : ''))] : null,
    ].filter(Boolean);
    const parts = [el('dl', { class: 'props' }, rows.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]))];
    if (f.state === 'pending' && f.authorization_url) {
      parts.push(el('p', {}, el('a', { href: f.authorization_url, target: '_blank', rel: 'noopener noreferrer', id: 'upstream-auth-link' },
        'Open the authorization page'), ' and approve there; this page follows the result.'));
    }
    put(info, parts);
  };
  let polls = 0;
  const poll = async () => {
    if (!current(seq)) return;
    try {
      const f = await api('GET', path + '/auth');
      if (!current(seq)) return;
      show(f);
      // An operator has ten minutes to approve, as the gateway's flow.
      if (f.state === 'pending' && ++polls < 600) setTimeout(poll, 1000);
      else onDone();
    } catch (err) { put(info, message(describe(err))); }
  };
  const connect = el('button', { type: 'button', class: s.status === 'NEEDS_AUTH' ? 'primary' : 'secondary', id: 'upstream-auth-start' }, 'Connect with OAuth');
  connect.addEventListener('click', async () => {
    connect.disabled = true;
    try {
      const f = await api('POST', path + '/auth');
      show(f);
      polls = 0;
      if (f.state === 'pending') setTimeout(poll, 1000);
      else onDone();
    } catch (err) {
      noteForbidden(err);
      put(info, message(`Connect failed: ${describe(err)}`));
    } finally { connect.disabled = false; }
  });
  api('GET', path + '/auth').then((f) => { if (current(seq)) show(f); }).catch((err) => { noteForbidden(err); });
  return el('section', { class: 'admin-only', 'aria-labelledby': 'h-upstream-auth' },
    el('h2', { id: 'h-upstream-auth' }, 'Authorization (OAuth)'),
    el('p', { class: 'muted' }, s.status === 'NEEDS_AUTH'
      ? 'The gateway holds no usable grant for this server: connect it to an account at its authorization server.'
      : 'The gateway signs in to this server with OAuth; connect again to replace the grant.'),
    connect, info);
}

// ---- adding, editing and removing servers -----------------------------------

/** pairs parses "K=V" lines into an object; blank lines are skipped. */
function pairs(text, what) {
  const out = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`${what}: "${line}" is not NAME=VALUE`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/**
 * showFieldErrors puts each of the API's validation problems
 * (details.fields, 422 validation_failed) under the input it names, and
 * the whole message at the top of the form; it returns how many it placed.
 */
function showFieldErrors(form, box, err) {
  for (const n of form.querySelectorAll('.field-error')) n.remove();
  for (const n of form.querySelectorAll('[aria-invalid]')) n.removeAttribute('aria-invalid');
  put(box, message(describe(err)));
  const fields = (err.details && err.details.fields) || [];
  let placed = 0;
  for (const f of fields) {
    // Fields are config paths (servers[0].command, servers.x.url): the
    // last segment names the input.
    const last = String(f.field || '').split(/[.[\]]/).filter(Boolean).pop() || '';
    const input = form.querySelector(`[data-field="${last}"]`);
    if (!input) continue;
    input.setAttribute('aria-invalid', 'true');
    const id = `${input.id}-error`;
    input.setAttribute('aria-describedby', id);
    input.closest('.field').append(el('p', { class: 'field-error', id }, f.message));
    placed++;
  }
  return placed;
}

function field(id, label, attrs = {}, hint) {
  const tag = attrs.rows ? 'textarea' : 'input';
  const hid = hint ? id + '-hint' : null;
  return el('div', { class: 'field' }, el('label', { for: id }, label),
    el(tag, { id, name: id, type: tag === 'input' ? 'text' : null, autocomplete: 'off', 'aria-describedby': hid, ...attrs }),
    hint ? el('p', { class: 'hint', id: hid }, hint) : null);
}

/**
 * serverFormPage registers a runtime server (POST
 * /api/v1/aggregator/servers) or, given one (existing), replaces its
 * definition (PUT: the gateway starts the new definition before it swaps it
 * in, and keeps the old one if it does not start). Env values and headers
 * may be ${VAR} references, resolved by the gateway, so no secret needs to
 * be typed in clear; literal values are sealed by the gateway when it has a
 * key. Editing shows every value as ***, which the gateway reads as "keep
 * the value it had".
 */
function serverFormPage(seq, existing) {
  const cc0 = (existing && existing.connection_config) || {};
  const lines = (m) => Object.entries(m || {}).map(([k, v]) => `${k}=${v}`).join('\n');
  const box = el('div', { 'aria-live': 'polite' });
  const transport = el('select', { id: 'srv-transport', 'data-field': 'transport' },
    [['stdio', 'stdio (a local command)'], ['http', 'Streamable HTTP'], ['sse', 'SSE']].map(([v, l]) => el('option', { value: v }, l)));
  const stdioBox = el('div', {},
    field('srv-command', 'Command', { 'data-field': 'command', placeholder: 'npx' }),
    field('srv-args', 'Arguments, one per line', { rows: 3, 'data-field': 'args', placeholder: '-y\n@modelcontextprotocol/server-memory' }),
    field('srv-env', 'Environment, NAME=VALUE per line', { rows: 3, 'data-field': 'env' }, 'Write secrets as ${VAR} references to the gateway\'s environment, e.g. API_TOKEN=${GITHUB_TOKEN}.'),
    field('srv-cwd', 'Working directory (optional)', { 'data-field': 'cwd' }));
  const httpBox = el('div', { hidden: true },
    field('srv-url', 'URL', { 'data-field': 'url', placeholder: 'the server\'s MCP endpoint, ending in /mcp or /sse' }),
    field('srv-headers', 'Headers, NAME=VALUE per line', { rows: 3, 'data-field': 'headers' }, 'Write secrets as ${VAR} references, e.g. Authorization=Bearer ${API_TOKEN}.'));
  transport.addEventListener('change', () => {
    stdioBox.hidden = transport.value !== 'stdio';
    httpBox.hidden = transport.value === 'stdio';
  });
  const form = el('form', { class: 'panel', id: 'server-form', 'aria-labelledby': 'h-srv', novalidate: true },
    el('h2', { id: 'h-srv' }, 'Definition'),
    field('srv-name', 'Name', { required: true, 'data-field': 'name', placeholder: 'memory', readonly: existing ? true : null },
      existing ? 'Rename the server from its page.' : null),
    field('srv-description', 'Description (optional)', { 'data-field': 'description' }),
    el('div', { class: 'field' }, el('label', { for: 'srv-transport' }, 'Transport'), transport),
    stdioBox, httpBox,
    field('srv-health', 'Health check URL (optional)', { 'data-field': 'health_check_url' }, 'An HTTP URL probed on top of MCP pings; leave empty to rely on pings.'),
    el('div', { class: 'field inline' }, el('input', { type: 'checkbox', id: 'srv-restart', 'data-field': 'restart_on_failure', checked: true }),
      el('label', { for: 'srv-restart' }, 'Restart when it fails')),
    field('srv-max-restarts', 'Restarts allowed in the window (optional)', { type: 'number', min: 0, 'data-field': 'max_restart_attempts' }, 'Past this many restarts within the restart window the server stays in ERROR; empty for the gateway\'s setting.'),
    field('srv-startup', 'Startup timeout, seconds (optional)', { type: 'number', min: 1, 'data-field': 'startup_timeout_seconds' }, 'How long a start may take; empty for the gateway\'s setting.'),
    el('div', { class: 'field' }, el('label', { for: 'srv-access' }, 'Default access'),
      el('select', { id: 'srv-access', 'data-field': 'default_access' }, el('option', { value: '' }, '(gateway default)'),
        el('option', { value: 'allow' }, 'allow'), el('option', { value: 'deny' }, 'deny'))),
    el('div', { class: 'field inline' }, el('input', { type: 'checkbox', id: 'srv-connect', checked: existing ? existing.auto_connect : true }),
      el('label', { for: 'srv-connect' }, existing ? 'Connect at start' : 'Connect now')),
    box,
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, existing ? 'Save definition' : 'Add server'),
      el('a', { href: existing ? `#/servers/${enc(existing.name)}` : '#/servers', class: 'muted' }, 'Cancel')));
  if (existing) {
    const set = (id, v) => { form.querySelector('#' + id).value = v || ''; };
    set('srv-name', existing.name);
    set('srv-description', existing.description);
    transport.value = (existing.transport_type || 'STDIO').toLowerCase();
    transport.dispatchEvent(new Event('change'));
    set('srv-command', cc0.command);
    set('srv-args', (cc0.args || []).join('\n'));
    set('srv-env', lines(cc0.env));
    set('srv-cwd', cc0.cwd);
    set('srv-url', cc0.url);
    set('srv-headers', lines(cc0.headers));
    set('srv-health', existing.health_check_url);
    form.querySelector('#srv-restart').checked = existing.restart_on_failure !== false;
    set('srv-max-restarts', existing.max_restart_attempts === undefined ? '' : String(existing.max_restart_attempts));
    set('srv-startup', existing.startup_timeout_seconds ? String(existing.startup_timeout_seconds) : '');
    set('srv-access', existing.default_access_source === 'api' ? existing.default_access : '');
  }
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = (id) => form.querySelector('#' + id).value.trim();
    let req;
    try {
      const cc = {};
      if (transport.value === 'stdio') {
        cc.command = v('srv-command');
        cc.args = v('srv-args').split('\n').map((s) => s.trim()).filter(Boolean);
        cc.env = pairs(v('srv-env'), 'Environment');
        if (v('srv-cwd')) cc.cwd = v('srv-cwd');
      } else {
        cc.url = v('srv-url');
        cc.headers = pairs(v('srv-headers'), 'Headers');
      }
      req = { name: v('srv-name'), description: v('srv-description'), transport_type: transport.value, connection_config: cc,
        health_check_url: v('srv-health'), default_access: v('srv-access'), auto_connect: form.querySelector('#srv-connect').checked,
        restart_on_failure: form.querySelector('#srv-restart').checked };
      // OAuth sign-in to the server is set in the config or the API; an
      // edit here keeps it.
      if (existing && existing.auth) req.auth = existing.auth;
      if (existing && existing.identity) req.identity = existing.identity;
      if (v('srv-max-restarts') !== '') req.max_restart_attempts = Number(v('srv-max-restarts'));
      if (v('srv-startup') !== '') req.startup_timeout_seconds = Number(v('srv-startup'));
    } catch (err) {
      put(box, message(err.message));
      return;
    }
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    put(box, message(existing ? 'Starting the new definition…' : 'Adding…', 'info'));
    try {
      const s = existing
        ? await api('PUT', `/api/v1/aggregator/servers/${enc(existing.name)}`, req)
        : await api('POST', '/api/v1/aggregator/servers', req);
      if (!current(seq)) return;
      announce(existing ? `Saved ${s.name}.` : `Added ${s.name}.`);
      location.hash = `#/servers/${enc(s.name)}`;
    } catch (err) {
      noteForbidden(err);
      showFieldErrors(form, box, err);
    } finally {
      button.disabled = false;
    }
  });
  if (existing) {
    page(`Edit ${existing.name}`, el('p', { class: 'muted' },
      'The new definition is started next to the running one and swapped in once it runs; if it does not start, the server keeps its current definition. Values shown as *** keep what they were.'), form);
    return;
  }
  page('Add a server', el('p', { class: 'muted' }, 'A server added here is stored by the gateway and survives restarts; the config file is left alone.'), form);
}

/**
 * serverEditPanel renames a runtime server, sets default_access (PATCH; a
 * config-file server gets an override) and removes a runtime server.
 */
function serverEditPanel(s, path) {
  const box = el('div', { 'aria-live': 'polite' });
  const runtime = s.source === 'api';
  const form = el('form', { class: 'panel admin-only', id: 'server-edit', 'aria-labelledby': 'h-edit' },
    el('h2', { id: 'h-edit' }, 'Edit'),
    runtime ? field('edit-name', 'Name', { value: s.name, 'data-field': 'name' }) : null,
    el('div', { class: 'field' }, el('label', { for: 'edit-access' }, 'Default access'),
      el('select', { id: 'edit-access', 'data-field': 'default_access' },
        ['allow', 'deny'].map((a) => el('option', { value: a, selected: a === (s.default_access || 'allow') }, a)))),
    box,
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Save'),
      runtime ? el('a', { href: `#/servers/${enc(s.name)}/edit`, id: 'edit-definition' }, 'Edit definition') : null,
      runtime ? el('button', { type: 'button', class: 'danger', id: 'remove-server', onclick: async () => {
        if (!confirm(`Remove ${s.name}? Its process stops and its tools leave the catalog.`)) return;
        try {
          await api('DELETE', path);
          announce(`Removed ${s.name}.`);
          location.hash = '#/servers';
        } catch (err) { put(box, message(describe(err))); }
      } }, 'Remove server') : null));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      let fresh = s;
      const name = runtime ? form.querySelector('#edit-name').value.trim() : s.name;
      const access = form.querySelector('#edit-access').value;
      // The API takes one change per PATCH.
      if (access !== (s.default_access || 'allow')) fresh = await api('PATCH', path, { default_access: access });
      if (name !== s.name) fresh = await api('PATCH', path, { name });
      put(box, message('Saved.', 'ok'));
      if (fresh.name !== s.name) location.hash = `#/servers/${enc(fresh.name)}`;
    } catch (err) {
      noteForbidden(err);
      showFieldErrors(form, box, err);
    }
  });
  return form;
}

// ---- API keys -----------------------------------------------------------------

/** keysPage lists, creates (the secret shown once) and revokes API keys. */
async function keysPage(_m, seq) {
  const listBox = el('div');
  const created = el('div', { 'aria-live': 'polite' });
  const load = async () => {
    try {
      const body = await api('GET', '/api/v1/keys');
      if (!current(seq)) return;
      const keys = body.keys || body || [];
      put(listBox, keys.length === 0 ? el('p', { class: 'muted' }, 'No keys.')
        : table(['Key', 'Agent', 'Admin', 'Workspace', 'Created', 'Expires', ''], keys.map((k) => el('tr', {},
          el('td', { class: 'mono' }, (k.prefix || k.id) + '…'), el('td', {}, k.agent_id || ''), el('td', {}, k.admin ? 'yes' : ''), el('td', {}, k.workspace || ''),
          el('td', {}, fmtTime(k.created_at)), el('td', {}, k.expires_at ? fmtTime(k.expires_at) : 'never'),
          el('td', {}, k.revoked_at ? 'revoked' : el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke key ${k.prefix || k.id} of ${k.agent_id}`, onclick: async () => {
            if (!confirm(`Revoke ${k.prefix || k.id}…? Callers using it are refused at once.`)) return;
            try { await api('DELETE', `/api/v1/keys/${enc(k.id)}`); put(created, message('Revoked.', 'ok')); load(); } catch (err) { put(created, message(describe(err))); }
          } }, 'Revoke')))), 'API keys'));
    } catch (err) { put(listBox, message(describe(err))); }
  };
  const form = el('form', { class: 'panel', id: 'key-form', 'aria-labelledby': 'h-newkey' },
    el('h2', { id: 'h-newkey' }, 'Create a key'),
    field('key-agent', 'Agent ID', { required: true, 'data-field': 'agent_id' }),
    field('key-workspace', 'Workspace (optional)', { 'data-field': 'workspace' }),
    el('div', { class: 'field inline' }, el('input', { type: 'checkbox', id: 'key-admin' }), el('label', { for: 'key-admin' }, 'Admin')),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Create key')));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = (id) => form.querySelector('#' + id).value.trim();
    const req = { agent_id: v('key-agent'), admin: form.querySelector('#key-admin').checked };
    if (v('key-workspace')) req.workspace = v('key-workspace');
    try {
      const k = await api('POST', '/api/v1/keys', req);
      form.reset();
      put(created, el('div', { class: 'msg ok', role: 'status' }, 'Key created. Copy it now: it is not shown again.',
        el('pre', { id: 'new-key', class: 'mono' }, k.key)));
      load();
    } catch (err) { showFieldErrors(form, created, err); }
  });
  page('API keys', el('p', { class: 'muted' }, 'Grants of tools to agents are on the Policies page.'), created, form,
    el('section', { 'aria-labelledby': 'h-keys' }, el('h2', { id: 'h-keys' }, 'Keys'), listBox));
  await load();
}

// ---- OAuth ----------------------------------------------------------------

/** oauthOff tells the answer of a gateway that does not run the built-in authorization server. */
const oauthOff = (err) => err instanceof APIError && err.code === 'oauth_server_off';

/**
 * oauthPage shows the built-in OAuth authorization server's clients and the
 * grants users gave them, with Delete (a client and its grants) and Revoke
 * (one grant). On a gateway that does not run that server the API answers
 * 404 oauth_server_off, and the page says the server is not running.
 */
async function oauthPage(_m, seq) {
  const status = el('div', { 'aria-live': 'polite' });
  const content = el('div');
  const clientsBox = el('div', { id: 'oauth-clients' });
  const grantsBox = el('div', { id: 'oauth-grants' });
  const all = el('input', { type: 'checkbox', id: 'oauth-all' });
  const filter = el('form', { class: 'row', 'aria-label': 'Filter grants' },
    input('oauth-subject', 'User (agent ID)'),
    el('div', { class: 'field inline' }, all, el('label', { for: 'oauth-all' }, 'Also revoked and expired')),
    el('button', { type: 'submit', class: 'secondary' }, 'Apply'));
  const sections = [
    el('section', { 'aria-labelledby': 'h-oauth-clients' }, el('h2', { id: 'h-oauth-clients' }, 'Clients'),
      el('p', { class: 'muted' }, 'Applications that registered with the gateway, or presented a client ID metadata document. Deleting one revokes its grants; its users must authorize it again.'),
      clientsBox),
    el('section', { 'aria-labelledby': 'h-oauth-grants' }, el('h2', { id: 'h-oauth-grants' }, 'Grants'),
      el('p', { class: 'muted' }, 'A grant is one user\u2019s consent to one client. Revoking it stops its refresh tokens at once and its access tokens on their next request.'),
      filter, grantsBox),
  ];
  const act = async (button, req, done) => {
    button.disabled = true;
    try {
      await req();
      put(status, message(done, 'ok'));
      announce(done);
      await load();
    } catch (err) {
      button.disabled = false;
      noteForbidden(err);
      put(status, message(describe(err)));
    }
  };
  const clientRow = (c) => {
    const name = c.client_name || 'an unnamed application';
    const del = el('button', { type: 'button', class: 'danger', 'aria-label': `Delete client ${name}` }, 'Delete');
    del.addEventListener('click', () => {
      const n = c.active_grants;
      if (!confirm(`Delete ${name} (${c.client_id})? ${n === 1 ? 'Its active grant is' : `Its ${n} active grants are`} revoked, and its users must authorize it again.`)) return;
      act(del, () => api('DELETE', `/api/v1/oauth/clients/${enc(c.client_id)}`), `Deleted ${name}; its grants are revoked.`);
    });
    return el('tr', { 'data-client': c.client_id },
      el('th', { scope: 'row' }, name),
      el('td', { class: 'mono', title: c.client_id }, clip(c.client_id, 48)),
      el('td', {}, c.kind === 'metadata_document' ? 'metadata document' : 'registered'),
      el('td', { class: 'mono' }, c.token_endpoint_auth_method),
      el('td', { class: 'mono' }, (c.redirect_uris || []).map((u) => el('div', {}, u))),
      el('td', { class: 'num' }, String(c.active_grants)),
      el('td', {}, fmtTime(c.created_at)),
      el('td', {}, del));
  };
  const grantRow = (g) => {
    const client = g.client_name || g.client_id;
    const st = g.active ? 'active' : g.revoked_at ? 'revoked' : 'expired';
    let action = el('span', { class: 'muted' }, '–');
    if (g.active) {
      action = el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke grant of ${g.subject} to ${client}` }, 'Revoke');
      action.addEventListener('click', () => {
        if (!confirm(`Revoke ${g.subject}\u2019s grant to ${client}? Its tokens stop working; the application must ask for a new authorization.`)) return;
        act(action, () => api('DELETE', `/api/v1/oauth/grants/${enc(g.id)}`), `Revoked the grant of ${g.subject} to ${client}.`);
      });
    }
    return el('tr', { 'data-grant': g.id },
      el('th', { scope: 'row', class: 'mono' }, g.id),
      el('td', { title: g.client_id }, client),
      el('td', { title: g.identity_id || '' }, g.subject),
      el('td', { class: 'mono' }, g.scope),
      el('td', { 'data-field': 'status' }, badge(st), g.revoked_reason ? el('div', { class: 'muted' }, g.revoked_reason) : null),
      el('td', {}, fmtTime(g.created_at)),
      el('td', {}, fmtTime(g.refreshed_at)),
      el('td', {}, fmtTime(g.expires_at)),
      el('td', {}, action));
  };
  const load = async () => {
    const q = new URLSearchParams();
    const subject = filter.elements['oauth-subject'].value.trim();
    if (subject) q.set('subject', subject);
    if (!all.checked) q.set('active', 'true');
    let clients, grants;
    try {
      [clients, grants] = await Promise.all([api('GET', '/api/v1/oauth/clients'), api('GET', '/api/v1/oauth/grants?' + q)]);
    } catch (err) {
      if (!current(seq)) return;
      noteForbidden(err);
      if (oauthOff(err)) {
        put(content, el('div', { id: 'oauth-off', class: 'msg info', role: 'status' },
          el('strong', {}, 'The built-in OAuth authorization server is not running on this gateway.'), ' ',
          'It runs with auth.mode: oauth and no external issuer (see docs/auth.md); then the MCP clients that sign users in with OAuth, and the grants users give them, are listed here.'));
        return;
      }
      put(status, message(describe(err)));
      return;
    }
    if (!current(seq)) return;
    if (!content.contains(clientsBox)) put(content, sections);
    const cl = clients.clients || [];
    put(clientsBox, cl.length === 0 ? el('p', { class: 'muted' }, 'No clients have registered yet.')
      : table(['Name', 'Client ID', 'Kind', 'Auth', 'Redirect URIs', { label: 'Active grants', num: true }, 'Registered', ''], cl.map(clientRow), 'OAuth clients'));
    const gl = grants.grants || [];
    put(grantsBox, gl.length === 0 ? el('p', { class: 'muted' }, all.checked ? 'No grants.' : 'No active grants.')
      : table(['Grant', 'Client', 'User', 'Scope', 'Status', 'Given', 'Last refresh', 'Expires', ''], gl.map(grantRow), 'OAuth grants'));
  };
  filter.addEventListener('submit', (e) => { e.preventDefault(); load(); });
  all.addEventListener('change', load);
  page('OAuth', status, content,
    el('div', { class: 'actions' }, el('button', { type: 'button', class: 'secondary', onclick: () => load() }, 'Refresh')));
  await load();
}

// ---- overview -------------------------------------------------------------

const WINDOWS = [['5m', '5 minutes'], ['15m', '15 minutes'], ['1h', '1 hour']];

/** seriesPoints turns a series' points into [t ms, value] pairs of f. */
const seriesPoints = (s, f) => s.points.map((p) => [Date.parse(p.t), f(p, s.step_seconds)]);
const perSecond = (p, step) => p.calls / step;
const errorPct = (p) => (p.calls ? (100 * p.errors) / p.calls : 0);

/**
 * overviewPage charts the last hour of traffic from the gateway's
 * in-memory series (GET /api/v1/stats/timeseries): the gateway as a whole,
 * each server, and the busiest tools. A finished call (the
 * invocation.completed event) redraws it, at most once a second.
 */
async function overviewPage(_m, seq) {
  let win = sessionStorage.getItem('sb.overview.window') || '1h';
  const charts = el('div', { id: 'overview-charts', 'aria-live': 'off' });
  const status = el('div', { 'aria-live': 'polite' });
  const picker = el('select', { id: 'overview-window' }, WINDOWS.map(([v, l]) => el('option', { value: v, selected: v === win }, l)));
  const section = (id, title, ...body) => el('section', { 'aria-labelledby': id }, el('h2', { id }, title), ...body);
  const draw = (a) => {
    const to = Date.parse(a.end), from = to - a.window_seconds * 1000;
    const gw = a.series.find((s) => s.scope === 'gateway');
    const servers = a.series.filter((s) => s.scope === 'server');
    const tools = a.series.filter((s) => s.scope === 'tool');
    const chart = (id, title, unit, list, f) => lineChart({ id, title, unit, from, to, series: list.map((s) => ({ label: s.name, points: seriesPoints(s, f) })) });
    const total = gw ? gw.calls : 0;
    put(charts,
      section('h-ov-gw', 'Gateway',
        el('p', { class: 'muted', id: 'overview-totals' }, gw ? `${total} call${total === 1 ? '' : 's'}, ${gw.errors} failed, p50 ${gw.p50_ms} ms, p95 ${gw.p95_ms} ms over the window.` : ''),
        gw ? el('div', { class: 'charts' },
          chart('chart-calls', 'Calls per second', '/s', [gw], perSecond),
          chart('chart-errors', 'Error rate', ' %', [gw], errorPct),
          lineChart({ id: 'chart-latency', title: 'Latency', unit: ' ms', from, to, series: [
            { label: 'p50', points: seriesPoints(gw, (p) => p.p50_ms) },
            { label: 'p95', points: seriesPoints(gw, (p) => p.p95_ms) }] })) : null),
      section('h-ov-servers', 'Servers', servers.length === 0 ? el('p', { class: 'muted' }, 'No calls in this window.')
        : el('div', { class: 'charts' },
          chart('chart-server-calls', 'Calls per second', '/s', servers, perSecond),
          chart('chart-server-errors', 'Error rate', ' %', servers, errorPct),
          chart('chart-server-p95', 'p95 latency', ' ms', servers, (p) => p.p95_ms))),
      section('h-ov-tools', 'Top tools', tools.length === 0 ? el('p', { class: 'muted' }, 'No calls in this window.') : [
        el('div', { class: 'charts' },
          chart('chart-tool-calls', 'Calls per second', '/s', tools, perSecond),
          chart('chart-tool-p95', 'p95 latency', ' ms', tools, (p) => p.p95_ms)),
        table(['Tool', 'Server', 'Calls', 'Failed', 'p50 ms', 'p95 ms'], tools.map((s) => el('tr', {},
          el('td', { class: 'mono' }, el('a', { href: `#/tools/${enc(s.name)}` }, s.name)), el('td', {}, s.server || ''),
          el('td', { class: 'num' }, String(s.calls)), el('td', { class: 'num' }, String(s.errors)),
          el('td', { class: 'num' }, String(s.p50_ms)), el('td', { class: 'num' }, String(s.p95_ms)))), 'Busiest tools over the window')]));
  };
  const load = async () => {
    try {
      const a = await api('GET', `/api/v1/stats/timeseries?window=${enc(win)}&top=5`);
      if (!current(seq)) return;
      draw(a);
      put(status);
    } catch (err) {
      if (current(seq)) put(status, message(describe(err)));
    }
  };
  picker.addEventListener('change', () => { win = picker.value; sessionStorage.setItem('sb.overview.window', win); load(); });
  page('Overview',
    el('p', { class: 'muted' }, 'Traffic through the gateway, kept in memory for the last hour (it starts empty when the gateway restarts).'),
    el('div', { class: 'field inline' }, el('label', { for: 'overview-window' }, 'Window'), picker),
    status, charts);
  await load();
  // Redraw on finished calls, at most once a second; poll when the events
  // stream is down, and every 10 s anyway so the time axis moves on.
  let pending = null;
  onLeave(() => clearTimeout(pending));
  onEvent((type) => {
    if (type !== 'invocation.completed' || pending) return;
    pending = setTimeout(() => { pending = null; load(); }, 1000);
  });
  every(10000, load);
}

// ---- tools ----------------------------------------------------------------

let searchSupported = true;

async function toolsPage(_m, seq) {
  const body = await api('GET', '/api/v1/tools');
  if (!current(seq)) return;
  let all = body.tools || [];
  const input = el('input', { type: 'search', id: 'tool-search', name: 'q', autocomplete: 'off', placeholder: 'e.g. add two numbers', 'aria-describedby': 'tool-search-hint' });
  const hint = el('p', { class: 'hint', id: 'tool-search-hint' }, 'Searches names and descriptions.');
  const count = el('p', { class: 'muted', 'aria-live': 'polite', id: 'tool-count' });
  const tbody = el('tbody');
  const show = (tools, how) => {
    count.textContent = `${tools.length} of ${all.length} tools${how ? ' · ' + how : ''}`;
    put(tbody, ...tools.map((t) => el('tr', { 'data-tool': t.name },
      el('th', { scope: 'row' }, el('a', { href: `#/tools/${enc(t.name)}` }, t.name)),
      el('td', {}, t.server_name || (t.source_server && t.source_server.name) || ''),
      el('td', {}, t.description || ''),
      el('td', {}, t.score !== undefined ? t.score.toFixed(2) : t.available === false ? badge('unavailable') : ''))));
  };
  const local = (q) => {
    const words = q.toLowerCase().split(/\s+/).filter(Boolean);
    return all.filter((t) => {
      const hay = `${t.name} ${t.title || ''} ${t.description || ''} ${t.server_name || ''}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    });
  };
  let searchSeq = 0;
  const search = async () => {
    const q = input.value.trim();
    const mine = ++searchSeq;
    if (!q) return show(all, '');
    if (searchSupported) {
      try {
        const r = await api('POST', '/api/v1/search', { query: q, limit: 50 });
        if (mine !== searchSeq || !current(seq)) return;
        const ranking = r.metadata && r.metadata.ranking;
        return show(r.tools || [], `ranked by the gateway${ranking ? ' (' + ranking + ')' : ''}`);
      } catch (err) {
        if (err.status !== 404 && err.status !== 501) {
          if (mine === searchSeq) put(count, message(describe(err)));
          return;
        }
        searchSupported = false;
      }
    }
    if (mine === searchSeq) show(local(q), 'filtered here');
  };
  let t = null;
  input.addEventListener('input', () => { clearTimeout(t); t = setTimeout(search, 250); });
  onLeave(() => clearTimeout(t));
  const form = el('form', { role: 'search', class: 'panel' },
    el('div', { class: 'row' },
      el('div', { class: 'field' }, el('label', { for: 'tool-search' }, 'Search tools'), input, hint),
      el('button', { type: 'submit' }, 'Search')));
  form.addEventListener('submit', (e) => { e.preventDefault(); clearTimeout(t); search(); });
  const reloadTools = async () => {
    try {
      const b = await api('GET', '/api/v1/tools');
      if (!current(seq)) return;
      all = b.tools || [];
      if (input.value.trim()) search(); else show(all, '');
    } catch { /* the next event tries again */ }
  };
  const quarantine = quarantineSection(seq, reloadTools);
  page('Tools', quarantine.status, quarantine.node, form, count,
    el('div', { class: 'table-wrap' }, el('table', { id: 'tools' },
      el('caption', { class: 'sr-only' }, 'Tools'),
      el('thead', {}, el('tr', {}, ['Tool', 'Server', 'Description', ''].map((h) => el('th', { scope: 'col' }, h)))),
      tbody)));
  show(all, '');
  await quarantine.load();
  // A change is announced as it is detected; the catalog holds the tool
  // back right after, and says so with server.discovered.
  const later = debounce(300, () => { quarantine.load(); reloadTools(); });
  onEvent((type) => { if (type.startsWith('tool.definition_') || type === 'server.discovered') later(); });
  every(15000, () => { if (!state.live) quarantine.load(); });
}

// ---- quarantined tools (tool-definition pinning) ---------------------------

/**
 * lineDiff compares two texts line by line (longest common subsequence) and
 * returns [op, line] pairs: ' ' in both, '-' pinned only, '+' current only.
 */
function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  const n = x.length, m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(['-', x[i++]]);
    else out.push(['+', y[j++]]);
  }
  while (i < n) out.push(['-', x[i++]]);
  while (j < m) out.push(['+', y[j++]]);
  return out;
}

/** fieldText shows a definition field: strings as text, the rest as JSON. */
function fieldText(v) {
  if (v === undefined || v === null) return '(none)';
  return typeof v === 'string' ? v : json(v);
}

/**
 * quarantineSection lists, for admins, the tools held back because their
 * upstream changed their definition since it was pinned: what changed, as
 * a diff of the pinned and current definitions, and an Approve button.
 */
function quarantineSection(seq, onApproved) {
  const node = el('section', { id: 'quarantine', 'aria-labelledby': 'h-quarantine', hidden: true });
  const status = el('div', { 'aria-live': 'polite' });
  const load = async () => {
    if (state.admin === false) return;
    let list;
    try {
      list = (await api('GET', '/api/v1/tools/quarantined')).tools || [];
    } catch (err) {
      if (err.status === 403) noteForbidden(err);
      node.hidden = true; // older gateways and agents have no such list
      return;
    }
    if (!current(seq)) return;
    node.hidden = list.length === 0;
    put(node,
      el('h2', { id: 'h-quarantine' }, `Quarantined tools (${list.length})`),
      el('p', { class: 'muted' }, 'Their upstream changed their definition since the gateway pinned it. They are hidden from clients and their calls are refused until you approve the new definition.'),
      list.map((q) => quarantinePanel(q, status, async () => { await load(); onApproved(); })));
  };
  return { node, status, load };
}

function quarantinePanel(q, status, onApproved) {
  const pinned = q.pinned.definition || {};
  const currentDef = q.current.definition || {};
  const id = `q-${q.name.replace(/[^A-Za-z0-9_-]/g, '-')}`;
  const origin = q.pinned.approved_by ? `approved by ${q.pinned.approved_by}` : 'first seen';
  const approve = el('button', { type: 'button', 'aria-describedby': id }, 'Approve new definition');
  approve.addEventListener('click', async () => {
    approve.disabled = true;
    try {
      await api('POST', `/api/v1/tools/${enc(q.name)}/approve`, { hash: q.current.hash });
      put(status, message(`Approved the new definition of ${q.name}: it is served again.`, 'ok'));
      announce(`${q.name} approved`);
      await onApproved();
    } catch (err) {
      approve.disabled = false;
      noteForbidden(err);
      put(status, message(`Approving ${q.name} failed: ${describe(err)}`));
    }
  });
  return el('article', { class: 'panel quarantined', 'data-quarantined': q.name },
    el('h3', { id }, el('span', { class: 'mono' }, q.name), ' ', badge('QUARANTINED')),
    el('p', {}, `Server ${q.server_name} changed its ${(q.changed_fields || []).join(', ') || 'definition'}`,
      q.changed_at ? ` on ${fmtTime(q.changed_at)}` : '', `. Pinned definition ${q.pinned.hash.slice(0, 12)} (${origin} ${fmtTime(q.pinned.pinned_at)}); current ${q.current.hash.slice(0, 12)}.`),
    (q.changed_fields || []).map((f) => [
      el('h4', {}, f),
      el('pre', { class: 'diff', tabindex: '0', 'aria-label': `${f}: pinned lines marked −, current lines marked +` },
        lineDiff(fieldText(pinned[f]), fieldText(currentDef[f])).map(([op, line]) =>
          el('span', { class: op === '-' ? 'del' : op === '+' ? 'ins' : null }, `${op} ${line}`))),
    ]),
    el('div', { class: 'actions' }, approve));
}

function renderContent(c) {
  switch (c.type) {
    case 'text':
      return el('pre', { class: 'result-item result-text' }, c.text);
    case 'image':
      return el('img', { class: 'result-item', alt: 'image result', src: `data:${c.mimeType};base64,${c.data}` });
    default:
      return el('pre', { class: 'result-item' }, json(c));
  }
}

async function toolPage(name, seq) {
  const t = await api('GET', `/api/v1/tools/${enc(name)}`);
  if (!current(seq)) return;
  const form = schemaForm(t.input_schema);
  const out = el('div', { id: 'call-result', 'aria-live': 'polite' });
  const submit = el('button', { type: 'submit' }, 'Call tool');
  const f = el('form', { class: 'panel', id: 'try-it', 'aria-labelledby': 'h-try' }, form.node, submit);
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    let args;
    try { args = form.read(); } catch (err) {
      put(out, message(err.message));
      return;
    }
    submit.disabled = true;
    put(out, message('Calling…', 'info'));
    try {
      const r = await api('POST', '/api/v1/tools/call', { name: t.name, arguments: args });
      const md = r.metadata || {};
      put(out, 
        message(r.isError ? 'The tool reported an error:' : `Result from ${md.routed_to || t.server_name} in ${md.execution_time_ms ?? '?'} ms${md.served_by ? ' (served by ' + md.served_by + ')' : ''}:`, r.isError ? 'error' : 'ok'),
        ...(r.content || []).map(renderContent),
        r.structuredContent !== undefined ? [el('h3', {}, 'Structured content'), el('pre', {}, json(r.structuredContent))] : null);
      announce(r.isError ? 'The call returned an error.' : 'The call succeeded.');
    } catch (err) {
      put(out, message(`Call failed: ${describe(err)}`));
      announce('The call failed.');
    } finally {
      submit.disabled = false;
    }
  });
  const ann = t.annotations || {};
  const hints = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'].filter((k) => ann[k] !== undefined).map((k) => `${k.replace('Hint', '')}: ${ann[k]}`);
  const h = page('');
  put(h, el('a', { href: '#/tools', class: 'muted', 'aria-label': 'Back to tools' }, 'Tools /'), ' ', t.name, ' ', t.available ? null : badge('unavailable'));
  add(main, 
    el('p', {}, t.description || el('span', { class: 'muted' }, 'No description.')),
    el('dl', { class: 'props panel' },
      el('dt', {}, 'Server'), el('dd', {}, el('a', { href: `#/servers/${enc(t.server_name)}` }, t.server_name), ' ', badge(t.server_status)),
      el('dt', {}, 'Upstream name'), el('dd', { class: 'mono' }, t.original_name),
      t.title ? [el('dt', {}, 'Title'), el('dd', {}, t.title)] : null,
      hints.length ? [el('dt', {}, 'Annotations'), el('dd', {}, hints.join(', '))] : null),
    el('div', { class: 'grid2' },
      el('section', { 'aria-labelledby': 'h-try' }, el('h2', { id: 'h-try' }, 'Try it'), f, out),
      el('section', { 'aria-labelledby': 'h-schema' }, el('h2', { id: 'h-schema' }, 'Input schema'),
        el('pre', { tabindex: '0', 'aria-label': 'Input schema' }, json(t.input_schema || {})),
        t.output_schema ? [el('h2', {}, 'Output schema'), el('pre', { tabindex: '0', 'aria-label': 'Output schema' }, json(t.output_schema))] : null)));
}

// ---- circuit breakers -----------------------------------------------------

async function breakersPage(_m, seq) {
  const box = el('div');
  const load = async () => {
    try {
      const body = await api('GET', '/api/v1/mcp/circuit-breakers');
      if (!current(seq)) return;
      const list = body.circuit_breakers || [];
      put(box, list.length === 0 ? el('p', { class: 'muted' }, 'No breakers yet: each server:tool gets one on its first call.')
        : table(['Breaker', 'State', { label: 'Failures', num: true }, { label: 'Successes', num: true }, 'Last failure', 'Opened', 'Next attempt'],
          list.map((b) => el('tr', {},
            el('th', { scope: 'row', class: 'mono' }, b.circuit_key),
            el('td', {}, badge(b.state)),
            el('td', { class: 'num' }, String(b.failure_count)),
            el('td', { class: 'num' }, String(b.success_count)),
            el('td', {}, fmtTime(b.last_failure_time)),
            el('td', {}, fmtTime(b.opened_at)),
            el('td', {}, fmtTime(b.next_attempt_at)))), 'Circuit breakers'));
    } catch (err) {
      noteForbidden(err);
      put(box, message(describe(err)));
    }
  };
  page('Circuit breakers', box, el('div', { class: 'actions' }, el('button', { type: 'button', class: 'secondary', onclick: load }, 'Refresh')));
  await load();
  const later = debounce(300, load);
  onEvent((type) => { if (type.startsWith('circuit.')) later(); });
  every(15000, () => { if (!state.live) load(); });
}

// ---- escalations and approval requests ------------------------------------

/**
 * escalationsPage shows the approval requests waiting for a decision (with
 * approve and deny buttons) and what was escalated to the operators'
 * webhook: calls that failed after their retries and fallbacks, and
 * approval requests, with their delivery state and an acknowledge button.
 */
async function escalationsPage(_m, seq) {
  const status = el('div', { role: 'status' });
  const approvalsBox = el('div');
  const escBox = el('div');
  const unacked = el('input', { type: 'checkbox', checked: true });
  const act = async (what, req, done) => {
    try {
      await req();
      put(status, message(done, 'ok'));
      announce(done);
      await load();
    } catch (err) {
      noteForbidden(err);
      put(status, message(`${what} failed: ${describe(err)}`));
    }
  };
  const decide = (a, verb) => {
    const b = el('button', { type: 'button', class: verb === 'deny' ? 'secondary' : null, 'aria-label': `${verb} ${a.id}` },
      verb === 'approve' ? 'Approve' : 'Deny');
    b.addEventListener('click', () => {
      b.disabled = true;
      act(`${verb === 'approve' ? 'Approving' : 'Denying'} ${a.id}`, () => api('POST', `/api/v1/approvals/${enc(a.id)}/${verb}`),
        `${verb === 'approve' ? 'Approved' : 'Denied'} ${a.id}: ${a.name} for ${a.agent_id}.`);
    });
    return b;
  };
  const ack = (x) => {
    const b = el('button', { type: 'button', class: 'secondary', 'aria-label': `acknowledge ${x.id}` }, 'Acknowledge');
    b.addEventListener('click', () => {
      b.disabled = true;
      act(`Acknowledging ${x.id}`, () => api('POST', `/api/v1/escalations/${enc(x.id)}/ack`), `Acknowledged ${x.id}.`);
    });
    return b;
  };
  const load = async () => {
    try {
      const [ap, es] = await Promise.all([
        api('GET', '/api/v1/approvals?status=pending'),
        api('GET', '/api/v1/escalations' + (unacked.checked ? '?unacked=true' : '')),
      ]);
      if (!current(seq)) return;
      const approvals = ap.approvals || [];
      put(approvalsBox, approvals.length === 0 ? el('p', { class: 'muted' }, 'No approval requests are waiting.')
        : table(['Request', 'Tool', 'Agent', 'Arguments', 'Requested', 'Expires', ''],
          approvals.map((a) => el('tr', { 'data-approval': a.id },
            el('th', { scope: 'row', class: 'mono' }, a.id),
            el('td', { class: 'mono' }, a.name),
            el('td', {}, a.agent_id),
            el('td', { class: 'mono', title: a.args_digest }, a.args_digest.slice(0, 12)),
            el('td', {}, fmtTime(a.requested_at)),
            el('td', {}, fmtTime(a.expires_at)),
            el('td', {}, el('div', { class: 'actions' }, decide(a, 'approve'), decide(a, 'deny'))))), 'Pending approval requests'));
      const list = es.escalations || [];
      put(escBox, list.length === 0 ? el('p', { class: 'muted' }, unacked.checked ? 'Nothing to acknowledge.' : 'Nothing was escalated.')
        : table(['Escalation', 'Event', 'Tool', 'Agent', 'Error', { label: 'Attempts', num: true }, 'Created', 'Delivered', ''],
          list.map((x) => el('tr', { 'data-escalation': x.id },
            el('th', { scope: 'row', class: 'mono' }, x.id),
            el('td', {}, x.event),
            el('td', { class: 'mono' }, x.tool || '–'),
            el('td', {}, x.agent_id || '–'),
            el('td', { title: x.error || '' }, x.approval_id ? `approval ${x.approval_id}` : clip(x.error || x.error_code || '–', 80)),
            el('td', { class: 'num' }, String(x.attempts)),
            el('td', {}, fmtTime(x.created_at)),
            el('td', { title: x.delivery_error || '' }, x.delivered_at ? fmtTime(x.delivered_at)
              : x.delivery_attempts > 0 ? `retrying (${x.delivery_attempts} tries)` : 'not yet'),
            el('td', {}, x.acked_at ? `acknowledged by ${x.acked_by}` : ack(x)))), 'Escalations'));
    } catch (err) {
      noteForbidden(err);
      put(escBox, message(describe(err)));
    }
  };
  unacked.addEventListener('change', load);
  page('Escalations', status,
    el('section', { 'aria-labelledby': 'h-approvals' }, el('h2', { id: 'h-approvals' }, 'Approval requests'), approvalsBox),
    el('section', { 'aria-labelledby': 'h-escalations' }, el('h2', { id: 'h-escalations' }, 'Escalated to the operators'),
      el('p', {}, el('label', {}, unacked, ' Only those not acknowledged')), escBox),
    el('div', { class: 'actions' }, el('button', { type: 'button', class: 'secondary', onclick: load }, 'Refresh')));
  await load();
  const later = debounce(300, load);
  onEvent((type) => { if (type.startsWith('escalation.') || type.startsWith('approval.')) later(); });
  every(15000, () => { if (!state.live) load(); });
}

// ---- audit log ------------------------------------------------------------

function input(id, label, attrs = {}) {
  return el('div', { class: 'field' }, el('label', { for: id }, label), el('input', { id, name: id, type: 'text', autocomplete: 'off', ...attrs }));
}

function select(id, label, options) {
  return el('div', { class: 'field' }, el('label', { for: id }, label),
    el('select', { id, name: id }, options.map(([v, t]) => el('option', { value: v }, t))));
}

async function auditPage(_m, seq) {
  const form = el('form', { class: 'panel', id: 'audit-filters', 'aria-label': 'Audit filters' },
    el('div', { class: 'row' },
      input('agent_id', 'Agent'),
      input('server_id', 'Server'),
      input('tool_name', 'Tool'),
      select('kind', 'Kind', [['', 'any'], ['invocation', 'invocation'], ['operation', 'operation']]),
      select('decision', 'Decision', [['', 'any'], ['ALLOW', 'ALLOW'], ['DENY', 'DENY']]),
      select('success', 'Outcome', [['', 'any'], ['true', 'succeeded'], ['false', 'failed']])),
    el('div', { class: 'row' },
      input('since', 'Since', { type: 'datetime-local' }),
      input('until', 'Until', { type: 'datetime-local' }),
      input('limit', 'Page size', { type: 'number', min: 1, max: 1000, value: 50 }),
      el('button', { type: 'submit' }, 'Apply filters')));
  const box = el('div', { 'aria-live': 'polite' });
  const more = el('button', { type: 'button', class: 'secondary', hidden: true }, 'Load more');
  let cursor = '';
  let tbody = null;
  const query = () => {
    const q = new URLSearchParams();
    for (const k of ['agent_id', 'server_id', 'tool_name', 'kind', 'decision', 'success', 'limit']) {
      const v = form.elements[k].value.trim();
      if (v) q.set(k, v);
    }
    for (const k of ['since', 'until']) {
      const v = form.elements[k].value;
      if (v) q.set(k, new Date(v).toISOString().replace(/\.\d{3}Z$/, 'Z'));
    }
    if (cursor) q.set('cursor', cursor);
    return q.toString();
  };
  const row = (r) => el('tr', {},
    el('td', {}, fmtTime(r.invoked_at)),
    el('td', {}, r.kind),
    el('td', {}, r.agent_id),
    el('td', {}, r.server_id),
    el('td', { class: 'mono' }, r.operation || r.tool_name),
    el('td', {}, badge(r.policy_decision)),
    el('td', {}, r.success ? badge('ok') : badge('failing', { title: 'failed' })),
    el('td', { class: 'num' }, r.latency_ms !== undefined ? r.latency_ms.toFixed(1) : ''),
    r.error_message ? el('td', { class: 'err' }, `${r.error_code ? r.error_code + ': ' : ''}${r.error_message}`)
      : el('td', { class: 'summary', title: r.result_summary || '' }, clip(r.result_summary || '', 120)));
  const load = async (append) => {
    if (!append) cursor = '';
    try {
      const body = await api('GET', '/api/v1/audit?' + query());
      if (!current(seq)) return;
      const rows = (body.records || []).map(row);
      if (!append || !tbody) {
        if (rows.length === 0) {
          put(box, el('p', { class: 'muted' }, 'No records match.'));
          tbody = null;
        } else {
          const t = table(['When', 'Kind', 'Agent', 'Server', 'Tool / operation', 'Decision', 'Outcome', { label: 'ms', num: true }, 'Detail'], rows, 'Audit records');
          tbody = t.querySelector('tbody');
          put(box, t);
        }
      } else {
        add(tbody, ...rows);
      }
      cursor = body.next_cursor || '';
      more.hidden = !cursor;
    } catch (err) {
      noteForbidden(err);
      put(box, message(describe(err)));
      more.hidden = true;
    }
  };
  form.addEventListener('submit', (e) => { e.preventDefault(); load(false); });
  more.addEventListener('click', () => load(true));
  page('Audit log', form, box, el('div', { class: 'actions' }, more));
  await load(false);
}

// ---- policies -------------------------------------------------------------

async function policiesPage(_m, seq) {
  const accessBox = el('div');
  const grantsBox = el('div');
  const status = el('div', { 'aria-live': 'polite' });

  const loadAccess = async () => {
    const list = await refreshServers();
    if (!current(seq)) return;
    put(accessBox, table(['Server', 'Default access', 'Set by', 'Allow by default', ''], list.map((s) => {
      const id = `access-${s.id || s.name}`;
      const toggle = el('input', { type: 'checkbox', role: 'switch', id });
      const shown = el('td', {});
      const origin = el('td', {});
      const reset = el('button', { type: 'button', class: 'secondary', hidden: true, 'aria-label': `Reset default access of ${s.name} to the config file's` }, 'Reset to file');
      // show renders what the gateway says of the server: the value in
      // force and, for an override, the config file's value it replaces.
      const show = (v) => {
        const access = v.default_access || 'allow';
        toggle.checked = access === 'allow';
        toggle.setAttribute('aria-checked', String(access === 'allow'));
        put(shown, badge(access.toUpperCase()));
        if (v.default_access_source === 'override') {
          put(origin, el('span', { class: 'override', title: v.default_access_set_at ? `since ${fmtTime(v.default_access_set_at)}` : '' },
            `override by ${v.default_access_set_by || 'an admin'} (file: ${v.file_default_access || 'allow'})`));
          reset.hidden = false;
        } else {
          put(origin, el('span', { class: 'muted' }, v.default_access_source === 'api' ? 'API registration' : 'config file'));
          reset.hidden = true;
        }
      };
      const change = async (method, path, body, done) => {
        toggle.disabled = true;
        reset.disabled = true;
        try {
          const r = await api(method, path, body);
          show(r || s);
          announce(done(r || s));
        } catch (err) {
          noteForbidden(err);
          show(s);
          put(status, message(`${s.name}: ${describe(err)}`));
        } finally {
          toggle.disabled = false;
          reset.disabled = false;
        }
      };
      const path = `/api/v1/aggregator/servers/${enc(s.id || s.name)}`;
      toggle.addEventListener('change', () => change('PATCH', path, { default_access: toggle.checked ? 'allow' : 'deny' },
        (v) => `${s.name}: default access ${v.default_access}${v.default_access_source === 'override' ? ', overriding the config file' : ''}`));
      reset.addEventListener('click', () => change('DELETE', path + '/default_access', undefined,
        (v) => `${s.name}: default access back to the config file's (${v.default_access})`));
      show(s);
      return el('tr', {},
        el('th', { scope: 'row' }, s.name),
        shown,
        origin,
        el('td', {}, el('span', { class: 'switch' }, toggle, el('label', { for: id }, `Allow ${s.name} by default`))),
        el('td', {}, reset));
    }), 'Per-server default access'));
  };

  const loadGrants = async () => {
    try {
      const body = await api('GET', '/api/v1/mcp/policies');
      if (!current(seq)) return;
      const grants = body.grants || [];
      const grantee = (g) => (g.workspace ? `workspace ${g.workspace}` : g.agent_id);
      put(grantsBox, grants.length === 0 ? el('p', { class: 'muted' }, 'No grants.')
        : table(['Agent or workspace', 'Server', 'Tool', 'Actions', 'Granted', 'By', 'Expires', ''], grants.map((g) => el('tr', {},
          el('td', {}, grantee(g)), el('td', {}, g.server_id || ''), el('td', { class: 'mono' }, g.tool_name),
          el('td', {}, (g.actions || []).join(', ')), el('td', {}, fmtTime(g.granted_at)), el('td', {}, g.granted_by || ''),
          el('td', {}, g.expires_at ? fmtTime(g.expires_at) : 'never'),
          el('td', {}, el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke grant of ${g.tool_name} to ${grantee(g)}`, onclick: async (e) => {
            e.target.disabled = true;
            try {
              await api('DELETE', `/api/v1/mcp/policies/grant/${enc(g.id)}`);
              put(status, message(`Revoked ${g.tool_name} from ${grantee(g)}.`, 'ok'));
              loadGrants();
            } catch (err) {
              e.target.disabled = false;
              put(status, message(describe(err)));
            }
          } }, 'Revoke')))), 'Grants'));
    } catch (err) {
      noteForbidden(err);
      put(grantsBox, message(describe(err)));
    }
  };

  const grantForm = el('form', { class: 'panel', 'aria-labelledby': 'h-grant' },
    el('h2', { id: 'h-grant' }, 'Grant a tool'),
    el('div', { class: 'row' },
      select('grant-to', 'Grant to', [['agent', 'an agent'], ['workspace', 'every identity of a workspace']]),
      input('grant-agent', 'Agent ID or workspace', { required: true }),
      input('grant-tool', 'Tool or pattern', { required: true, placeholder: 'demo.echo or demo.*' }),
      input('grant-server', 'Server (optional)'),
      input('grant-actions', 'Actions', { value: 'invoke' }),
      input('grant-expires', 'Expires (optional)', { type: 'datetime-local' }),
      el('button', { type: 'submit' }, 'Grant')));
  grantForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = (id) => grantForm.elements[id].value.trim();
    const req = {
      tool_name: v('grant-tool'), server_id: v('grant-server'),
      actions: v('grant-actions').split(',').map((s) => s.trim()).filter(Boolean),
    };
    const toWorkspace = grantForm.elements['grant-to'].value === 'workspace';
    if (toWorkspace) req.workspace = v('grant-agent');
    else req.agent_id = v('grant-agent');
    if (v('grant-expires')) req.expires_at = new Date(v('grant-expires')).toISOString();
    try {
      await api('POST', '/api/v1/mcp/policies/grant', req);
      put(status, message(`Granted ${req.tool_name} to ${toWorkspace ? `workspace ${req.workspace}` : req.agent_id}.`, 'ok'));
      grantForm.reset();
      loadGrants();
    } catch (err) {
      noteForbidden(err);
      put(status, message(describe(err)));
    }
  });

  page('Policies', status,
    el('section', { 'aria-labelledby': 'h-access' }, el('h2', { id: 'h-access' }, 'Default access per server'),
      el('p', { class: 'muted' }, 'Deny admits only callers whose allow list (allow_servers, mcpServerAllowIds) names the server; allow (the default) admits everyone else the policy allows. A change to a server of the config file is kept as an override of the file until you reset it.'),
      accessBox),
    el('section', { 'aria-labelledby': 'h-grants' }, el('h2', { id: 'h-grants' }, 'Grants'), grantsBox),
    grantForm);
  await Promise.all([loadAccess(), loadGrants()]);
  onEvent((type) => { if (type === 'policy.changed') { loadGrants(); loadAccess().catch(() => {}); } });
}

boot();
