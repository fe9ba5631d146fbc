// tracemodel.js: the spans of a trace the page holds: a server-side view
// (/view) merged with the subtrees the user expanded (/view?root=) and
// the spans revealed to reach a search hit, an error or the slowest span
// (/view?reveal=). Every view is closed under ancestors, so their union
// is too, and the counts of what is pruned are recomputed from each
// span's true totals.

/**
 * A span of a trace view (the API's ViewSpan) and what TraceModel
 * computes for it (pos and below; a view's spans get them when the
 * model merges the view).
 * @typedef {object} Span
 * @property {number} index its place in the whole trace (tree order)
 * @property {number} parent its parent's index (-1: a root)
 * @property {number} depth its depth in the whole trace
 * @property {string} [spanId]
 * @property {string} [parentSpanId]
 * @property {string} operation
 * @property {string} [component]
 * @property {string} host
 * @property {string} service
 * @property {string} [process]
 * @property {string} [thread]
 * @property {number} [start] ns since the epoch (a double: rounded)
 * @property {number} offsetNs start less the trace's (exact)
 * @property {number} durationNs
 * @property {number} selfNs
 * @property {boolean} error
 * @property {string} [kind]
 * @property {string} [statusMessage]
 * @property {number} [children] in the whole trace
 * @property {number} descendants its whole subtree, in the whole trace
 * @property {number} pruned of its subtree, what the view (then the model) leaves out
 * @property {number} prunedErrors of those, the spans in error
 * @property {Object<string, unknown>} [attributes]
 * @property {number} pos its place in TraceModel.spans
 * @property {number} parentPos its parent's pos (-1: none)
 * @property {number} level its depth in what the model holds
 * @property {number} end the pos after its subtree
 * @property {number} shownDesc its descendants the model holds
 * @property {number} shownErrDesc of those, the spans in error
 * @property {number} shownErrBelow its descendants in error in one view
 * @property {number} errDesc its descendants in error in the whole trace
 */

/**
 * A trace view (/view, the API's TraceView).
 * @typedef {object} TraceView
 * @property {string} traceId
 * @property {number} start
 * @property {number} end
 * @property {number} durationNs
 * @property {string[]} hosts
 * @property {string[]} services
 * @property {number} spanCount the whole trace's
 * @property {number} errorCount the whole trace's
 * @property {string[]} broken
 * @property {number} [part]
 * @property {number} root the subtree shown (-1: the whole trace)
 * @property {number} shown
 * @property {number} pruned
 * @property {number} prunedErrors
 * @property {number} slowest the span with the most self time (-1: none)
 * @property {number[]} errorSpans
 * @property {Span[]} spans
 */

export class TraceModel {
  /** @param {TraceView} view */
  constructor(view) {
    this.view = view; // the first (whole-trace) view: the trace's totals
    /** @type {Span[]} */
    this.spans = [];
    /** @type {Map<number, Span>} */
    this.byIndex = new Map();
    this.merge(view);
  }

  // merge adds the spans of another view of the same trace.
  /**
   * @param {TraceView} view
   * @returns {number} the spans added
   */
  merge(view) {
    prepare(view.spans);
    let added = 0;
    for (const s of view.spans) {
      if (!this.byIndex.has(s.index)) { this.byIndex.set(s.index, s); added++; }
    }
    if (added || !this.spans.length) this.reindex();
    return added;
  }

  /** @param {number} index */
  has(index) { return this.byIndex.has(index); }
  /** @param {number} index @returns {number} */
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
  /** @param {number} pos @returns {number[]} */
  ancestors(pos) {
    const out = [];
    for (let p = this.spans[pos].parentPos; p >= 0; p = this.spans[p].parentPos) out.push(p);
    return out.reverse();
  }
}

// prepare computes, for the spans of one view, errDesc: the spans in
// error among each span's descendants in the whole trace (what it shows
// in error below it plus what it prunes in error).
/** @param {Span[]} spans */
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
