// The API, as the console calls it: same origin only, the admin key from this tab's sessionStorage
// as a Bearer header (never in a URL or a cookie), errors as thrown ApiError with the problem's code;
// and what every page uses: /metrics parsed, formatting, h() for the DOM, the pager of a cursor-paged
// list, the confirmation dialog.
const KEY = 'tollgate.key';

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

// Hooks the shell sets: called when the server refuses the key (401).
export const hooks = { unauthorized: () => {} };

// `signal` (an AbortSignal) cancels the request: the change feed's long-poll is aborted when the
// page is hidden or signed out. `withStatus`: the answer as {status, value}, for a call whose 200
// and 201 say different things (PUT /v1/prices/{feature}: 201 a new version, 200 nothing changed).
export async function api(path, { method = 'GET', body, keyOverride, text = false, signal, withStatus = false } = {}) {
  const headers = { Authorization: `Bearer ${keyOverride ?? key.get() ?? ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer', signal,
  });
  if (!r.ok) {
    let code = '', detail = '';
    try { const p = await r.json(); code = p.code || ''; detail = p.detail || ''; } catch { /* not JSON */ }
    if (r.status === 401 && keyOverride === undefined) hooks.unauthorized(detail);
    throw new ApiError(r.status, code, detail || `${method} ${path}: HTTP ${r.status}`);
  }
  const value = await (text ? r.text() : r.json());
  return withStatus ? { status: r.status, value } : value;
}

export const enc = encodeURIComponent;

// Prometheus text format → [{name, labels: {..}, value}].
export function parseProm(text) {
  const out = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const l of text.split('\n')) {
    if (!l || l[0] === '#') continue;
    const m = line.exec(l);
    if (!m) continue;
    const labels = {};
    if (m[2]) for (const x of m[2].matchAll(label)) labels[x[1]] = x[2].replace(/\\(.)/g, '$1');
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

// The sum of a metric's samples whose labels match `where` (absent → 0).
export function metric(samples, name, where = {}) {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(where).every(([k, v]) => (typeof v === 'function' ? v(s.labels[k]) : s.labels[k] === v))) sum += s.value;
  }
  return sum;
}

// --- formatting and DOM ---------------------------------------------------------------------------
export function duration(ms) {
  if (ms == null || Number.isNaN(ms)) return '–';
  const neg = ms < 0; ms = Math.abs(ms);
  const s = Math.floor(ms / 1000), m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  const t = d ? `${d}d ${h % 24}h` : h ? `${h}h ${m % 60}m` : m ? `${m}m ${s % 60}s` : `${(ms / 1000).toFixed(1)}s`;
  return neg ? `-${t}` : t;
}
export const num = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));
// A hold's draw (Hold.lots: what it took from each credit lot) for a cell: "lot_1 3 · lot_2 2";
// '' when it took nothing from a lot (the overdraft, or a server older than lots).
export const drawText = (hold) => (hold.lots || []).map((d) => `${d.lot_id} ${num(d.amount)}`).join(' · ');

// h('td', {class: 'num', dataset: {x: 1}}, 'text', child): text is always set as text (no HTML).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

// A pager over a cursor-paged list (the webhook pages', the prices'): Previous/Next keep a stack of
// starting_after values; read() takes a page's items, its has_more and the cursor of an item.
export function pager(prefix, onMove) {
  const state = { page: 0, hasMore: false, cursors: [''] };
  const info = h('span', { class: 'note', id: `${prefix}-page` });
  const element = h('div', { class: 'pager' },
    h('button', { type: 'button', id: `${prefix}-prev`, onclick: () => { if (state.page > 0) { state.page--; onMove(); } } }, '← Previous'),
    h('button', { type: 'button', id: `${prefix}-next`, onclick: () => { if (state.hasMore) { state.page++; onMove(); } } }, 'Next →'),
    info);
  const after = () => state.cursors[state.page];
  const read = (items, hasMore, idOf) => {
    state.hasMore = hasMore;
    if (items.length) state.cursors[state.page + 1] = idOf(items[items.length - 1]);
    info.textContent = `page ${state.page + 1}${hasMore ? '' : ' (last)'}`;
  };
  const reset = () => { state.page = 0; state.cursors = ['']; };
  return { element, after, read, reset };
}

// An in-page confirmation (a <dialog>): resolves true on Confirm.
export function confirmAction(text) {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.returnValue = '';
    dialog.showModal();
  });
}

export function randomRef(prefix) {
  const b = new Uint8Array(6);
  crypto.getRandomValues(b);
  return `${prefix}-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}
