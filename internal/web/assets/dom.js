// Tiny DOM helpers. Text always goes in as text nodes, never as HTML, so
// nothing the gateway or an upstream returns can inject markup.

/** el creates an element: attributes (null/undefined/false skipped), then children. */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  append(node, children);
  return node;
}

/** put replaces node's children (nested arrays flattened, null skipped). */
export function put(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** add appends children like [el] does. */
export function add(node, ...children) {
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(node, c);
    else node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** fmtDuration renders seconds as "2h 5m", "3m 12s" or "8s". */
export function fmtDuration(sec) {
  if (sec === null || sec === undefined || !Number.isFinite(sec) || sec < 0) return '—';
  sec = Math.floor(sec);
  const d = Math.floor(sec / 86400), h = Math.floor(sec % 86400 / 3600), m = Math.floor(sec % 3600 / 60), s = sec % 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

/** fmtTime renders an RFC 3339 time in the reader's locale. */
export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** badge is a status pill; the colour class comes from the value. */
export function badge(value, extra) {
  const v = value || 'unknown';
  return el('span', { class: `badge s-${String(v).replace(/[^A-Za-z_]/g, '')}`, ...extra }, v);
}
