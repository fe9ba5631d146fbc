// tracemodel.js: the spans of a trace the page holds: a server-side view
// (/view) merged with the subtrees the user expanded (/view?root=) and
// the spans revealed to reach a search hit, an error or the slowest span
// (/view?reveal=). Every view is closed under ancestors, so their union
// is too, and the counts of what is pruned are recomputed from each
// span's true totals.

export class TraceModel {
  constructor(view) {
    this.view = view; // the first (whole-trace) view: the trace's totals
    this.spans = [];
    this.byIndex = new Map();
    this.merge(view);
  }

  // merge adds the spans of another view of the same trace.
  merge(view) {
    prepare(view.spans);
    let added = 0;
    for (const s of view.spans) {
      if (!this.byIndex.has(s.index)) { this.byIndex.set(s.index, s); added++; }
    }
    if (added || !this.spans.length) this.reindex();
    return added;
  }

  has(index) { return this.byIndex.has(index); }
  pos(index) { const s = this.byIndex.get(index); return s ? s.pos : -1; }

  // reindex puts the spans in tree order (by index) and computes each
  // span's place: pos, parentPos, level (depth in what is shown), end
  // (the pos after its subtree) and the pruned counts.
  reindex() {
    const spans = [...this.byIndex.values()].sort((a, b) => a.index - b.index);
    spans.forEach((s, i) => { s.pos = i; });
    for (const s of spans) {
      const p = this.byIndex.get(s.parent);
      s.parentPos = p ? p.pos : -1;
      s.level = p ? p.level + 1 : 0;
      s.end = s.pos + 1;
      s.shownDesc = 0;
      s.shownErrDesc = 0;
    }
    for (let i = spans.length - 1; i >= 0; i--) {
      const s = spans[i];
      if (s.parentPos < 0) continue;
      const p = spans[s.parentPos];
      p.end = Math.max(p.end, s.end);
      p.shownDesc += 1 + s.shownDesc;
      p.shownErrDesc += s.shownErrDesc + (s.error ? 1 : 0);
    }
    for (const s of spans) {
      s.pruned = Math.max(0, s.descendants - s.shownDesc);
      s.prunedErrors = Math.max(0, s.errDesc - s.shownErrDesc);
    }
    this.spans = spans;
  }

  // ancestors answers the positions of span pos's ancestors, root first.
  ancestors(pos) {
    const out = [];
    for (let p = this.spans[pos].parentPos; p >= 0; p = this.spans[p].parentPos) out.push(p);
    return out.reverse();
  }
}

// prepare computes, for the spans of one view, errDesc: the spans in
// error among each span's descendants in the whole trace (what it shows
// in error below it plus what it prunes in error).
function prepare(spans) {
  const at = new Map();
  spans.forEach((s, i) => { at.set(s.index, i); s.shownErrBelow = 0; });
  // Children come after their parent: from the end, each span's shown
  // errors below it are complete before it is added to its parent's.
  for (let i = spans.length - 1; i >= 0; i--) {
    const s = spans[i];
    const p = at.get(s.parent);
    if (p !== undefined) spans[p].shownErrBelow += s.shownErrBelow + (s.error ? 1 : 0);
  }
  for (const s of spans) s.errDesc = s.prunedErrors + s.shownErrBelow;
}
