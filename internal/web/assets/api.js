// The REST API client of the dashboard: same origin, the signed-in key as a
// bearer, errors in the API's one shape, and the events stream read with
// fetch (EventSource cannot send an Authorization header).

const KEY = 'switchboard.apiKey';

/** An API failure: status 0 means the gateway could not be reached. */
export class APIError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export const session = {
  get key() { return sessionStorage.getItem(KEY) || ''; },
  set key(v) {
    if (v) sessionStorage.setItem(KEY, v);
    else sessionStorage.removeItem(KEY);
  },
  /** Called on a 401 from any request after sign-in. */
  onUnauthorized: null,
};

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  if (session.key) h.Authorization = 'Bearer ' + session.key;
  return h;
}

/** api does one request and returns the decoded JSON body (null when empty). */
export async function api(method, path, body, opts = {}) {
  // The gateway takes state-changing requests only as JSON (its guard
  // against cross-site forms), bodyless ones included.
  const json = body !== undefined || method !== 'GET';
  const init = { method, headers: headers(json ? { 'Content-Type': 'application/json' } : {}), cache: 'no-store', signal: opts.signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new APIError(0, 'unreachable', 'cannot reach the gateway: ' + e.message);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    const err = new APIError(resp.status, e.code || 'http_' + resp.status, e.message || resp.statusText || 'HTTP ' + resp.status, e.details);
    if (resp.status === 401 && !opts.noAuthHook && session.onUnauthorized) session.onUnauthorized(err);
    throw err;
  }
  return data;
}

/** describe turns any error into one line for the page. */
export function describe(err) {
  if (err instanceof APIError) return err.status ? `${err.message} (${err.status} ${err.code})` : err.message;
  return String(err && err.message || err);
}

/**
 * parseSSE splits buf into complete Server-Sent Events frames and returns
 * them with the unfinished rest. Comment lines (": keepalive") are skipped.
 */
export function parseSSE(buf) {
  const text = buf.replace(/\r\n?/g, '\n');
  const blocks = text.split('\n\n');
  const rest = blocks.pop();
  const events = [];
  for (const block of blocks) {
    let type = 'message', id = '', data = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
    if (data.length === 0) continue;
    let payload = data.join('\n');
    try { payload = JSON.parse(payload); } catch { /* keep the text */ }
    events.push({ type, id, data: payload });
  }
  return { events, rest };
}

/**
 * EventStream follows GET /api/v1/events and reconnects with exponential
 * backoff (1 s doubling to 30 s, with jitter) until stopped. onState gets
 * "live", "reconnecting" or "unavailable" (the caller may not subscribe).
 */
export class EventStream {
  constructor(onEvent, onState) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.stopped = true;
    this.ctrl = null;
    this.timer = null;
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.run();
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
    clearTimeout(this.timer);
    if (this.wake) this.wake();
  }

  async run() {
    let delay = 1000;
    while (!this.stopped) {
      this.ctrl = new AbortController();
      try {
        const resp = await fetch('/api/v1/events', { headers: headers({ Accept: 'text/event-stream' }), cache: 'no-store', signal: this.ctrl.signal });
        if ([401, 403, 404, 501].includes(resp.status)) {
          this.stopped = true;
          this.onState('unavailable', resp.status);
          return;
        }
        if (!resp.ok || !resp.body) throw new Error('HTTP ' + resp.status);
        this.onState('live');
        delay = 1000;
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          const { events, rest } = parseSSE(buf);
          buf = rest;
          for (const ev of events) this.onEvent(ev);
        }
      } catch {
        // Dropped or refused: fall through to the backoff.
      }
      if (this.stopped) return;
      this.onState('reconnecting');
      const wait = delay / 2 + Math.random() * delay / 2;
      delay = Math.min(delay * 2, 30000);
      await new Promise((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, wait);
      });
    }
  }
}
