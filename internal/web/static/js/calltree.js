// calltree.js: the trace's call tree as a virtualised, collapsible list:
// one row per span shown, indented by nesting, with a bar of its time in
// the trace, its duration and self time, and a marker of what the view
// pruned below it (a click expands it).

import { fmtDur, fmtNum, h } from './lib.js';
import { vlist } from './vlist.js';

const rowH = 22;

export class CallTree {
  // model: a TraceModel; on.select(pos), on.expand(pos) are called on
  // clicks.
  constructor(model, on) {
    this.model = model;
    this.on = on;
    this.collapsed = new Set(); // span indexes
    this.selected = -1; // pos
    this.hits = new Set(); // span indexes of search hits
    this.critical = new Set(); // span indexes on the critical path
    this.rows = [];
    this.rowOfPos = new Int32Array(0);
    this.list = vlist({ rowHeight: rowH, render: (i) => this.row(i), className: 'tree-list' });
    this.list.el.id = 'trace-tree';
    this.list.el.addEventListener('keydown', (e) => this.key(e));
    this.head = h('div', { class: 'tr-head' }, h('span', null, 'Span'), h('span', null, 'Timeline'),
      h('span', { class: 'num' }, 'Duration'), h('span', { class: 'num' }, 'Self'));
    this.el = h('div', { class: 'tree-panel' }, this.head, this.list.el);
    this.rebuild();
  }

  // rebuild recomputes the visible rows (after a merge or a collapse).
  rebuild() {
    const { rows, rowOfPos } = shownRows(this.model.spans, this.collapsed);
    this.rows = rows;
    this.rowOfPos = rowOfPos;
    this.list.el.dataset.rows = String(rows.length);
    this.list.update(rows.length);
  }

  toggle(pos) {
    const s = this.model.spans[pos];
    if (this.collapsed.has(s.index)) this.collapsed.delete(s.index); else this.collapsed.add(s.index);
    this.rebuild();
  }

  // collapseAll folds every span with children below the first level.
  collapseAll(open) {
    this.collapsed.clear();
    if (!open) for (const s of this.model.spans) if (s.level >= 1 && s.end > s.pos + 1) this.collapsed.add(s.index);
    this.rebuild();
  }

  // show opens the ancestors of pos, selects it and scrolls to it.
  show(pos) {
    let changed = false;
    for (const a of this.model.ancestors(pos)) {
      if (this.collapsed.delete(this.model.spans[a].index)) changed = true;
    }
    if (changed) this.rebuild();
    this.selected = pos;
    this.list.scrollTo(this.rowOfPos[pos]);
    this.list.now();
  }

  // refresh redraws the rows in view (after marks changed).
  refresh() { this.list.now(); }

  row(i) {
    const pos = this.rows[i];
    const s = this.model.spans[pos];
    const v = this.model.view;
    const open = !this.collapsed.has(s.index);
    const hasKids = s.end > s.pos + 1;
    const cls = ['tr-row'];
    if (pos === this.selected) cls.push('selected');
    if (s.error) cls.push('is-error');
    if (this.hits.has(s.index)) cls.push('hit');
    if (this.critical.has(s.index)) cls.push('crit');
    const tog = hasKids
      ? h('button', { type: 'button', class: 'tr-tog', title: open ? 'Collapse' : 'Expand', onclick: (e) => { e.stopPropagation(); this.toggle(pos); } }, open ? '▾' : '▸')
      : h('span', { class: 'tr-tog' });
    const name = h('span', { class: 'tr-name' }, tog,
      h('span', { class: 'tr-op', title: s.component ? s.component + ' · ' + s.operation : s.operation }, s.operation),
      s.service ? h('span', { class: 'tr-svc' }, s.service) : null,
      s.error ? h('span', { class: 'badge err' }, 'error') : null,
      s.pruned ? h('button', {
        type: 'button', class: 'tr-pruned', title: 'Show more of this subtree',
        onclick: (e) => { e.stopPropagation(); this.on.expand(pos); },
      }, `+${fmtNum(s.pruned)} pruned` + (s.prunedErrors ? ` (${fmtNum(s.prunedErrors)} err)` : '')) : null);
    name.style.paddingLeft = (4 + s.level * 14) + 'px';
    const bar = h('i');
    const total = Math.max(1, v.durationNs);
    bar.style.left = (100 * s.offsetNs / total) + '%';
    bar.style.width = Math.max(0.2, 100 * s.durationNs / total) + '%';
    const r = h('div', { class: cls.join(' '), dataset: { index: String(s.index) }, onclick: () => this.on.select(pos) },
      name, h('span', { class: 'tr-bar' }, bar), h('span', { class: 'num' }, fmtDur(s.durationNs)), h('span', { class: 'num muted' }, fmtDur(s.selfNs)));
    return r;
  }

  // key: arrows move the selection, left and right fold and unfold.
  key(e) {
    if (this.selected < 0) return;
    const r = this.rowOfPos[this.selected];
    const s = this.model.spans[this.selected];
    let next = -1;
    if (e.key === 'ArrowDown') next = this.rows[Math.min(this.rows.length - 1, r + 1)];
    else if (e.key === 'ArrowUp') next = this.rows[Math.max(0, r - 1)];
    else if (e.key === 'ArrowLeft') {
      if (s.end > s.pos + 1 && !this.collapsed.has(s.index)) this.toggle(this.selected);
      else if (s.parentPos >= 0) next = s.parentPos;
    } else if (e.key === 'ArrowRight' && this.collapsed.has(s.index)) this.toggle(this.selected);
    else return;
    e.preventDefault();
    if (next >= 0) this.on.select(next);
  }

  destroy() { this.list.destroy(); }
}

// shownRows answers the rows of the tree of spans (a TraceModel's) with
// the spans whose index is in collapsed folded: rows, the pos of each
// row's span, and rowOfPos, each span's row (-1: folded away).
export function shownRows(spans, collapsed) {
  const rows = [];
  const rowOfPos = new Int32Array(spans.length).fill(-1);
  for (let p = 0; p < spans.length;) {
    rowOfPos[p] = rows.length;
    rows.push(p);
    p = collapsed.has(spans[p].index) ? spans[p].end : p + 1;
  }
  return { rows, rowOfPos };
}
