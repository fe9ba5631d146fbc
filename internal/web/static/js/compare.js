// compare.js: two traces compared (/compare?a=ID&b=ID): their call trees
// merged by path (/api/v1/compare), each path marked same, changed,
// added (only in b) or removed (only in a) with the time it gained or
// lost, as a virtualised, collapsible tree.

import { api, fill, fmtDur, fmtNum, guard, h, link, navigate } from './lib.js';
import { vlist } from './vlist.js';

export function mount(el, ctx) {
  const a = (ctx.query.get('a') || '').trim();
  const b = (ctx.query.get('b') || '').trim();
  const ac = new AbortController();
  const ia = h('input', { id: 'cmp-a', value: a, size: 36, placeholder: 'trace id', required: true });
  const ib = h('input', { id: 'cmp-b', value: b, size: 36, placeholder: 'trace id', required: true });
  const form = h('form', {
    class: 'row cmp-form', onsubmit: (e) => {
      e.preventDefault();
      const x = ia.value.trim(), y = ib.value.trim();
      if (x && y) navigate(`/compare?a=${encodeURIComponent(x)}&b=${encodeURIComponent(y)}`);
    },
  }, h('label', null, 'Trace a (before)', ia), h('label', null, 'Trace b (after)', ib),
  h('button', { class: 'primary', id: 'cmp-go' }, 'Compare'));
  const out = h('div', { id: 'cmp-result' });
  el.append(h('h2', null, 'Compare traces'), form, out);
  if (!a || !b) {
    out.append(h('div', { class: 'notice' }, 'Enter two trace ids (a trace page links here with its own id as a).'));
    (a ? ib : ia).focus();
    return () => ac.abort();
  }
  out.append(h('div', { class: 'loading' }, 'Comparing…'));
  let list = null;
  guard(out, async () => {
    const c = await api('/api/v1/compare', { a, b }, { signal: ac.signal });
    list = render(out, c);
  });
  return () => { ac.abort(); if (list) list.destroy(); };
}

function render(out, c) {
  const nodes = c.nodes;
  const n = nodes.length;
  const { end, diff } = subtrees(nodes);
  const collapsed = new Set();
  let onlyDiff = false;
  let rows = [];
  const rebuild = () => {
    rows = [];
    for (let i = 0; i < n;) {
      if (onlyDiff && !diff[i]) { i = end[i]; continue; }
      rows.push(i);
      i = collapsed.has(i) ? end[i] : i + 1;
    }
    list.el.dataset.rows = String(rows.length);
    list.update(rows.length);
  };
  const row = (r) => {
    const i = rows[r];
    const x = nodes[i];
    const kids = end[i] > i + 1;
    const tog = kids ? h('button', {
      type: 'button', class: 'tr-tog', onclick: () => { if (collapsed.has(i)) collapsed.delete(i); else collapsed.add(i); rebuild(); },
    }, collapsed.has(i) ? '▸' : '▾') : h('span', { class: 'tr-tog' });
    const name = h('span', { class: 'tr-name' }, tog, h('span', { class: 'tr-op', title: x.component ? x.component + ' · ' + x.operation : x.operation }, x.operation));
    name.style.paddingLeft = (4 + x.depth * 14) + 'px';
    const calls = (s) => s ? fmtNum(s.calls) + (s.errors ? ` (${s.errors} err)` : '') : '–';
    const delta = x.deltaNs;
    return h('div', { class: 'cmp-row ' + x.status, dataset: { status: x.status } },
      name, h('span', { class: 'cmp-status' }, x.status),
      h('span', { class: 'num' }, calls(x.a) + ' → ' + calls(x.b)),
      h('span', { class: 'num' }, x.a ? fmtDur(x.a.totalNs) : '–'), h('span', { class: 'num' }, x.b ? fmtDur(x.b.totalNs) : '–'),
      h('span', { class: 'num ' + (delta > 0 ? 'delta-up' : delta < 0 ? 'delta-down' : 'muted') }, (delta > 0 ? '+' : '') + fmtDur(delta)));
  };
  const list = vlist({ rowHeight: 22, render: row, className: 'cmp-list' });
  list.el.id = 'cmp-tree';
  const side = (name, s) => h('div', { class: 'panel' }, h('b', null, name + ' '), link('/trace/' + encodeURIComponent(s.traceId), s.traceId),
    h('div', { class: 'muted' }, `${fmtDur(s.durationNs)} · ${fmtNum(s.spans)} spans · ${fmtNum(s.errors)} errors`));
  const dd = c.b.durationNs - c.a.durationNs;
  const only = h('input', { type: 'checkbox', id: 'cmp-diff-only', onchange: (e) => { onlyDiff = e.target.checked; rebuild(); } });
  fill(out,
    h('div', { class: 'cmp-sides' }, side('a', c.a), side('b', c.b)),
    h('div', { class: 'row', id: 'cmp-counts' },
      h('span', { id: 'cmp-delta' }, dd === 0 ? `a and b took as long (${fmtDur(c.a.durationNs)}).`
        : `b took ${fmtDur(Math.abs(dd))} ${dd > 0 ? 'longer' : 'less'} (${dd > 0 ? '+' : '−'}${c.a.durationNs ? (100 * Math.abs(dd) / c.a.durationNs).toFixed(1) : '∞'} %).`),
      ...['changed', 'added', 'removed', 'same'].map((k) => h('span', { class: 'badge cmp-count-' + k }, `${fmtNum(c.counts[k])} ${k}`)),
      c.limited ? h('span', { class: 'badge err' }, 'limited to 100,000 paths') : null,
      h('label', { class: 'check' }, only, 'Only differences')),
    h('div', { class: 'cmp-head' }, h('span', null, 'Call path (merged)'), h('span', null, 'Status'), h('span', { class: 'num' }, 'Calls a → b'),
      h('span', { class: 'num' }, 'Total a'), h('span', { class: 'num' }, 'Total b'), h('span', { class: 'num' }, 'Δ time')),
    list.el);
  rebuild();
  return list;
}

// subtrees answers, for the merged tree's nodes (parents first, each
// with parent: its index or -1), end[i]: the node after i's subtree,
// and diff[i]: 1 when a node in i's subtree is not the same in a and b.
export function subtrees(nodes) {
  const n = nodes.length;
  const end = new Int32Array(n);
  const diff = new Uint8Array(n);
  for (let i = 0; i < n; i++) { end[i] = i + 1; diff[i] = nodes[i].status !== 'same' ? 1 : 0; }
  for (let i = n - 1; i >= 0; i--) {
    const p = nodes[i].parent;
    if (p >= 0) { end[p] = Math.max(end[p], end[i]); if (diff[i]) diff[p] = 1; }
  }
  return { end, diff };
}
