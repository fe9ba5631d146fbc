// jfrevents.js: the JFR event browser of the analyses page's profile tab
// (/api/v1/jfr/types, /api/v1/jfr/events, /api/v1/jfr/event): every event
// type a host's JVM sent with its count and description, a type's recent
// events filtered by thread and field values, sorted and paged, and one
// event with its whole stack trace. Its settings live in the address
// (etype, ethread, efilter, esort, easc).

import { api, h, fill, guard, fmtDur, fmtNum, fmtBytes, fmtTime } from './lib.js';

/**
 * @typedef {{name: string, kind: string, label?: string, description?: string, unit?: string}} FieldInfo
 * @typedef {{name: string, label?: string, description?: string, category?: string[], fields: FieldInfo[], count?: number, kept?: number}} TypeInfo
 * @typedef {{id: number, time: number, thread?: string, values: any[]}} JFREvent
 */

// parseFilters splits the filter box's text (conditions separated by ";"
// or new lines) into the API's filter parameters, dropping empty ones.
/** @param {string} text @returns {string[]} */
export function parseFilters(text) {
  return String(text || '').split(/[;\n]/).map((s) => s.trim()).filter((s) => s !== '');
}

// eventsParams are the /api/v1/jfr/events parameters of the browser's
// settings.
/**
 * @param {string} host
 * @param {{etype?: string, ethread?: string, efilter?: string, esort?: string, easc?: string, since?: string, until?: string}} s
 * @param {string} [cursor]
 * @returns {Record<string, string | string[]>}
 */
export function eventsParams(host, s, cursor) {
  /** @type {Record<string, string | string[]>} */
  const p = { host, type: s.etype || '', limit: '100' };
  if (s.since) p.since = s.since;
  if (s.until) p.until = s.until;
  if (s.ethread) p.thread = s.ethread;
  const f = parseFilters(s.efilter);
  if (f.length) p.filter = f;
  if (s.esort) p.sort = s.esort;
  if (s.easc) p.order = 'asc';
  if (cursor) p.cursor = cursor;
  return p;
}

// eventColumns picks the fields a row shows: all but the thread ids
// (the thread's name stays) and the stack trace's truncated flag.
/** @param {TypeInfo} type @returns {number[]} indexes into type.fields */
export function eventColumns(type) {
  const out = [];
  type.fields.forEach((f, i) => {
    if (/\.(javaThreadId|osThreadId)$/.test(f.name) || /\.truncated$/.test(f.name)) return;
    out.push(i);
  });
  return out;
}

// fmtValue renders a field's value by its unit: times, durations, sizes,
// percentages; arrays (a stack trace) by their first item and count
// unless whole.
/** @param {FieldInfo} f @param {any} v @param {boolean} [whole] @returns {string} */
export function fmtValue(f, v, whole) {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) {
    if (whole) return v.join('\n');
    if (!v.length) return '';
    const more = v.length > 1 ? ` (+${v.length - 1})` : '';
    return String(v[0]) + more;
  }
  if (typeof v === 'number') {
    switch (f.unit) {
      case 'epoch-ns': return v > 0 ? fmtTime(v) : String(v);
      case 'ns': return v >= 0 ? fmtDur(v) : String(v);
      case 'bytes': return v >= 0 ? fmtBytes(v) : String(v);
      case 'percent': return (v * 100).toFixed(1) + ' %';
      case 'address': return '0x' + v.toString(16);
    }
    return fmtNum(v);
  }
  return String(v);
}

// typeLabel is a type's line in the selector.
/** @param {TypeInfo} t @returns {string} */
export function typeLabel(t) {
  return `${t.label || t.name} (${t.name}): ${fmtNum(t.count)}`;
}

/**
 * eventBrowser draws the browser of host's events.
 * @param {string} host
 * @param {{state: any, save: () => void, signal: AbortSignal}} ctx
 * @returns {HTMLElement}
 */
export function eventBrowser(host, { state, save, signal }) {
  const box = h('section', { class: 'jfr-events', dataset: { view: 'events' } }, h('h3', null, 'Events'));
  const body = h('div', null, h('div', { class: 'loading' }, 'Reading event types…'));
  box.append(body);
  guard(body, async () => {
    const r = await api('/api/v1/jfr/types', { host }, { signal });
    /** @type {TypeInfo[]} */
    const types = r.types || [];
    if (!types.length) { fill(body, h('div', { class: 'muted' }, 'no events')); return; }
    if (!types.some((t) => t.name === state.etype)) state.etype = types[0].name;
    const sel = h('select', { name: 'etype', 'aria-label': 'event type', onchange: () => { state.etype = sel.value; delete state.esort; save(); show(); } },
      types.map((t) => h('option', { value: t.name, selected: t.name === state.etype }, typeLabel(t))));
    const thread = h('input', { name: 'ethread', placeholder: 'thread contains', size: 16, value: state.ethread || '' });
    const filter = h('input', { name: 'efilter', placeholder: 'field=value; duration>1000000', size: 30, value: state.efilter || '' });
    const sort = h('select', { name: 'esort', 'aria-label': 'sort by' });
    const asc = h('input', { type: 'checkbox', name: 'easc', checked: !!state.easc });
    const form = h('form', { class: 'row', onsubmit: (e) => {
      e.preventDefault();
      state.ethread = thread.value.trim() || undefined; state.efilter = filter.value.trim() || undefined;
      state.esort = sort.value || undefined; state.easc = asc.checked ? '1' : undefined;
      save(); show();
    } }, h('label', null, 'type', sel), h('label', null, 'thread', thread), h('label', null, 'where', filter),
    h('label', null, 'sort', sort), h('label', { class: 'check' }, asc, 'ascending'), h('button', { type: 'submit' }, 'Filter'));
    const about = h('div', { class: 'muted jfr-about' });
    const list = h('div', { class: 'jfr-list' });
    const detail = h('div', { class: 'jfr-detail' });
    fill(body, form, about, list, detail);
    const show = () => {
      const t = types.find((x) => x.name === state.etype);
      fill(about, t.description || '', t.category && t.category.length ? ` [${t.category.join(' / ')}]` : '', ` ${fmtNum(t.kept)} of ${fmtNum(t.count)} kept.`);
      fill(sort, h('option', { value: '' }, 'time'), t.fields.map((f) => h('option', { value: f.name, selected: f.name === state.esort }, f.name)));
      fill(detail);
      page(t, '', true);
    };
    const page = (/** @type {TypeInfo} */ t, /** @type {string} */ cursor, /** @type {boolean} */ first) => {
      if (first) fill(list, h('div', { class: 'loading' }, 'Reading events…'));
      guard(list, async () => {
        const p = await api('/api/v1/jfr/events', eventsParams(host, state, cursor), { signal });
        const cols = eventColumns(p.type);
        let tbody = list.querySelector('tbody');
        if (first || !tbody) {
          tbody = h('tbody');
          fill(list, h('div', { class: 'muted jfr-total' }, `${fmtNum(p.total)} events match`),
            h('div', { class: 'vtable-box' }, h('table', { class: 'grid jfr-table' },
              h('thead', null, h('tr', null, cols.map((i) => h('th', { title: p.type.fields[i].description || '' }, p.type.fields[i].label || p.type.fields[i].name)))), tbody)));
        }
        for (const e of /** @type {JFREvent[]} */ (p.events)) {
          tbody.append(h('tr', { class: 'jfr-row', dataset: { id: String(e.id) }, onclick: () => open(e.id) },
            cols.map((i) => h('td', null, fmtValue(p.type.fields[i], e.values[i])))));
        }
        const more = list.querySelector('.jfr-more');
        if (more) more.remove();
        if (p.cursor) list.append(h('button', { class: 'jfr-more', type: 'button', onclick: () => page(t, p.cursor, false) }, 'More'));
      });
    };
    const open = (/** @type {number} */ id) => {
      fill(detail, h('div', { class: 'loading' }, 'Reading the event…'));
      guard(detail, async () => {
        const p = await api('/api/v1/jfr/event', { host, id: String(id) }, { signal });
        const e = p.events[0];
        fill(detail, h('h4', null, `${p.type.label || p.type.name} #${e.id}`),
          h('table', { class: 'grid jfr-fields' }, h('tbody', null, p.type.fields.map((/** @type {FieldInfo} */ f, /** @type {number} */ i) =>
            h('tr', null, h('th', { title: f.description || '' }, f.name), h('td', null, Array.isArray(e.values[i]) ? h('pre', { class: 'jfr-stack' }, fmtValue(f, e.values[i], true)) : fmtValue(f, e.values[i])))))));
      });
    };
    show();
  });
  return box;
}
