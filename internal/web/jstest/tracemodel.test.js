// TraceModel: views of a trace merged, positions and pruned counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { TraceModel } from '../static/js/tracemodel.js';
import { shownRows } from '../static/js/calltree.js';

// The whole trace: 0 ─┬─ 1 ─┬─ 2 (error)
//                     │     └─ 3
//                     └─ 4 ─── 5 (error)
// A view's prunedErrors counts the errors it prunes in a span's subtree.
const span = (index, parent, descendants, prunedErrors, error = false) => ({ index, parent, descendants, prunedErrors, error });

// first is the whole-trace view: 3 and 5 pruned.
const first = () => ({ durationNs: 100, spans: [span(0, -1, 5, 1), span(1, 0, 2, 0), span(2, 1, 0, 0, true), span(4, 0, 1, 1)] });
// under4 is /view?root=4: the subtree of 4 with its ancestors.
const under4 = () => ({ spans: [span(0, -1, 5, 1), span(4, 0, 1, 0), span(5, 4, 0, 0, true)] });

const pick = (m, k) => m.spans.map((s) => s[k]);

test('a view in tree order: positions, levels, subtree ends', () => {
  const m = new TraceModel(first());
  assert.deepEqual(pick(m, 'index'), [0, 1, 2, 4]);
  assert.deepEqual(pick(m, 'pos'), [0, 1, 2, 3]);
  assert.deepEqual(pick(m, 'parentPos'), [-1, 0, 1, 0]);
  assert.deepEqual(pick(m, 'level'), [0, 1, 2, 1]);
  assert.deepEqual(pick(m, 'end'), [4, 3, 3, 4]);
  assert.equal(m.pos(4), 3);
  assert.equal(m.pos(5), -1);
  assert.ok(m.has(2));
  assert.ok(!m.has(3));
});

test('pruned counts come from each span\'s true totals', () => {
  const m = new TraceModel(first());
  assert.deepEqual(pick(m, 'pruned'), [2, 1, 0, 1]);
  assert.deepEqual(pick(m, 'prunedErrors'), [1, 0, 0, 1]);
  assert.deepEqual(pick(m, 'errDesc'), [2, 1, 0, 1]);
});

test('merging an expanded subtree adds its spans and recounts', () => {
  const m = new TraceModel(first());
  assert.equal(m.merge(under4()), 1);
  assert.deepEqual(pick(m, 'index'), [0, 1, 2, 4, 5]);
  assert.deepEqual(pick(m, 'parentPos'), [-1, 0, 1, 0, 3]);
  assert.deepEqual(pick(m, 'pruned'), [1, 1, 0, 0, 0]);
  assert.deepEqual(pick(m, 'prunedErrors'), [0, 0, 0, 0, 0]);
  assert.deepEqual(m.ancestors(m.pos(5)), [0, 3]);
  assert.deepEqual(m.ancestors(0), []);
  // The same view again adds nothing.
  assert.equal(m.merge(under4()), 0);
  assert.equal(m.spans.length, 5);
});

test('the first view stays the trace\'s totals', () => {
  const v = first();
  const m = new TraceModel(v);
  m.merge(under4());
  assert.equal(m.view, v);
});

test('shownRows folds collapsed subtrees', () => {
  const m = new TraceModel(first());
  m.merge(under4());
  let r = shownRows(m.spans, new Set());
  assert.deepEqual(r.rows, [0, 1, 2, 3, 4]);
  assert.deepEqual([...r.rowOfPos], [0, 1, 2, 3, 4]);
  r = shownRows(m.spans, new Set([1])); // by span index
  assert.deepEqual(r.rows, [0, 1, 3, 4]);
  assert.deepEqual([...r.rowOfPos], [0, 1, -1, 2, 3]);
  r = shownRows(m.spans, new Set([0]));
  assert.deepEqual(r.rows, [0]);
  assert.deepEqual([...r.rowOfPos], [0, -1, -1, -1, -1]);
});
