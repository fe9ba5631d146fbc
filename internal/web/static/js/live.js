// live.js: the live page (/live). It follows the bridge's stream over the
// WebSocket /api/live (docs/STREAM.md): records (spans too: they are
// records) and, if asked, assembled traces, counted per type and host
// with a rate per second and a sparkline of the last HISTORY seconds,
// and the latest events, newest first. The filter (type, host, traces)
// is in the address and goes to the server as the socket's query; a
// closed socket is reopened with backoff, unless the bridge has no live
// view (503) or the token may not read it (403): then the page says what
// to configure.

import { h, fill, fmtNum, fmtTime, sized, setQuery, link, token, parseExact } from './lib.js';

const HISTORY = 30; // seconds of sparkline
const MAX_EVENTS = 200; // the latest events kept
// Rows of the table at most: the counts of further (type, host) pairs
// go to one row "other". A row that counted nothing for longer than
// HISTORY is dropped (its counts stay in the totals).
const MAX_ROWS = 500;
const OTHER = '\0other';
const ALL = '';

export function mount(el, ctx) {
  const filter = { type: ctx.query.getAll('type'), host: ctx.query.getAll('host'), traces: ctx.query.get('traces') === '1' };
  let ws = null, closed = false, retry = null, attempts = 0, tick = null, paint = null;
  let refused = false; // 503 or 403: retrying would not help
  let gone = { total: 0, missed: 0 }; // of the rows dropped
  let paused = false, missedWhilePaused = 0;
  const rates = new Map(); // "type\0host" → row state
  let pending = []; // events not yet shown, newest last
  let events = []; // shown, newest first
  let meta = null;

  // The page.
  const dot = h('span', { class: 'live-dot', 'aria-hidden': 'true' });
  const statusText = h('span', { class: 'live-status-text' }, 'connecting…');
  const status = h('span', { class: 'live-status', dataset: { state: 'connecting' }, role: 'status' }, dot, statusText);
  const typeSel = h('select', { name: 'type', 'aria-label': 'record type' });
  const hostSel = h('select', { name: 'host', 'aria-label': 'host' });
  const traces = h('input', { type: 'checkbox', checked: filter.traces });
  const pauseBtn = h('button', { type: 'button', class: 'pause', onclick: () => setPaused(!paused) }, 'Pause');
  const form = h('form', { class: 'row live-filter', onsubmit: (e) => { e.preventDefault(); applyFilter(); } },
    h('label', null, 'type', typeSel), h('label', null, 'host', hostSel),
    h('label', { class: 'check' }, traces, 'assembled traces'),
    h('button', { type: 'submit', class: 'primary' }, 'Apply'),
    status);
  const rateBody = h('tbody');
  const totalRow = h('tr', { class: 'total-row' }, h('td', null, 'all'), h('td'), h('td', { class: 'num rate' }, '0'), h('td', { class: 'num total' }, '0'), h('td', { class: 'num missed' }), h('td'));
  const rateTable = h('table', { class: 'grid live-rates' },
    h('thead', null, h('tr', null, h('th', null, 'Type'), h('th', null, 'Host'), h('th', { class: 'num' }, 'per second'), h('th', { class: 'num' }, 'total'),
      h('th', { class: 'num', title: 'records the stream says this page missed (gaps)' }, 'missed'), h('th', null, 'last 30 s'))),
    rateBody, h('tfoot', null, totalRow));
  const eventList = h('ol', { class: 'live-events', 'aria-live': 'off' });
  const eventNote = h('span', { class: 'muted' });
  el.append(h('h2', null, 'Live'), form,
    h('div', { class: 'live-split' },
      h('section', { class: 'panel' }, h('h3', null, 'Records per type and host'), h('div', { class: 'live-rates-box' }, rateTable)),
      h('section', { class: 'panel' }, h('div', { class: 'row' }, h('h3', null, 'Latest events'), pauseBtn,
        h('button', { type: 'button', onclick: () => { events = []; pending = []; fill(eventList); } }, 'Clear'), eventNote), eventList)));
  fillSelects();

  function setState(state, text) {
    status.dataset.state = state;
    statusText.textContent = text;
  }

  function setPaused(p) {
    paused = p;
    pauseBtn.textContent = p ? 'Resume' : 'Pause';
    pauseBtn.classList.toggle('primary', p);
    if (!p) { missedWhilePaused = 0; eventNote.textContent = ''; }
  }

  // Selects: every type and host the metadata names, plus the filter's.
  function fillSelects() {
    const types = new Set(filter.type), hosts = new Set(filter.host);
    for (const t of meta?.types || []) types.add(t.name);
    for (const x of meta?.hosts || []) hosts.add(x.name);
    const opts = (sel, values, cur, label) => fill(sel, h('option', { value: ALL }, label),
      [...values].sort().map((v) => h('option', { value: v, selected: v === cur, title: v }, shortType(v))));
    opts(typeSel, types, typeSel.value || filter.type[0] || ALL, 'all types');
    opts(hostSel, hosts, hostSel.value || filter.host[0] || ALL, 'all hosts');
  }

  function applyFilter() {
    filter.type = typeSel.value ? [typeSel.value] : [];
    filter.host = hostSel.value ? [hostSel.value] : [];
    filter.traces = traces.checked;
    setQuery({ type: filter.type, host: filter.host, traces: filter.traces ? '1' : '' });
    // Counts were of the old filter.
    rates.clear(); fill(rateBody); events = []; pending = []; fill(eventList);
    gone = { total: 0, missed: 0 };
    attempts = 0;
    refused = false;
    reconnect(0);
  }

  // The socket.
  function url() {
    const q = new URLSearchParams();
    for (const t of filter.type) q.append('type', t);
    for (const x of filter.host) q.append('host', x);
    if (filter.traces) q.set('traces', '1');
    const s = q.toString();
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/live' + (s ? '?' + s : '');
  }

  function connect() {
    retry = null;
    if (closed || refused) return;
    setState('connecting', 'connecting…');
    let opened = false, heard = false;
    // A browser cannot set headers on a WebSocket and a token must not
    // be in the address: the token goes as a subprotocol after
    // tracebridge.bearer (the server answers with that protocol alone).
    const t = token();
    const sock = t ? new WebSocket(url(), ['tracebridge.bearer', t]) : new WebSocket(url());
    ws = sock;
    sock.onopen = () => { opened = true; setState('connecting', 'connected, waiting for the metadata…'); };
    sock.onmessage = (ev) => {
      if (sock !== ws) return;
      if (!heard) { heard = true; attempts = 0; }
      let m;
      // Records' ids (Kieker traceIds) are often above 2^53: kept exact
      // as strings; the times are made numbers where they are used.
      try { m = parseExact(ev.data); } catch { return; }
      onMessage(m);
    };
    sock.onclose = (ev) => {
      if (sock !== ws || closed) return;
      ws = null;
      if (!opened) explain(); // why the handshake failed, if the API says
      const delay = Math.min(30000, 500 * 2 ** attempts++);
      setState('closed', `disconnected${ev.reason ? ' (' + ev.reason + ')' : ''}; reconnecting in ${Math.round(delay / 1000) || 1} s…`);
      reconnect(delay);
    };
  }

  function reconnect(delay) {
    if (retry) clearTimeout(retry);
    if (ws) { const old = ws; ws = null; old.close(); }
    retry = setTimeout(connect, delay);
  }

  // explain asks the endpoint over plain HTTP: 503 (no live view) and
  // 401/403 carry a message worth showing; a WebSocket error has none.
  // 503 and 403 stop the retries: the bridge's configuration or the
  // token has to change first (Apply or a reload tries again).
  async function explain() {
    try {
      const t = token();
      const r = await fetch('/api/live', { credentials: 'same-origin', headers: t ? { Authorization: 'Bearer ' + t } : {} });
      if (r.status !== 503 && r.status !== 401 && r.status !== 403) return;
      const body = await r.json().catch(() => ({}));
      if (closed || ws) return;
      const msg = `${r.status}: ${body.error || r.statusText}`;
      if (r.status === 401) { statusText.textContent = msg + '; retrying…'; return; }
      refused = true;
      if (retry) { clearTimeout(retry); retry = null; }
      setState('error', msg + (r.status === 503
        ? ' — the bridge needs a live stream: add stream: {listen: "127.0.0.1:14222"} to its YAML (see the README) and restart it.'
        : ' — the token may not read the live stream: set one that may with the Token button, then Apply.'));
    } catch { /* the bridge is away: the status says disconnected */ }
  }

  function onMessage(m) {
    switch (m.kind) {
      case 'metadata':
        meta = m.metadata || {};
        fillSelects();
        setState('live', `live · metadata v${meta.version ?? '?'} · ${(meta.types || []).length} types, ${(meta.hosts || []).length} hosts`);
        break;
      case 'records':
        for (const r of m.records || []) {
          const type = r.record?.type || '?';
          count(type, r.host || '-', 1);
          event({ time: Number(r.time), host: r.host, type, rec: r.record });
        }
        break;
      case 'trace': {
        count('assembled trace', m.host || '-', 1);
        const t = m.trace || {};
        event({ time: Number(t.start), host: m.host, type: 'assembled trace', text: `${(t.spans || []).length} spans`, trace: t.traceId });
        break;
      }
      case 'gap': {
        const r = row(m.type || '?', m.host || '-');
        r.missed += m.records || 0; r.idle = 0;
        event({ time: Date.now() * 1e6, host: m.host, type: m.type, text: `missed ${fmtNum(m.records)} records${m.bridgeLost ? ` (${fmtNum(m.bridgeLost)} lost by the bridge)` : ''}`, gap: true });
        break;
      }
      case 'error':
        setState('error', 'stream error: ' + m.error);
        break;
    }
  }

  // Counting.
  function row(type, host) {
    let key = type + '\0' + host;
    let r = rates.get(key);
    if (!r && rates.size >= MAX_ROWS - (rates.has(OTHER) ? 0 : 1)) {
      key = OTHER; type = 'other'; host = '(more types and hosts)';
      r = rates.get(key);
    }
    if (!r) {
      r = { key, type, host, total: 0, now: 0, rate: 0, missed: 0, hist: [], idle: 0 };
      const canvas = h('canvas', { class: 'spark', width: 100, height: 22 });
      r.cells = { rate: h('td', { class: 'num rate' }), total: h('td', { class: 'num total' }), missed: h('td', { class: 'num missed' }) };
      r.canvas = canvas;
      r.tr = h('tr', { dataset: { type, host } }, h('td', { title: type }, shortType(type)), h('td', null, host), r.cells.rate, r.cells.total, r.cells.missed, h('td', null, canvas));
      rates.set(key, r);
      // Rows stay sorted by type, then host: they do not jump ("other"
      // is last).
      const after = key === OTHER ? null : [...rates.values()].filter((x) => x !== r && (x.key === OTHER || x.type > type || (x.type === type && x.host > host)))
        .sort((a, b) => (a.key === OTHER ? 1 : b.key === OTHER ? -1 : a.type < b.type ? -1 : a.type > b.type ? 1 : a.host < b.host ? -1 : 1))[0];
      rateBody.insertBefore(r.tr, after ? after.tr : null);
    }
    return r;
  }
  function count(type, host, n) {
    const r = row(type, host);
    r.total += n; r.now += n; r.idle = 0;
  }

  // Every second: the last second's counts become the rates.
  function second() {
    let rate = 0, total = gone.total, missed = gone.missed;
    for (const r of rates.values()) {
      if (!r.now && ++r.idle > HISTORY) {
        gone.total += r.total; gone.missed += r.missed;
        total += r.total; missed += r.missed;
        r.tr.remove();
        rates.delete(r.key);
        continue;
      }
      r.rate = r.now; r.now = 0;
      r.hist.push(r.rate);
      if (r.hist.length > HISTORY) r.hist.shift();
      r.cells.rate.textContent = fmtNum(r.rate);
      r.cells.total.textContent = fmtNum(r.total);
      r.cells.missed.textContent = r.missed ? fmtNum(r.missed) : '';
      r.tr.dataset.total = r.total;
      r.tr.dataset.rate = r.rate;
      spark(r.canvas, r.hist);
      rate += r.rate; total += r.total; missed += r.missed;
    }
    totalRow.querySelector('.rate').textContent = fmtNum(rate);
    totalRow.querySelector('.total').textContent = fmtNum(total);
    totalRow.querySelector('.missed').textContent = missed ? fmtNum(missed) : '';
  }

  // Events: buffered, shown a few times a second (a burst of thousands
  // of records must not rebuild the list per record).
  function event(e) {
    if (paused) { missedWhilePaused++; return; }
    pending.push(e);
    // Trimmed now and then, not per record (bursts of 100k a second).
    if (pending.length > 4 * MAX_EVENTS) pending = pending.slice(-MAX_EVENTS);
  }
  function showEvents() {
    if (paused) { if (missedWhilePaused) eventNote.textContent = `paused: ${fmtNum(missedWhilePaused)} events not shown`; return; }
    if (!pending.length) return;
    const fresh = pending.slice(-MAX_EVENTS).reverse().map(eventItem);
    pending = [];
    eventList.prepend(...fresh);
    while (eventList.childElementCount > MAX_EVENTS) eventList.lastElementChild.remove();
  }
  function eventItem(e) {
    return h('li', { class: e.gap ? 'gap' : null, dataset: { type: e.type } },
      h('span', { class: 'time mono', title: fmtTime(e.time) }, fmtTime(e.time).slice(11)),
      h('span', { class: 'host' }, e.host || '-'),
      h('span', { class: 'type', title: e.type }, shortType(e.type)),
      // The summary is made only for the events shown.
      e.trace ? link('/trace/' + encodeURIComponent(e.trace), h('span', { class: 'mono' }, e.trace), ' · ', e.text) : h('span', { class: 'text mono' }, e.rec ? summary(e.rec) : e.text));
  }

  tick = setInterval(second, 1000);
  paint = setInterval(showEvents, 250);
  connect();
  return () => {
    closed = true;
    clearInterval(tick); clearInterval(paint);
    if (retry) clearTimeout(retry);
    if (ws) { ws.close(); ws = null; }
  };
}

// shortType drops a record type's package.
function shortType(t) {
  if (!t) return '';
  const i = t.lastIndexOf('.');
  return i >= 0 ? t.slice(i + 1) : t;
}

// summary is a record in one line: what identifies it first (a record
// of a message parsed with parseExact: its ids exact).
const FIRST = ['operationSignature', 'operation', 'name', 'classSignature', 'traceId', 'hostname'];
export function summary(rec) {
  const f = rec && rec.fields;
  if (!f) return '';
  const keys = Object.keys(f);
  keys.sort((a, b) => rank(a) - rank(b));
  return keys.slice(0, 4).map((k) => `${k}=${short(f[k])}`).join('  ');
}
function rank(k) { const i = FIRST.indexOf(k); return i < 0 ? FIRST.length : i; }
function short(v) {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s && s.length > 80 ? s.slice(0, 79) + '…' : s;
}

// spark draws counts as a filled line scaled to their maximum (on the
// canvas's bitmap as it is, unless its size changed).
function spark(canvas, hist) {
  const w = 100, hgt = 22;
  const ctx = sized(canvas, w, hgt);
  ctx.clearRect(0, 0, w, hgt);
  const max = Math.max(1, ...hist);
  const step = w / (HISTORY - 1);
  const x0 = w - (hist.length - 1) * step;
  ctx.beginPath();
  ctx.moveTo(x0, hgt);
  hist.forEach((v, i) => ctx.lineTo(x0 + i * step, hgt - 1 - (v / max) * (hgt - 3)));
  ctx.lineTo(w, hgt);
  ctx.closePath();
  ctx.fillStyle = 'rgba(37, 99, 235, 0.18)';
  ctx.fillRect(0, hgt - 1, w, 1); // the baseline: zero
  ctx.fill();
  ctx.beginPath();
  hist.forEach((v, i) => { const x = x0 + i * step, y = hgt - 1 - (v / max) * (hgt - 3); if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y); });
  ctx.strokeStyle = '#2563eb';
  ctx.lineWidth = 1.25;
  ctx.stroke();
}
