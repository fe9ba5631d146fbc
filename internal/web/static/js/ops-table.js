// ops-table.js: a sortable table that renders only the rows in view, so
// tens of thousands of rows stay fast (the analyses' operations and
// pivot tables).

import { h } from './lib.js';

const ROW = 26; // px: rows have one line (CSS .vtable td { height })

// table answers {el, set(rows)}.
//   columns: [{key, label, num, title, value(row) (sort key, default
//   row[key]), cell(row) (text or Node, default value)}]
//   opts: {sort, desc, onSort(key, desc), height (px of the scroll box),
//   empty (the text of an empty table)}
export function table(columns, rows, opts = {}) {
  let sort = opts.sort || '', desc = !!opts.desc;
  let data = rows.slice();
  const head = h('tr', null, columns.map((c) => h('th', {
    class: (c.num ? 'num ' : '') + 'sortable', title: c.title || 'sort by ' + c.label, dataset: { key: c.key },
    onclick: () => { sortBy(c.key, sort === c.key ? !desc : !!c.num); if (opts.onSort) opts.onSort(sort, desc); },
  }, c.label)));
  const body = h('tbody');
  const tbl = h('table', { class: 'grid vtable' }, h('thead', null, head), body);
  const box = h('div', { class: 'vtable-box' }, tbl);
  if (opts.height) box.style.maxHeight = opts.height + 'px';
  const order = () => {
    const c = columns.find((x) => x.key === sort);
    if (c) sortRows(data, c, desc);
  };
  let frame = 0, last = '';
  const render = (force) => {
    frame = 0;
    const { first, end } = rowWindow(box.scrollTop, box.clientHeight || 600, data.length);
    const key = first + ':' + end;
    if (!force && key === last) return;
    last = key;
    const trs = [];
    if (first > 0) trs.push(spacer(first * ROW, columns.length));
    for (let i = first; i < end; i++) trs.push(row(data[i]));
    if (end < data.length) trs.push(spacer((data.length - end) * ROW, columns.length));
    if (!data.length) trs.push(h('tr', null, h('td', { colspan: columns.length, class: 'muted' }, opts.empty || 'nothing')));
    body.replaceChildren(...trs);
    box.dataset.rows = data.length;
  };
  const row = (r) => {
    return h('tr', null, columns.map((c) => {
      const v = c.cell ? c.cell(r) : valueOf(c, r);
      return h('td', { class: c.num ? 'num' : null, title: typeof v === 'string' && v.length > 40 ? v : null }, v);
    }));
  };
  box.addEventListener('scroll', () => { if (!frame) frame = requestAnimationFrame(() => render(false)); });
  const marks = () => {
    for (const th of head.children) {
      th.classList.toggle('sorted', th.dataset.key === sort);
      th.classList.toggle('desc', th.dataset.key === sort && desc);
      th.setAttribute('aria-sort', th.dataset.key === sort ? (desc ? 'descending' : 'ascending') : 'none');
    }
  };
  const sortBy = (key, d) => { sort = key; desc = d; order(); marks(); render(true); };
  const set = (rs) => { data = rs.slice(); order(); render(true); };
  order(); marks();
  // The first render needs the box's height: after it is in the page.
  render(true);
  requestAnimationFrame(() => render(true));
  return { el: box, set };
}

// valueOf is row r's value in column c (its sort key).
function valueOf(c, r) { return c.value ? c.value(r) : r[c.key]; }

// sortRows sorts rows in place by column c: numbers by value, anything
// else as text; descending when desc.
/**
 * @template T
 * @param {T[]} rows
 * @param {{key: string, value?: (row: T) => unknown}} c
 * @param {boolean} desc
 * @returns {T[]}
 */
export function sortRows(rows, c, desc) {
  const sign = desc ? -1 : 1;
  rows.sort((a, b) => {
    const x = valueOf(c, a), y = valueOf(c, b);
    if (typeof x === 'number' && typeof y === 'number') return sign * (x - y);
    return sign * String(x ?? '').localeCompare(String(y ?? ''));
  });
  return rows;
}

// rowWindow answers the rows to render, first up to end (exclusive), of
// n rows ROW px tall scrolled top px down a box view px tall: the rows in
// view and 10 either side.
/**
 * @param {number} top
 * @param {number} view
 * @param {number} n
 * @returns {{first: number, end: number}}
 */
export function rowWindow(top, view, n) {
  const first = Math.max(0, Math.floor(top / ROW) - 10);
  const end = Math.min(n, Math.ceil((top + view) / ROW) + 10);
  return { first, end };
}

function spacer(px, cols) {
  const td = h('td', { colspan: cols, class: 'spacer' });
  td.style.height = px + 'px';
  return h('tr', { class: 'spacer', 'aria-hidden': 'true' }, td);
}
