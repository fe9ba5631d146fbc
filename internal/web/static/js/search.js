// search.js: the trace search (/ and /search?…). The address holds the
// whole query: the form is filled from it, submitting it pushes a new
// address (so back and forward step through searches) and the search
// runs from the address, so a shared or reloaded link runs it again.
// Results are a duration-over-time scatter plot (scatter.js) and a
// table that renders only its visible rows once it is long.

import { api, errorBox, fill, fmtDur, fmtNum, fmtTime, h, link, navigate, query, setQuery } from './lib.js';
import { Scatter } from './scatter.js';

// The parameters of GET /api/v1/traces the address may hold (the
// cursor stays out: paging is "More", not an address).
const API_PARAMS = ['host', 'since', 'until', 'minDuration', 'maxDuration', 'errors', 'name', 'service', 'operation',
  'attr', 'q', 'eql', 'deep', 'budget', 'oldest', 'limit'];
const REPEATED = new Set(['host', 'attr']);
// The view's own parameters: the scatter's scale and the table's order.
const UI_PARAMS = ['scale', 'sort'];
const DEFAULT_LIMIT = 100;
const PRESETS = [['', 'any time'], ['15m', 'last 15 min'], ['1h', 'last hour'], ['6h', 'last 6 hours'],
  ['24h', 'last 24 hours'], ['7d', 'last 7 days'], ['custom', 'custom…']];
// Tables longer than this render only the rows in view.
const VIRTUAL_FROM = 500;

export function mount(el, ctx) {
  const v = new SearchView(el, ctx.query);
  return () => v.destroy();
}

// apiParams picks the search's parameters out of the address.
export function apiParams(q) {
  const p = {};
  for (const k of API_PARAMS) {
    if (REPEATED.has(k)) { const vs = q.getAll(k).filter((x) => x !== ''); if (vs.length) p[k] = vs; } else if (q.get(k)) p[k] = q.get(k);
  }
  if (!p.limit) p.limit = String(DEFAULT_LIMIT);
  return p;
}

class SearchView {
  constructor(el, q) {
    this.el = el;
    this.q = q;
    this.params = apiParams(q);
    this.traces = [];
    this.ctl = null;
    this.form = new SearchForm(this.params, (p) => this.submit(p));
    this.results = h('div', { class: 'search-results' });
    el.append(this.form.el, this.results);
    this.form.load().catch(() => { /* the pickers stay empty; the search itself says what is wrong */ });
    this.run();
  }

  destroy() {
    if (this.ctl) this.ctl.abort();
    if (this.scatter) this.scatter.destroy();
    if (this.table) this.table.destroy();
    this.form.destroy();
  }

  // uiState answers the view's own parameters as they are now.
  uiState() {
    const u = {};
    for (const k of UI_PARAMS) if (this.q.get(k)) u[k] = this.q.get(k);
    return u;
  }

  // submit searches with params: a new address (the router mounts the
  // view again with it), or the same search again if nothing changed.
  submit(params) {
    if (params.limit === String(DEFAULT_LIMIT)) params = Object.assign({}, params, { limit: '' });
    const url = '/search' + query(Object.assign({}, params, this.uiState()));
    if (url === location.pathname + location.search) this.run();
    else navigate(url);
  }

  // keepUI records a change of the view's own state in the address.
  keepUI(k, v) {
    if (v) this.q.set(k, v); else this.q.delete(k);
    const all = {};
    for (const key of new Set(this.q.keys())) all[key] = this.q.getAll(key);
    setQuery(all);
  }

  async run() {
    this.traces = [];
    this.cursor = '';
    this.scanned = 0;
    this.results.dataset.state = 'loading';
    fill(this.results, h('div', { class: 'loading' }, 'Searching…'));
    const page = await this.fetch();
    if (!page) return;
    this.layout();
    this.show(page);
  }

  async more() {
    this.moreButton.disabled = true;
    this.moreButton.textContent = 'Loading…';
    this.results.dataset.state = 'loading';
    const page = await this.fetch(this.cursor);
    if (page) this.show(page);
    else { this.moreButton.disabled = false; this.moreButton.textContent = 'More (try again)'; }
  }

  // fetch answers the next page, or shows why there is none.
  async fetch(cursor) {
    if (this.ctl) this.ctl.abort();
    const ctl = this.ctl = new AbortController();
    const t0 = performance.now();
    try {
      const page = await api('/api/v1/traces', Object.assign({}, this.params, { cursor }), { signal: ctl.signal });
      page.ms = performance.now() - t0;
      this.form.markInvalid(null);
      return page;
    } catch (e) {
      if (e.name === 'AbortError') return null;
      this.form.markInvalid(e);
      this.results.dataset.state = 'error';
      if (cursor) this.notices.append(errorBox(e));
      else fill(this.results, errorBox(e));
      return null;
    }
  }

  // layout builds the empty result panels.
  layout() {
    this.summary = h('div', { class: 'search-summary' });
    this.notices = h('div', { class: 'search-notices' });
    const log = this.q.get('scale') !== 'lin';
    const scaleBox = h('input', { type: 'checkbox', id: 'scatter-log', checked: log });
    scaleBox.addEventListener('change', () => {
      this.scatter.setLog(scaleBox.checked);
      this.keepUI('scale', scaleBox.checked ? '' : 'lin');
    });
    const plot = h('div', { class: 'scatter-box' });
    const bar = h('div', { class: 'scatter-bar' },
      h('span', { class: 'legend' }, h('span', { class: 'dot ok-dot' }), 'trace', h('span', { class: 'dot err-dot' }), 'with errors'),
      h('label', { class: 'check' }, scaleBox, 'log scale'),
      h('span', { class: 'muted hint' }, 'click a point to open its trace · drag across the plot to search that time range'));
    this.moreButton = h('button', { type: 'button', id: 'search-more', onclick: () => this.more() }, 'More');
    this.moreRow = h('div', { class: 'row more-row', hidden: true }, this.moreButton);
    if (this.scatter) this.scatter.destroy();
    if (this.table) this.table.destroy();
    this.table = new ResultTable(this.q.get('sort') || '', {
      onSort: (s) => this.keepUI('sort', s),
      onHover: (id) => this.scatter.highlight(id),
    });
    this.scatterPanel = h('div', { class: 'panel scatter-panel' }, bar, plot);
    fill(this.results, this.summary, this.notices, this.scatterPanel, this.table.el, this.moreRow);
    this.scatter = new Scatter(plot, {
      onPick: (p, e) => open(p.id, e),
      onBrush: (t0, t1) => this.zoom(t0, t1),
      tooltip: (p) => [p.data.name || '(no name)', `${fmtDur(p.d)} · ${p.data.spans} spans${p.error ? ` · ${p.data.errors} errors` : ''}`,
        fmtTime(p.t), p.data.host + (p.data.service ? ' · ' + p.data.service : '')],
    });
    this.scatter.log = log;
  }

  // show appends a page of results.
  show(page) {
    for (const t of page.traces) this.traces.push(t);
    this.cursor = page.cursor;
    this.scanned = (this.scanned || 0) + page.scanned;
    // "More" needs a cursor to go on from (the store gives one whenever
    // more is true, a page cut by the budget too).
    const more = page.more && !!page.cursor;
    const n = this.traces.length;
    const errs = this.traces.reduce((a, t) => a + (t.error ? 1 : 0), 0);
    fill(this.summary,
      h('strong', { id: 'search-count', dataset: { count: String(n) } }, `${fmtNum(n)} trace${n === 1 ? '' : 's'}`),
      errs ? h('span', { class: 'badge err' }, `${fmtNum(errs)} with errors`) : null,
      more ? h('span', { class: 'muted' }, 'more match') : null,
      h('span', { class: 'muted', id: 'search-scanned', dataset: { scanned: String(this.scanned) } },
        `${fmtNum(this.scanned)} index entries scanned · ${Math.round(page.ms)} ms`));
    this.notices.replaceChildren();
    if (page.partial) this.notices.append(this.partialNotice(more));
    else if (!n) this.notices.append(h('div', { class: 'notice' }, 'No traces match this search.'));
    this.scatter.set(this.traces.map((t) => ({ t: t.start, d: t.durationNs, error: t.error, id: t.traceId, data: t })));
    this.table.set(this.traces);
    // Nothing found: the notice says so, without an empty plot and table.
    this.table.el.hidden = !n;
    this.scatterPanel.hidden = !n;
    this.moreRow.hidden = !more;
    this.moreButton.disabled = false;
    this.moreButton.textContent = `More (next ${fmtNum(Number(this.params.limit))})`;
    // Tests and scripts wait for this.
    this.results.dataset.state = 'done';
  }

  // partialNotice says that the time budget cut the search, and offers
  // a longer one.
  partialNotice(more) {
    const budget = this.params.budget || '5s';
    const longer = seconds(budget) < 30 ? '30s' : seconds(budget) < 60 ? '60s' : '';
    return h('div', { class: 'notice partial', id: 'search-partial' },
      `The search stopped at its time budget (${budget}) before it reached the end of the time range; `,
      more ? '"More" continues where it stopped. ' : 'traces may be missing. ',
      longer ? h('button', { type: 'button', id: 'search-longer', onclick: () => this.submit(Object.assign({}, this.params, { budget: longer })) },
        `Search again with a ${longer} budget`) : null);
  }

  // zoom searches the time range dragged across the plot.
  zoom(t0, t1) {
    const p = Object.assign({}, this.params);
    p.since = new Date(t0 / 1e6).toISOString();
    p.until = new Date(t1 / 1e6 + 1).toISOString();
    this.submit(p);
  }
}

// seconds reads a Go duration such as 500ms, 5s or 1m (NaN for others).
export function seconds(d) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(d);
  return m ? Number(m[1]) * { ms: 1e-3, s: 1, m: 60 }[m[2]] : NaN;
}

// open goes to a trace (a new tab with Ctrl or ⌘).
function open(id, e) {
  const url = '/trace/' + encodeURIComponent(id);
  if (e && (e.ctrlKey || e.metaKey)) window.open(url, '_blank', 'noopener');
  else navigate(url);
}

// SearchForm is the search's form: it shows params and answers new ones
// on submit.
class SearchForm {
  constructor(params, onSubmit) {
    this.p = params;
    this.onSubmit = onSubmit;
    this.hosts = [...(params.host || [])];
    this.build();
  }

  destroy() { if (this.ctl) this.ctl.abort(); }

  // load fills the host picker, the trace names and the service and
  // operation drop-downs.
  async load() {
    this.ctl = new AbortController();
    const list = await api('/api/v1/hosts', null, { signal: this.ctl.signal });
    this.knownHosts = list.hosts.map((x) => x.name);
    this.renderHostPicker();
    await this.loadNames();
  }

  // loadNames asks for the trace names (of the one host chosen), the
  // services and the chosen service's operations, as Jaeger's search
  // page asks for its services and then the operations of the one
  // chosen.
  async loadNames() {
    const host = this.hosts.length === 1 ? this.hosts[0] : '';
    const service = this.service.value;
    const n = await api('/api/v1/names', { host, service }, { signal: this.ctl.signal });
    fill(this.nameList, (n.names || []).map((x) => h('option', { value: x })));
    choices(this.service, 'all services', n.services || []);
    if (this.service.value === service) choices(this.operation, 'all operations', n.operations || []);
    this.operation.disabled = !this.service.value && !this.operation.value;
    this.operation.dataset.service = service;
  }

  build() {
    const p = this.p;
    const input = (id, name, value, attrs = {}) => h('input', Object.assign({ id, name, value: value || '', autocomplete: 'off' }, attrs));

    // Time range: a preset or custom since/until.
    const preset = !p.since && !p.until ? '' : (!p.until && PRESETS.some(([v]) => v === p.since) ? p.since : 'custom');
    this.range = h('select', { id: 'f-range' }, PRESETS.map(([v, label]) => h('option', { value: v, selected: v === preset }, label)));
    this.since = input('f-since', 'since', preset === 'custom' ? p.since : '', { placeholder: 'RFC 3339 or 2h', size: 24 });
    this.until = input('f-until', 'until', p.until, { placeholder: 'RFC 3339 or 10m', size: 24 });
    const custom = h('span', { class: 'custom-range', hidden: preset !== 'custom' },
      h('label', null, 'since', this.since), h('label', null, 'until', this.until));
    this.range.addEventListener('change', () => { custom.hidden = this.range.value !== 'custom'; });

    // Hosts: chosen ones as chips, a picker to add one.
    this.hostPicker = h('select', { id: 'f-host', 'aria-label': 'add a host' });
    this.hostChips = h('span', { class: 'chips', id: 'f-hosts' });
    this.hostPicker.addEventListener('change', () => {
      const v = this.hostPicker.value;
      if (v && !this.hosts.includes(v)) this.hosts.push(v);
      this.renderHostPicker();
      this.loadNames().catch(() => {});
    });
    this.renderHostPicker();

    this.nameList = h('datalist', { id: 'f-names' });
    // Service and operation: drop-downs filled from the API (load), the
    // operations those of the service chosen; a value of the address
    // that the API does not list stays chosen.
    this.service = h('select', { id: 'f-service', name: 'service' });
    this.operation = h('select', { id: 'f-operation', name: 'operation', disabled: !p.service && !p.operation });
    choices(this.service, 'all services', [], p.service);
    choices(this.operation, 'all operations', [], p.operation);
    this.service.addEventListener('change', () => {
      choices(this.operation, 'all operations', [], '');
      this.operation.disabled = true;
      this.loadNames().catch(() => {});
    });
    this.name = input('f-name', 'name', p.name, { list: 'f-names', size: 30, placeholder: 'root operation' });
    this.minDur = input('f-min', 'minDuration', p.minDuration, { placeholder: '250ms', size: 7 });
    this.maxDur = input('f-max', 'maxDuration', p.maxDuration, { placeholder: '2s', size: 7 });
    this.errors = h('input', { type: 'checkbox', id: 'f-errors', checked: !!p.errors && p.errors !== 'false' });

    // Text, ~regex or EQL: a mode and one field.
    let mode = 'text', text = p.q || '';
    if (p.eql) { mode = 'eql'; text = p.eql; } else if (text.startsWith('~')) { mode = 'regex'; text = text.slice(1); }
    this.mode = h('select', { id: 'f-mode', 'aria-label': 'query language' },
      [['text', 'text'], ['regex', '~regex'], ['eql', 'EQL']].map(([v, l]) => h('option', { value: v, selected: v === mode }, l)));
    this.text = input('f-q', 'q', text, { size: 40 });
    const placeholder = () => {
      this.text.placeholder = { text: 'text in operations, classes, attributes, exceptions',
        regex: 'RE2, e.g. Cart|Order(Service)?', eql: "time > 10ms and class ~= 'Dao'" }[this.mode.value];
    };
    this.mode.addEventListener('change', placeholder);
    placeholder();
    this.deep = h('input', { type: 'checkbox', id: 'f-deep', checked: !!p.deep && p.deep !== 'false' });

    this.attrs = h('div', { class: 'attr-rows', id: 'f-attrs' });
    for (const a of p.attr || []) this.addAttr(a);
    this.limit = input('f-limit', 'limit', p.limit, { type: 'number', min: 1, max: 100000, size: 6 });
    this.budget = input('f-budget', 'budget', p.budget, { placeholder: '5s', size: 5 });
    this.oldest = h('input', { type: 'checkbox', id: 'f-oldest', checked: !!p.oldest && p.oldest !== 'false' });

    this.el = h('form', { class: 'panel search-form', id: 'search-form', onsubmit: (e) => { e.preventDefault(); this.onSubmit(this.read()); } },
      h('div', { class: 'row' },
        h('label', null, 'time', this.range), custom,
        h('label', null, 'hosts', h('span', { class: 'host-field' }, this.hostChips, this.hostPicker)),
        h('label', null, 'service', this.service),
        h('label', null, 'operation', this.operation),
        h('label', null, 'trace name', this.name),
        h('label', null, 'min duration', this.minDur),
        h('label', null, 'max duration', this.maxDur),
        h('label', { class: 'check' }, this.errors, 'errors only')),
      h('div', { class: 'row' },
        h('label', null, 'search', h('span', { class: 'query-field' }, this.mode, this.text)),
        h('label', { class: 'check', title: 'text, regex and EQL look at every span, not just the root' }, this.deep, 'every span'),
        h('label', null, 'limit', this.limit),
        h('label', { title: 'stop searching after this long' }, 'budget', this.budget),
        h('label', { class: 'check' }, this.oldest, 'oldest first'),
        h('button', { type: 'button', id: 'f-add-attr', onclick: () => this.addAttr('').querySelector('input').focus() }, '+ attribute'),
        h('span', { class: 'spacer' }),
        h('button', { type: 'button', id: 'f-reset', onclick: () => navigate('/search') }, 'Reset'),
        h('button', { type: 'submit', class: 'primary', id: 'f-submit' }, 'Search')),
      this.attrs, this.nameList);
  }

  renderHostPicker() {
    const known = this.knownHosts || [];
    fill(this.hostPicker, h('option', { value: '' }, this.hosts.length ? '+ host' : 'any host'),
      known.filter((x) => !this.hosts.includes(x)).map((x) => h('option', { value: x }, x)));
    this.hostPicker.value = '';
    fill(this.hostChips, this.hosts.map((x) => h('span', { class: 'chip', dataset: { host: x } }, x,
      h('button', { type: 'button', title: 'remove ' + x, 'aria-label': 'remove ' + x, onclick: () => {
        this.hosts = this.hosts.filter((y) => y !== x);
        this.renderHostPicker();
        this.loadNames().catch(() => {});
      } }, '×'))));
  }

  // addAttr adds a KEY=VALUE row.
  addAttr(kv) {
    const i = kv.indexOf('=');
    const key = h('input', { class: 'attr-key', placeholder: 'key', value: i < 0 ? kv : kv.slice(0, i), size: 18, autocomplete: 'off' });
    const value = h('input', { class: 'attr-value', placeholder: 'value', value: i < 0 ? '' : kv.slice(i + 1), size: 24, autocomplete: 'off' });
    const row = h('div', { class: 'attr-row' }, h('span', { class: 'muted' }, 'attribute'), key, '=', value,
      h('button', { type: 'button', title: 'remove this attribute filter', onclick: () => row.remove() }, '×'));
    this.attrs.append(row);
    return row;
  }

  // read answers the form's parameters (empty ones left out by query()).
  read() {
    const v = (x) => x.value.trim();
    const p = {
      host: this.hosts, service: this.service.value, operation: this.operation.value, name: v(this.name),
      minDuration: v(this.minDur), maxDuration: v(this.maxDur),
      errors: this.errors.checked, deep: this.deep.checked, oldest: this.oldest.checked,
      budget: v(this.budget),
      limit: v(this.limit) && v(this.limit) !== String(DEFAULT_LIMIT) ? v(this.limit) : '',
    };
    if (this.range.value === 'custom') { p.since = v(this.since); p.until = v(this.until); } else p.since = this.range.value;
    const text = v(this.text);
    if (this.mode.value === 'eql') p.eql = text;
    else if (this.mode.value === 'regex') p.q = text && '~' + text.replace(/^~/, '');
    else p.q = text;
    p.attr = [...this.attrs.querySelectorAll('.attr-row')].map((r) => {
      const k = r.querySelector('.attr-key').value.trim();
      return k ? k + '=' + r.querySelector('.attr-value').value : '';
    });
    return p;
  }

  // markInvalid outlines the field a 400 names ("minDuration: …").
  markInvalid(err) {
    for (const x of this.el.querySelectorAll('.invalid')) x.classList.remove('invalid');
    if (!err || err.status !== 400) return;
    const fields = { since: this.since, until: this.until, minDuration: this.minDur, maxDuration: this.maxDur,
      q: this.text, eql: this.text, limit: this.limit, budget: this.budget, name: this.name, service: this.service,
      operation: this.operation };
    for (const [k, f] of Object.entries(fields)) {
      if (err.message.includes(k + ':')) {
        f.classList.add('invalid');
        if (k === 'since' || k === 'until') this.range.classList.add('invalid');
      }
    }
    if (err.message.includes('attr:')) for (const x of this.attrs.querySelectorAll('input')) x.classList.add('invalid');
  }
}

// choices fills a drop-down: "" (labelled all) and the values, keeping
// the value chosen (keep, default the current one) even when the values
// do not hold it.
/**
 * @param {HTMLSelectElement} sel
 * @param {string} all
 * @param {string[]} values
 * @param {string} [keep]
 */
function choices(sel, all, values, keep = sel.value) {
  const vs = keep && !values.includes(keep) ? [keep, ...values] : values;
  fill(sel, h('option', { value: '' }, all), vs.map((x) => h('option', { value: x, selected: x === keep }, x)));
  sel.value = keep || '';
}

const COLUMNS = [
  { key: 'start', label: 'Start', cls: 'c-start' },
  { key: 'name', label: 'Trace name', cls: 'c-name' },
  { key: 'host', label: 'Host · service', cls: 'c-host' },
  { key: 'duration', label: 'Duration', cls: 'c-dur num' },
  { key: 'spans', label: 'Spans', cls: 'c-spans num' },
  { key: 'errors', label: 'Errors', cls: 'c-err num' },
  { key: 'id', label: 'Trace id', cls: 'c-id' },
];

const SORT_VALUE = {
  start: (t) => t.start, name: (t) => t.name || '', host: (t) => t.host + ' ' + (t.service || ''),
  duration: (t) => t.durationNs, spans: (t) => t.spans, errors: (t) => t.errors, id: (t) => t.traceId,
};

// ResultTable is the table of traces found. Long ones render only the
// rows in view (plus a margin) between two spacer rows.
class ResultTable {
  constructor(sort, { onSort, onHover }) {
    this.sort = sort;
    this.onSort = onSort;
    this.onHover = onHover;
    this.rows = [];
    this.head = h('tr', null, COLUMNS.map((c) => h('th', { class: c.cls + ' sortable', dataset: { key: c.key } }, c.label)));
    this.body = h('tbody');
    this.table = h('table', { class: 'grid results', id: 'search-table' },
      h('colgroup', null, COLUMNS.map((c) => h('col', { class: c.cls }))), h('thead', null, this.head), this.body);
    this.el = h('div', { class: 'results-scroll' }, this.table);
    this.head.addEventListener('click', (e) => this.clickHead(e));
    this.body.addEventListener('click', (e) => this.clickRow(e));
    this.body.addEventListener('mouseover', (e) => {
      const tr = e.target.closest('tr[data-id]');
      this.onHover(tr ? tr.dataset.id : null);
    });
    this.body.addEventListener('mouseleave', () => this.onHover(null));
    this.onScroll = () => {
      if (this.frame) return;
      this.frame = requestAnimationFrame(() => { this.frame = 0; this.renderWindow(); });
    };
    this.el.addEventListener('scroll', this.onScroll);
  }

  destroy() { if (this.frame) cancelAnimationFrame(this.frame); }

  set(traces) {
    this.rows = traces.slice();
    this.order();
    this.virtual = this.rows.length > VIRTUAL_FROM;
    this.el.classList.toggle('virtual', this.virtual);
    this.table.dataset.rows = String(this.rows.length);
    if (this.virtual) this.renderWindow();
    else fill(this.body, this.rows.map((t) => this.row(t)));
  }

  // order sorts the rows by the sort key ("-" first: descending); none
  // keeps the search's order.
  order() {
    for (const th of this.head.children) {
      th.classList.remove('asc', 'desc');
      if (this.sort.replace(/^-/, '') === th.dataset.key) th.classList.add(this.sort.startsWith('-') ? 'desc' : 'asc');
    }
    const key = this.sort.replace(/^-/, '');
    const f = SORT_VALUE[key];
    if (!f) return;
    const dir = this.sort.startsWith('-') ? -1 : 1;
    this.rows.sort((a, b) => { const x = f(a), y = f(b); return (x < y ? -1 : x > y ? 1 : 0) * dir; });
  }

  clickHead(e) {
    const th = e.target.closest('th[data-key]');
    if (!th) return;
    const k = th.dataset.key;
    // Numbers and times sort largest first on the first click.
    const numeric = ['start', 'duration', 'spans', 'errors'].includes(k);
    this.sort = this.sort === (numeric ? '-' + k : k) ? (numeric ? k : '-' + k) : (numeric ? '-' + k : k);
    this.onSort(this.sort);
    this.set(this.rows);
  }

  clickRow(e) {
    if (e.target.closest('a')) return; // the link goes there itself
    const tr = e.target.closest('tr[data-id]');
    if (tr && !getSelection().toString()) open(tr.dataset.id, e);
  }

  row(t) {
    return h('tr', { class: 'clickable' + (t.error ? ' has-error' : ''), dataset: { id: t.traceId } },
      h('td', { class: 'c-start mono' }, fmtTime(t.start)),
      h('td', { class: 'c-name', title: t.name }, t.name || h('span', { class: 'muted' }, '(no name)')),
      h('td', { class: 'c-host', title: t.host + (t.service ? ' · ' + t.service : '') }, t.host, t.service ? h('span', { class: 'muted' }, ' · ' + t.service) : null),
      h('td', { class: 'c-dur num' }, fmtDur(t.durationNs)),
      h('td', { class: 'c-spans num' }, fmtNum(t.spans)),
      h('td', { class: 'c-err num' }, t.errors ? h('span', { class: 'badge err' }, fmtNum(t.errors)) : ''),
      h('td', { class: 'c-id mono' }, link('/trace/' + encodeURIComponent(t.traceId), t.traceId)));
  }

  // renderWindow renders the rows in view of a long table.
  renderWindow() {
    if (!this.virtual) return;
    const rowH = this.rowH || 28;
    const view = this.el.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.el.scrollTop / rowH) - 20);
    const last = Math.min(this.rows.length, first + Math.ceil(view / rowH) + 40);
    const spacer = (n) => h('tr', { class: 'spacer', 'aria-hidden': 'true' }, h('td', { colspan: COLUMNS.length, style: { height: n * rowH + 'px' } }));
    const rows = [];
    for (let i = first; i < last; i++) rows.push(this.row(this.rows[i]));
    fill(this.body, spacer(first), rows, spacer(this.rows.length - last));
    // Measure a real row once; the CSS fixes their height.
    if (!this.rowH && rows.length) {
      this.rowH = rows[0].getBoundingClientRect().height || 28;
      if (Math.abs(this.rowH - rowH) > 0.5) this.renderWindow();
    }
  }
}
