// lib.js: what every view uses: the API client, a DOM builder, formatters.

const TOKEN_KEY = 'tracebridge-token';

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError carries the HTTP status and the API's message.
export class ApiError extends Error {
  /**
   * @param {number} status 0: no answer
   * @param {string} message
   * @param {string} path
   */
  constructor(status, message, path) {
    super(message);
    this.status = status;
    this.path = path;
  }
}

// api calls the REST API: path is relative to the origin ("/api/v1/…"),
// params an object of query parameters (arrays repeat), opts fetch options
// (body objects are sent as JSON). It answers the parsed JSON, or text for
// other media types, and throws ApiError with the API's message.
// opts.as: 'exact' parses JSON with parseExact (integers beyond 2^53,
// such as unix ns, as strings of their digits), 'blob' answers the body
// as it came (a download).
export async function api(path, params, opts = {}) {
  const url = path + query(params);
  const headers = Object.assign({}, opts.headers || {});
  const t = token();
  if (t) headers['Authorization'] = 'Bearer ' + t;
  let body = opts.body;
  if (body !== undefined && typeof body !== 'string') {
    body = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  let resp;
  try {
    resp = await fetch(url, { method: opts.method || 'GET', headers, body, signal: opts.signal, credentials: 'same-origin' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, `${path}: the bridge did not answer (${e.message})`, path);
  }
  const type = resp.headers.get('Content-Type') || '';
  if (resp.ok && opts.as === 'blob') return resp.blob();
  let data;
  if (!type.includes('json')) data = await resp.text();
  else if (opts.as === 'exact') data = await resp.text().then(parseExact).catch(() => null);
  else data = await resp.json().catch(() => null);
  if (!resp.ok) {
    let msg = (data && data.error) || (typeof data === 'string' && data) || resp.statusText;
    if (resp.status === 401) msg += ' — set a token with the Token button';
    throw new ApiError(resp.status, `${resp.status}: ${msg}`, path);
  }
  return data;
}

// parseExact is JSON.parse, except that an integer beyond ±(2^53−1),
// which a JavaScript number would round (a Kieker traceId such as
// 4658150164341456896 in a record of the live stream), comes back as the
// string of its digits. Digits inside strings are left alone; text
// without 16 digits in a row is parsed as it is.
/** @param {string} text @returns {any} */
export function parseExact(text) {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let out = '', last = 0, inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
      continue;
    }
    if (c === 34) { inString = true; continue; }
    if (c !== 45 && (c < 48 || c > 57)) continue;
    let j = i + 1;
    while (j < text.length && /[0-9.eE+-]/.test(text[j])) j++;
    const tok = text.slice(i, j);
    if (/^-?\d{16,}$/.test(tok) && !Number.isSafeInteger(Number(tok))) {
      out += text.slice(last, i) + '"' + tok + '"';
      last = j;
    }
    i = j - 1;
  }
  return JSON.parse(out + text.slice(last));
}

// query renders params as a query string ("" when empty); empty values
// are left out.
/**
 * @param {Object<string, unknown> | null | undefined} params
 * @returns {string}
 */
export function query(params) {
  if (!params) return '';
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    if (Array.isArray(v)) { for (const x of v) if (x !== '' && x != null) q.append(k, String(x)); } else q.append(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

// h builds an element: h('div', {class: 'x', onclick: f}, 'text', child…).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k in el && typeof v !== 'string') el[k] = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// fill empties el and appends children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// errorBox is what a panel shows instead of its content when a call
// failed.
export function errorBox(err) {
  return h('div', { class: 'error', role: 'alert' }, err && err.message ? err.message : String(err));
}

// guard runs f, showing its error in el (and answering undefined).
export async function guard(el, f) {
  try {
    return await f();
  } catch (e) {
    if (e.name === 'AbortError') return undefined;
    fill(el, errorBox(e));
    return undefined;
  }
}

// banner shows a message across the page until the next navigation.
export function banner(msg) {
  const b = document.getElementById('banner');
  if (!msg) { b.hidden = true; b.textContent = ''; return; }
  b.textContent = msg;
  b.hidden = false;
}

// fmtDur formats nanoseconds: 950ns, 12.3µs, 4.56ms, 1.23s, 2m03s.
/** @param {number | null | undefined} ns @returns {string} */
export function fmtDur(ns) {
  if (ns == null || isNaN(ns)) return '';
  const a = Math.abs(ns);
  if (a < 1e3) return Math.round(ns) + 'ns';
  if (a < 1e6) return trim(ns / 1e3) + 'µs';
  if (a < 1e9) return trim(ns / 1e6) + 'ms';
  if (a < 60e9) return trim(ns / 1e9) + 's';
  const s = Math.round(ns / 1e9);
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** @param {number} x */
function trim(x) {
  const a = Math.abs(x);
  return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
}

// fmtTime formats an RFC 3339 string, ns or ms since the epoch as local
// time with milliseconds.
/** @param {string | number | null | undefined} t @returns {string} */
export function fmtTime(t) {
  if (t == null || t === '') return '';
  let d;
  if (typeof t === 'number') d = new Date(t > 1e15 ? t / 1e6 : t);
  else d = new Date(t);
  if (isNaN(d.getTime())) return String(t);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// fmtNum formats a count with thousands separators; fmtBytes a size.
/** @param {number | string | null | undefined} n @returns {string} */
export function fmtNum(n) { return n == null ? '' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 2 }); }
/** @param {number | null | undefined} n @returns {string} */
export function fmtBytes(n) {
  if (n == null) return '';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}

// color picks a stable colour for a name (a service, a host, a class, a
// frame) from its hash (FNV-1a): tone true for a light one (a fill behind
// text), 'warm' for a flame graph's reds to yellows.
/**
 * @param {string} name
 * @param {boolean | 'warm'} [tone]
 * @returns {string}
 */
export function color(name, tone) {
  let x = 2166136261;
  for (let i = 0; i < name.length; i++) { x ^= name.charCodeAt(i); x = Math.imul(x, 16777619); }
  x >>>= 0;
  if (tone === 'warm') return `hsl(${x % 50}, ${70 + (x >>> 8) % 20}%, ${58 + (x >>> 16) % 12}%)`;
  return `hsl(${x % 360}, 55%, ${tone ? 85 : 62}%)`;
}

// navigate goes to an address of the UI without reloading the page.
export function navigate(url, replace) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  window.dispatchEvent(new Event('tb-navigate'));
}

// link is an anchor the router follows without reloading.
export function link(href, ...children) {
  return h('a', { href, 'data-nav': '' }, ...children);
}

// canvasFor sizes a canvas for the device's pixel ratio and answers its
// 2D context scaled to CSS pixels.
export function canvasFor(canvas, width, height) {
  const r = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(width * r));
  canvas.height = Math.max(1, Math.round(height * r));
  canvas.style.width = width + 'px';
  canvas.style.height = height + 'px';
  const ctx = canvas.getContext('2d');
  ctx.setTransform(r, 0, 0, r, 0, 0);
  return ctx;
}

// sized is canvasFor that keeps the canvas (and spares the browser a new
// bitmap) while its size stays the same.
export function sized(canvas, w, h) {
  const r = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * r) || canvas.height !== Math.round(h * r)) return canvasFor(canvas, w, h);
  const g = canvas.getContext('2d');
  g.setTransform(r, 0, 0, r, 0, 0);
  return g;
}

// setQuery replaces the address's query with params (a view's state)
// without reloading or remounting the view.
export function setQuery(params) {
  history.replaceState(null, '', location.pathname + query(params));
  window.dispatchEvent(new Event('tb-remember'));
}

// download fetches an answer of the API (with the token, as api does)
// and saves it as a file named filename.
export async function download(path, params, filename) {
  const blob = await api(path, params, { as: 'blob' });
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  // The browser has the blob once the click is handled.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
