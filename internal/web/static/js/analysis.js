// analysis.js: the analyses page (/analysis): Kieker's dependency graphs
// and aggregated call trees drawn as a layered graph, response-time
// statistics per operation, a pivot by a root span attribute and a JFR
// flame graph of a host. The filters, the tab and each tab's settings
// live in the address, so a view can be shared.

import { api, ApiError, h, fill, guard, fmtDur, fmtNum, fmtBytes, fmtTime, color, setQuery, link } from './lib.js';
import { drawGraph } from './graph.js';
import { table } from './ops-table.js';
import { Flame, fmtAmount } from './flame.js';
import { eventBrowser } from './jfrevents.js';
import { gcTimeline } from './gctimeline.js';

// latest returns a function that gives the signal of a new request of a
// tab, aborting the tab's previous one (a newer choice wins over an
// answer still on its way) and ending with the page's signal.
function latest(signal) {
  let current = null;
  return () => {
    if (current) current.abort();
    current = new AbortController();
    return AbortSignal.any([signal, current.signal]);
  };
}

const KINDS = [
  ['container', 'Containers (hosts, services)'],
  ['deployment-component', 'Deployment components'],
  ['assembly-component', 'Assembly components'],
  ['deployment-operation', 'Deployment operations'],
  ['assembly-operation', 'Assembly operations'],
  ['aggregated-deployment-call-tree', 'Aggregated deployment call tree'],
  ['aggregated-assembly-call-tree', 'Aggregated assembly call tree'],
];
const TABS = [['graph', 'Dependency graph'], ['operations', 'Operations'], ['equivalence', 'Equivalence classes'], ['pivot', 'Pivot'], ['profile', 'JFR profile']];

// The store's filters the page edits, and those it only passes on (a
// link from elsewhere may carry them).
const FILTERS = ['since', 'until', 'host', 'service', 'name', 'errors', 'maxTraces'];
const PASSED = ['minDuration', 'maxDuration', 'attr', 'q', 'eql', 'deep'];
// The page's own settings.
const OWN = ['tab', 'kind', 'selfLoops', 'sel', 'sort', 'desc', 'find', 'key', 'psort', 'pdesc', 'phost', 'pkind', 'fpath', 'emode', 'etype', 'ethread', 'efilter', 'esort', 'easc'];

export function mount(el, ctx) {
  const state = {};
  for (const k of [...FILTERS, ...OWN]) if (ctx.query.get(k)) state[k] = ctx.query.get(k);
  for (const k of PASSED) { const v = ctx.query.getAll(k); if (v.length) state[k] = v.length > 1 ? v : v[0]; }
  if (!TABS.some(([t]) => t === state.tab)) state.tab = 'graph';
  if (!KINDS.some(([k]) => k === state.kind)) state.kind = 'assembly-operation';

  const save = () => setQuery(state);
  const filters = () => {
    const f = {};
    for (const k of [...FILTERS, ...PASSED]) if (state[k]) f[k] = state[k];
    return f;
  };

  let abort = new AbortController(), tabCleanup = null;
  const body = h('div', { class: 'an-body' });
  const tabs = h('div', { class: 'tabs', role: 'tablist' }, TABS.map(([t, label]) =>
    h('button', { type: 'button', role: 'tab', dataset: { tab: t }, onclick: () => { state.tab = t; save(); show(); } }, label)));

  const show = () => {
    abort.abort();
    abort = new AbortController();
    if (tabCleanup) { tabCleanup(); tabCleanup = null; }
    for (const b of tabs.children) {
      b.classList.toggle('active', b.dataset.tab === state.tab);
      b.setAttribute('aria-selected', String(b.dataset.tab === state.tab));
    }
    const view = { graph: graphTab, operations: operationsTab, equivalence: equivalenceTab, pivot: pivotTab, profile: profileTab }[state.tab];
    fill(body);
    tabCleanup = view(body, { state, save, filters, signal: abort.signal }) || null;
  };

  el.append(h('h2', null, 'Analyses'), filterForm(state, () => { save(); show(); }), tabs, body);
  show();
  return () => { abort.abort(); if (tabCleanup) tabCleanup(); };
}

// Filters ---------------------------------------------------------------

function filterForm(state, apply) {
  const input = (name, attrs) => h('input', Object.assign({ name, value: state[name] || '' }, attrs));
  const since = input('since', { placeholder: '15m, 2h or a time', size: 14 });
  const until = input('until', { placeholder: 'now', size: 12 });
  const host = input('host', { placeholder: 'any', list: 'an-hosts', size: 16 });
  const service = input('service', { placeholder: 'any', list: 'an-services', size: 14 });
  const name = input('name', { placeholder: 'any root operation', list: 'an-names', size: 22 });
  const errors = h('input', { type: 'checkbox', name: 'errors', checked: state.errors === 'true' || state.errors === '1' });
  const maxTraces = input('maxTraces', { type: 'number', min: 1, max: 1000000, placeholder: '10000', size: 7 });
  const lists = h('div', { hidden: true }, h('datalist', { id: 'an-hosts' }), h('datalist', { id: 'an-services' }), h('datalist', { id: 'an-names' }));
  const read = () => {
    for (const [k, e] of Object.entries({ since, until, host, service, name, maxTraces })) {
      const v = e.value.trim();
      if (v) state[k] = v; else delete state[k];
    }
    if (errors.checked) state.errors = 'true'; else delete state.errors;
  };
  const quick = (v) => h('button', { type: 'button', class: 'quick', onclick: () => { since.value = v; until.value = ''; read(); apply(); } }, v || 'all');
  const passed = PASSED.filter((k) => state[k]);
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); read(); apply(); } },
    h('div', { class: 'row' },
      h('label', null, 'since', since), h('label', null, 'until', until),
      h('span', { class: 'quicks' }, quick('15m'), quick('1h'), quick('24h'), quick('')),
      h('label', null, 'host', host), h('label', null, 'service', service), h('label', null, 'trace name', name),
      h('label', { class: 'check' }, errors, 'with errors'),
      h('label', null, 'max traces', maxTraces),
      h('button', { class: 'primary', type: 'submit' }, 'Apply')),
    passed.length ? h('div', { class: 'muted small' }, 'Also from the address: ',
      passed.map((k) => h('code', null, `${k}=${[].concat(state[k]).join(', ')} `)),
      h('button', { type: 'button', onclick: () => { for (const k of PASSED) delete state[k]; form.replaceWith(filterForm(state, apply)); apply(); } }, 'drop')) : null,
    lists);
  // Suggestions only: a failure leaves the inputs free text.
  api('/api/v1/hosts').then((r) => fill(lists.children[0], (r.hosts || []).map((x) => h('option', { value: x.name })))).catch(() => {});
  api('/api/v1/names').then((r) => {
    fill(lists.children[1], (r.services || []).map((x) => h('option', { value: x })));
    fill(lists.children[2], (r.names || []).map((x) => h('option', { value: x })));
  }).catch(() => {});
  return form;
}

// summaryLine says what an analysis read.
function summaryLine(s) {
  if (!s) return null;
  const parts = [`${fmtNum(s.traces)} traces read`];
  if (s.calls != null) parts.push(`${fmtNum(s.calls)} calls`);
  if (s.invalid) parts.push(`${fmtNum(s.invalid)} traces dropped by Kieker's rules`);
  return h('span', { class: 'an-summary muted' }, parts.join(' · '),
    s.partial ? h('span', { class: 'badge err', title: 'the time budget ended the reading: the figures cover part of the selection' }, 'partial') : null,
    s.limited ? h('span', { class: 'badge', title: 'max traces ended the reading (newest first)' }, 'limited') : null);
}

// Graph -----------------------------------------------------------------

// short names: a class without its package, an operation without its
// class (Kieker's signatures carry both).
export function shortClass(c) {
  if (!c) return '';
  const i = c.lastIndexOf('.');
  return i > 0 && i < c.length - 1 && !c.includes(' ') ? c.slice(i + 1) : c;
}
export function shortOp(op, comp) {
  if (!op) return '';
  if (comp) {
    const i = op.lastIndexOf(comp + '.');
    if (i >= 0) return op.slice(i + comp.length + 1);
  }
  return op;
}
function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }

export function statsText(st) {
  if (!st || !st.count) return '';
  return `${fmtNum(st.count)}× ⌀${fmtDur(st.avgNs)} max ${fmtDur(st.maxNs)}`;
}

// nodeView turns an API node into what the graph draws.
export function nodeView(n, kind) {
  if (n.id === 'entry' || (n.container == null && n.component == null && n.operation == null)) {
    return { id: n.id, entry: true, lines: ['Entry'], title: "'Entry': the calls from outside", fill: '#1d2330', stroke: '#1d2330' };
  }
  let main, sub = '', title;
  if (kind === 'container') {
    main = n.container; title = n.container;
  } else if (n.operation != null) {
    main = shortOp(n.operation, n.component);
    sub = shortClass(n.component) + (n.container ? ' @ ' + n.container : '');
    title = n.operation + '\n' + (n.component || '') + (n.container ? '\non ' + n.container : '');
  } else {
    main = shortClass(n.component);
    const pkg = n.component && n.component.length > main.length ? n.component.slice(0, n.component.length - main.length - 1) : '';
    sub = (pkg ? pkg : '') + (n.container ? (pkg ? ' @ ' : '@ ') + n.container : '');
    title = n.component + (n.container ? '\non ' + n.container : '');
  }
  const lines = [clip(main || '?', 60)];
  if (sub) lines.push(clip(sub, 60));
  const st = statsText(n.stats);
  if (st) lines.push(st);
  if (n.stats) title += `\n${fmtNum(n.stats.count)} calls in, min ${fmtDur(n.stats.minNs)}, mean ${fmtDur(n.stats.avgNs)}, max ${fmtDur(n.stats.maxNs)}, total ${fmtDur(n.stats.totalNs)}`;
  const key = n.component || n.container || '';
  return { id: n.id, lines, statsLast: !!st, title, fill: color(key, true), stroke: color(key), api: n };
}

export function edgeView(e, byId) {
  const st = e.stats;
  const label = [`${fmtNum(e.calls || 0)}×`];
  if (st && st.count) label.push(`⌀${fmtDur(st.avgNs)} · max ${fmtDur(st.maxNs)}`);
  const name = (id) => (byId.get(id)?.lines[0]) || id;
  let title = `${name(e.from)} → ${name(e.to)}: ${fmtNum(e.calls || 0)} calls`;
  if (st && st.count) title += `, min ${fmtDur(st.minNs)}, mean ${fmtDur(st.avgNs)}, max ${fmtDur(st.maxNs)}`;
  return { from: e.from, to: e.to, label, title, data: { calls: e.calls || 0 }, api: e };
}

function graphTab(body, { state, save, filters, signal }) {
  const kind = h('select', { 'aria-label': 'graph', onchange: () => { state.kind = kind.value; delete state.sel; save(); load(); } },
    KINDS.map(([k, label]) => h('option', { value: k, selected: k === state.kind }, label)));
  const self = h('input', { type: 'checkbox', checked: !!state.selfLoops, onchange: () => { if (self.checked) state.selfLoops = 'true'; else delete state.selfLoops; save(); load(); } });
  const summary = h('span');
  let ctl = null;
  const tools = h('div', { class: 'row graph-tools' },
    h('label', null, 'graph', kind), h('label', { class: 'check' }, self, 'self calls'),
    h('button', { type: 'button', title: 'fit the graph into view', onclick: () => ctl && ctl.fit() }, 'Fit'),
    h('button', { type: 'button', title: 'zoom in (or the mouse wheel)', onclick: () => ctl && ctl.zoom(1.25) }, '+'),
    h('button', { type: 'button', title: 'zoom out', onclick: () => ctl && ctl.zoom(0.8) }, '−'),
    summary);
  const box = h('div', { class: 'graph-box', tabindex: '-1' }, h('div', { class: 'loading' }, 'Analysing…'));
  const side = h('aside', { class: 'graph-side panel' }, h('div', { class: 'muted' }, 'Hover over a node to see its calls; click it for details. Drag to pan, scroll to zoom.'));
  fill(body, tools, h('div', { class: 'graph-split' }, box, side));

  const newest = latest(signal);
  const load = () => guard(box, async () => {
    const sig = newest();
    fill(box, h('div', { class: 'loading' }, 'Analysing…'));
    fill(summary);
    details(side, null);
    const r = await api('/api/v1/analysis/graph', Object.assign({ kind: state.kind, selfLoops: state.selfLoops }, filters()), { signal: sig });
    fill(summary, summaryLine(r.summary));
    const nodes = r.graph.nodes.map((n) => nodeView(n, state.kind));
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const edges = r.graph.edges.map((e) => edgeView(e, byId));
    if (nodes.length <= 1) {
      fill(box, h('div', { class: 'notice' }, 'No calls: no trace matches the filters.'));
      return;
    }
    box.dataset.kind = state.kind;
    ctl = drawGraph(box, { nodes, edges }, {
      root: 'entry', label: `${state.kind} graph`,
      onSelect: (n) => {
        if (n) state.sel = n.id; else delete state.sel;
        save();
        details(side, n, nodes, edges, (id) => ctl.select(id));
      },
    });
    if (state.sel && byId.has(state.sel)) ctl.select(state.sel);
    if (ctl.scrolls) summary.append(h('span', { class: 'muted graph-more' }, ' · more to the right or below: scroll or drag; Fit shows it all'));
  });
  load();
  return () => { ctl = null; };
}

// details shows a node's statistics and its calls in and out.
function details(side, n, nodes, edges, select) {
  if (!n) { fill(side, h('div', { class: 'muted' }, 'Click a node for its details.')); return; }
  const a = n.api || {};
  const byId = new Map(nodes.map((x) => [x.id, x]));
  const kv = [];
  const add = (k, v) => { if (v != null && v !== '') kv.push(h('span', null, k), h('span', null, v)); };
  add('container', a.container); add('component', a.component); add('operation', a.operation);
  if (a.stats) {
    add('calls in', fmtNum(a.stats.count)); add('min', fmtDur(a.stats.minNs)); add('mean', fmtDur(a.stats.avgNs));
    add('max', fmtDur(a.stats.maxNs)); add('total', fmtDur(a.stats.totalNs));
  }
  const list = (title, es, other) => es.length ? [h('h3', null, title), h('table', { class: 'grid small' },
    h('thead', null, h('tr', null, h('th', null, other === 'from' ? 'caller' : 'callee'), h('th', { class: 'num' }, 'calls'), h('th', { class: 'num' }, 'mean'), h('th', { class: 'num' }, 'max'))),
    h('tbody', null, es.map((e) => h('tr', { class: 'clickable', onclick: () => select(e[other]) },
      h('td', { title: byId.get(e[other])?.title }, byId.get(e[other])?.lines[0] || e[other]),
      h('td', { class: 'num' }, fmtNum(e.api.calls || 0)),
      h('td', { class: 'num' }, e.api.stats ? fmtDur(e.api.stats.avgNs) : ''),
      h('td', { class: 'num' }, e.api.stats ? fmtDur(e.api.stats.maxNs) : '')))))] : [];
  fill(side, h('h3', null, n.lines[0]), h('div', { class: 'kv' }, kv),
    list('Called by', edges.filter((e) => e.to === n.id), 'from'),
    list('Calls', edges.filter((e) => e.from === n.id), 'to'));
}

// Operations ------------------------------------------------------------

function operationsTab(body, { state, save, filters, signal }) {
  const find = h('input', { type: 'search', placeholder: 'filter operations', value: state.find || '', size: 30 });
  const summary = h('span');
  const out = h('div', null, h('div', { class: 'loading' }, 'Analysing…'));
  fill(body, h('div', { class: 'row' }, h('label', null, 'operation or component contains', find), summary), out);
  let all = [], t = null;
  const match = () => {
    const q = (state.find || '').toLowerCase();
    return q ? all.filter((r) => r.operation.toLowerCase().includes(q) || r.component.toLowerCase().includes(q)) : all;
  };
  find.addEventListener('input', () => {
    if (find.value.trim()) state.find = find.value.trim(); else delete state.find;
    save();
    if (t) t.set(match());
  });
  guard(out, async () => {
    const r = await api('/api/v1/analysis/operations', filters(), { signal });
    all = r.operations.map((o) => Object.assign({ errorRate: o.count ? o.errors / o.count : 0 }, o));
    fill(summary, summaryLine(r.summary));
    const dur = (k) => ({ key: k, num: true, cell: (o) => fmtDur(o[k]) });
    t = table([
      { key: 'component', label: 'Component', cell: (o) => o.component },
      { key: 'operation', label: 'Operation', cell: (o) => h('span', { class: 'mono', title: o.operation }, shortOp(o.operation, o.component)) },
      { key: 'count', label: 'Count', num: true, cell: (o) => fmtNum(o.count) },
      { key: 'errors', label: 'Errors', num: true, cell: (o) => (o.errors ? h('span', { class: 'err' }, fmtNum(o.errors)) : '0') },
      Object.assign(dur('minNs'), { label: 'Min' }), Object.assign(dur('avgNs'), { label: 'Mean' }), Object.assign(dur('maxNs'), { label: 'Max' }),
      Object.assign(dur('totalNs'), { label: 'Total' }), Object.assign(dur('selfNs'), { label: 'Self', title: 'time in the operation itself, not in its callees' }),
    ], match(), {
      sort: state.sort || 'totalNs', desc: state.sort ? state.desc === '1' : true, height: 640, empty: 'no operations: no trace matches the filters',
      onSort: (k, d) => { state.sort = k; if (d) state.desc = '1'; else delete state.desc; save(); },
    });
    fill(out, t.el);
  });
}

// Equivalence classes -----------------------------------------------------

// equivalenceTab lists Kieker's trace equivalence classes of the
// selection: the distinct kinds of request (the same operations on the
// same components, in the same call order and depth) and how many of
// each; a representative opens its trace.
function equivalenceTab(body, { state, save, filters, signal }) {
  const mode = h('select', { name: 'emode', onchange: () => { state.emode = mode.value; save(); load(); } },
    [['assembly', 'by assembly component'], ['deployment', 'by deployment component (host too)']].map(([v, l]) =>
      h('option', { value: v, selected: (state.emode || 'assembly') === v }, l)));
  const out = h('div');
  fill(body, h('div', { class: 'row' }, h('label', null, 'Kieker\'s trace equivalence classes', mode)), out);
  const newest = latest(signal);
  const load = () => {
    const sig = newest();
    fill(out, h('div', { class: 'loading' }, 'Classifying…'));
    guard(out, async () => {
      const r = await api('/api/v1/analysis/equivalence', Object.assign({ mode: mode.value }, filters()), { signal: sig });
      const t = table([
        { key: 'class', label: 'Class', num: true, cell: (x) => String(x.class) },
        { key: 'cardinality', label: 'Traces', num: true, cell: (x) => fmtNum(x.cardinality) },
        { key: 'executions', label: 'Executions', num: true, cell: (x) => fmtNum(x.executions) },
        { key: 'maxStackDepth', label: 'Max. stack depth', num: true, cell: (x) => String(x.maxStackDepth) },
        { key: 'representative', label: 'Representative', cell: (x) => link('/trace/' + encodeURIComponent(x.representative), x.representative) },
      ], r.classes, { sort: 'class', desc: false, height: 640, empty: 'no classes: no valid trace matches the filters' });
      fill(out, h('div', { class: 'row' }, summaryLine(r.summary), h('span', { class: 'muted', id: 'eq-count' }, `${fmtNum(r.classes.length)} classes`)), t.el);
    });
  };
  load();
}

// Pivot -----------------------------------------------------------------

function pivotTab(body, { state, save, filters, signal }) {
  const key = h('input', { name: 'key', placeholder: 'attribute key, e.g. http.method', value: state.key || '', size: 28, required: true });
  const out = h('div');
  const form = h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); state.key = key.value.trim(); save(); load(); } },
    h('label', null, 'group the traces by the root span attribute', key), h('button', { class: 'primary', type: 'submit' }, 'Group'));
  fill(body, form, out);
  const newest = latest(signal);
  const load = () => {
    const sig = newest();
    if (!state.key) { fill(out, h('div', { class: 'notice' }, 'Name a root span attribute (http.method, http.route, a zorka or Kieker attribute…) to see the traces grouped by its values.')); return; }
    fill(out, h('div', { class: 'loading' }, 'Grouping…'));
    guard(out, async () => {
      const r = await api('/api/v1/pivot', Object.assign({ key: state.key }, filters()), { signal: sig });
      const rows = r.rows.map((x) => Object.assign({ avgNs: x.calls ? x.sumNs / x.calls : 0, errorRate: x.calls ? x.errors / x.calls : 0 }, x));
      const t = table([
        { key: 'value', label: state.key, cell: (x) => (x.value === '' ? h('span', { class: 'muted' }, '(none)') : x.value) },
        { key: 'calls', label: 'Traces', num: true, cell: (x) => fmtNum(x.calls) },
        { key: 'errors', label: 'Errors', num: true, cell: (x) => (x.errors ? h('span', { class: 'err' }, fmtNum(x.errors)) : '0') },
        { key: 'errorRate', label: 'Error %', num: true, cell: (x) => (100 * x.errorRate).toFixed(1) },
        { key: 'minNs', label: 'Min', num: true, cell: (x) => fmtDur(x.minNs) },
        { key: 'avgNs', label: 'Mean', num: true, cell: (x) => fmtDur(x.avgNs) },
        { key: 'maxNs', label: 'Max', num: true, cell: (x) => fmtDur(x.maxNs) },
        { key: 'sumNs', label: 'Total', num: true, cell: (x) => fmtDur(x.sumNs) },
      ], rows, {
        sort: state.psort || 'calls', desc: state.psort ? state.pdesc === '1' : true, height: 640, empty: 'no traces match the filters',
        onSort: (k, d) => { state.psort = k; if (d) state.pdesc = '1'; else delete state.pdesc; save(); },
      });
      fill(out, r.partial ? h('div', { class: 'notice' }, 'Partial: the time budget ended the grouping; the figures cover part of the selection.') : null, t.el);
    });
  };
  load();
}

// Profile ---------------------------------------------------------------

// PROFILE_KINDS are the JFR flame graph kinds of /api/v1/profiles/flame
// (docs/jfr.md): the value of ?pkind= and what the selector says.
export const PROFILE_KINDS = [
  ['cpu', 'CPU samples'],
  ['alloc', 'allocations (bytes)'],
  ['alloc-tlab', 'allocations, TLAB events (bytes)'],
  ['lock', 'lock and park waits (time)'],
  ['io', 'file and socket I/O (time)'],
  ['io-bytes', 'file and socket I/O (bytes)'],
  ['exceptions', 'exceptions thrown'],
  ['errors', 'errors thrown'],
];

// jfrViews draws the JMC views of /api/v1/profiles/views: GC pauses,
// heap after GC, classes allocated, contended monitors, the slowest I/O
// and exceptions by class, each a section with a sortable table.
/** @param {any} v @returns {HTMLElement[]} */
function jfrViews(v) {
  const section = (name, title, note, columns, rows, sort) => h('section', { class: 'jfr-view', dataset: { view: name } },
    h('h3', null, title), note ? h('div', { class: 'muted' }, note) : null,
    table(columns, rows, { sort, desc: true, height: 320, empty: 'no events in the window' }).el);
  const gc = v.gc;
  const sections = [
    section('gc', 'Garbage collections', `${fmtNum(gc.count)} collections, ${fmtDur(gc.totalPauseNs)} paused in all, longest pause ${fmtDur(gc.longestPauseNs)}${gc.phaseCount ? `; ${fmtNum(gc.phaseCount)} pause phases, ${fmtDur(gc.phaseTotalNs)} in all, longest ${fmtDur(gc.phaseLongestNs)}` : ''}`, [
      { key: 'time', label: 'Time', cell: (x) => fmtTime(x.time) },
      { key: 'name', label: 'Collector' }, { key: 'cause', label: 'Cause' },
      { key: 'pauseNs', label: 'Paused', num: true, cell: (x) => fmtDur(x.pauseNs) },
      { key: 'longestNs', label: 'Longest pause', num: true, cell: (x) => fmtDur(x.longestNs) },
      { key: 'durationNs', label: 'Duration', num: true, cell: (x) => fmtDur(x.durationNs) },
    ], gc.pauses, 'time'),
    section('heap', 'Heap after GC', null, [
      { key: 'time', label: 'Time', cell: (x) => fmtTime(x.time) }, { key: 'gcId', label: 'GC', num: true },
      { key: 'usedBytes', label: 'Used', num: true, cell: (x) => fmtBytes(x.usedBytes) },
      { key: 'committedBytes', label: 'Committed', num: true, cell: (x) => fmtBytes(x.committedBytes) },
    ], v.heap, 'time'),
    section('allocations', 'Allocations by class', 'from allocation samples: the bytes their weights stand for', [
      { key: 'class', label: 'Class' }, { key: 'samples', label: 'Samples', num: true, cell: (x) => fmtNum(x.samples) },
      { key: 'bytes', label: 'Allocated', num: true, cell: (x) => fmtBytes(x.bytes) },
    ], v.allocations, 'bytes'),
    section('monitors', 'Contended monitors', null, [
      { key: 'class', label: 'Monitor class' }, { key: 'count', label: 'Waits', num: true, cell: (x) => fmtNum(x.count) },
      { key: 'totalNs', label: 'Total wait', num: true, cell: (x) => fmtDur(x.totalNs) },
      { key: 'maxNs', label: 'Longest wait', num: true, cell: (x) => fmtDur(x.maxNs) },
    ], v.monitors, 'totalNs'),
    section('io', 'Slowest file and socket operations', null, [
      { key: 'type', label: 'Event', cell: (x) => x.type.replace(/^jdk\./, '') }, { key: 'target', label: 'Path or address' },
      { key: 'bytes', label: 'Bytes', num: true, cell: (x) => fmtBytes(x.bytes) },
      { key: 'durationNs', label: 'Duration', num: true, cell: (x) => fmtDur(x.durationNs) },
      { key: 'thread', label: 'Thread' }, { key: 'time', label: 'Time', cell: (x) => fmtTime(x.time) },
    ], v.slowIO, 'durationNs'),
    section('exceptions', 'Exceptions by class', null, [
      { key: 'class', label: 'Class' }, { key: 'count', label: 'Thrown', num: true, cell: (x) => fmtNum(x.count) },
      { key: 'message', label: 'First message' },
      { key: 'stack', label: 'First stack (top frames)', cell: (x) => h('span', { title: (x.stack || []).join('\n') }, (x.stack || []).slice(0, 3).join(' ← ')) },
    ], v.exceptions, 'count'),
  ];
  const chart = gcTimeline(gc.pauses, v.heap);
  if (chart) sections[0].insertBefore(chart, sections[0].querySelector('.vtable-box'));
  return sections;
}

function profileTab(body, { state, save, signal }) {
  const host = h('input', { name: 'phost', list: 'an-hosts', placeholder: 'host', size: 22, value: state.phost || [].concat(state.host || [])[0] || '' });
  const out = h('div', { class: 'profile-out' });
  let fg = null;
  const kind = h('select', { name: 'pkind', 'aria-label': 'flame graph kind', onchange: () => { if (kind.value === 'cpu') delete state.pkind; else state.pkind = kind.value; delete state.fpath; save(); load(); } },
    PROFILE_KINDS.map(([k, label]) => h('option', { value: k, selected: k === (state.pkind || 'cpu') }, label)));
  const form = h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); state.phost = host.value.trim(); delete state.fpath; save(); load(); } },
    h('label', null, 'host', host), h('label', null, 'what', kind), h('button', { class: 'primary', type: 'submit' }, 'Show'),
    h('span', { class: 'muted' }, `window: ${state.since || '15m'} to ${state.until || 'now'} (the filters' since and until)`));
  fill(body, form, out);
  const newest = latest(signal);
  const load = () => {
    const sig = newest();
    if (fg) { fg.destroy(); fg = null; }
    if (!host.value.trim()) { fill(out, h('div', { class: 'notice' }, 'Name a host whose JVM a jfr receiver follows to see where its threads spent their time.')); return; }
    fill(out, h('div', { class: 'loading' }, 'Reading samples…'));
    guard(out, async () => {
      // A host without stacks of this kind (404) still has its views and
      // events: a notice stands in for the graph.
      let r = null;
      try {
        r = await api('/api/v1/profiles/flame', { host: host.value.trim(), kind: state.pkind || 'cpu', since: state.since, until: state.until }, { signal: sig });
      } catch (e) {
        // A bridge that keeps no profiles at all says so, in place of the tab.
        if (!(e instanceof ApiError) || e.status !== 404 || e.message.startsWith('404: no profiles:')) throw e;
        r = { missing: e.message };
      }
      const views = h('div', { class: 'profile-views' });
      const browser = eventBrowser(host.value.trim(), { state, save, signal: sig });
      if (r.missing) {
        fill(out, h('div', { class: 'notice profile-none' }, `No flame graph: ${r.missing}`), views, browser);
      } else {
        const unit = r.unit || 'samples';
        fg = new Flame({
          root: r.root, unit,
          onZoom: (p) => { if (p.length) state.fpath = p.join('\n'); else delete state.fpath; save(); },
        });
        if (state.fpath) fg.zoomTo(state.fpath.split('\n'));
        fill(out, h('div', { class: 'muted profile-total' }, `${fmtAmount(r.root.value, unit)} in all. Callers at the bottom, callees above; width is ${unit}${state.pkind && state.pkind !== 'cpu' ? '; the class allocated, waited on or thrown is the top frame' : ''}. Click a frame to zoom in, a grey bar or the path above to zoom out.`), fg.el, views, browser);
        fg.draw();
      }
      guard(views, async () => {
        const v = await api('/api/v1/profiles/views', { host: host.value.trim(), since: state.since, until: state.until }, { signal: sig });
        fill(views, ...jfrViews(v));
      });
    });
  };
  load();
  return () => { if (fg) fg.destroy(); };
}
