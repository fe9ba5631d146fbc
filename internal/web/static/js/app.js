// app.js: the page's router. Each view is a module with
//   export function mount(el, ctx) → optional cleanup function
// where ctx = {path, params (route parameters), query (URLSearchParams)}.
// A view keeps its state in the address (history.replaceState) so a
// page can be shared and reloaded.

import { banner, navigate, setToken, token } from './lib.js';
import * as search from './search.js';
import * as trace from './trace.js';
import * as compare from './compare.js';
import * as hosts from './hosts.js';
import * as analysis from './analysis.js';
import * as live from './live.js';
import * as consoleView from './console.js';

const routes = [
  { re: /^\/(search)?$/, view: search, nav: 'search' },
  { re: /^\/trace\/([^/]+)$/, view: trace, nav: 'search', names: ['id'] },
  { re: /^\/compare$/, view: compare, nav: 'compare' },
  { re: /^\/hosts$/, view: hosts, nav: 'hosts' },
  { re: /^\/analysis$/, view: analysis, nav: 'analysis' },
  { re: /^\/live$/, view: live, nav: 'live' },
  { re: /^\/console$/, view: consoleView, nav: 'console' },
];

let cleanup = null;
let current = '';

function route() {
  const path = location.pathname;
  const key = path + location.search;
  if (key === current) return;
  // A view that only changed its query keeps running if it says so.
  current = key;
  banner('');
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } cleanup = null; }
  const el = document.getElementById('view');
  el.replaceChildren();
  for (const r of routes) {
    const m = path.match(r.re);
    if (!m) continue;
    const params = {};
    (r.names || []).forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.getAttribute('data-view') === r.nav);
    document.title = 'tracebridge · ' + r.nav;
    try {
      cleanup = r.view.mount(el, { path, params, query: new URLSearchParams(location.search) }) || null;
    } catch (e) {
      banner(`${r.nav}: ${e.message}`);
      console.error(e);
    }
    return;
  }
  el.textContent = `No page at ${path}.`;
}

// Views that change only their own query call history.replaceState
// themselves; this records the new address so it does not remount.
export function remember() { current = location.pathname + location.search; }
window.addEventListener('tb-remember', remember);

document.addEventListener('click', (e) => {
  const a = /** @type {Element} */ (e.target).closest('a[data-nav]');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', route);
window.addEventListener('tb-navigate', route);
window.addEventListener('unhandledrejection', (e) => {
  if (e.reason && e.reason.name === 'AbortError') return;
  banner(String(e.reason && e.reason.message ? e.reason.message : e.reason));
});

function tokenUI() {
  const btn = /** @type {HTMLButtonElement} */ (document.getElementById('token-button'));
  const dlg = /** @type {HTMLDialogElement} */ (document.getElementById('token-dialog'));
  const input = /** @type {HTMLInputElement} */ (document.getElementById('token-input'));
  const mark = () => { btn.classList.toggle('has-token', !!token()); btn.textContent = token() ? 'Token ✓' : 'Token'; };
  btn.addEventListener('click', () => { input.value = ''; dlg.showModal(); });
  dlg.addEventListener('close', () => {
    if (dlg.returnValue === 'save' && input.value.trim()) setToken(input.value.trim());
    if (dlg.returnValue === 'clear') setToken('');
    input.value = '';
    mark();
  });
  mark();
}

tokenUI();
route();
