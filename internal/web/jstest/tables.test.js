// The sortable tables' order and rows in view, the call tree's and the
// comparison's subtrees.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { rowWindow, sortRows } from '../static/js/ops-table.js';
import { subtrees } from '../static/js/compare.js';

const rows = () => [
  { op: 'b', n: 2, v: 'x' }, { op: 'a', n: 10, v: null }, { op: 'c', n: 1, v: 'y' },
];

test('sortRows: numbers by value, both ways', () => {
  assert.deepEqual(sortRows(rows(), { key: 'n' }, false).map((r) => r.n), [1, 2, 10]);
  assert.deepEqual(sortRows(rows(), { key: 'n' }, true).map((r) => r.n), [10, 2, 1]);
});

test('sortRows: text as text, nothing as empty', () => {
  assert.deepEqual(sortRows(rows(), { key: 'op' }, false).map((r) => r.op), ['a', 'b', 'c']);
  assert.deepEqual(sortRows(rows(), { key: 'v' }, false).map((r) => r.op), ['a', 'b', 'c']);
  assert.deepEqual(sortRows(rows(), { key: 'v' }, true).map((r) => r.op), ['c', 'b', 'a']);
});

test('sortRows: a column\'s value function is its sort key', () => {
  const byLen = { key: 'x', value: (r) => -r.n };
  assert.deepEqual(sortRows(rows(), byLen, false).map((r) => r.n), [10, 2, 1]);
});

test('sortRows sorts in place and keeps ties in order', () => {
  const rs = [{ k: 1, i: 0 }, { k: 0, i: 1 }, { k: 1, i: 2 }, { k: 0, i: 3 }];
  assert.equal(sortRows(rs, { key: 'k' }, false), rs);
  assert.deepEqual(rs.map((r) => r.i), [1, 3, 0, 2]);
});

test('rowWindow: the rows in view and 10 either side', () => {
  assert.deepEqual(rowWindow(0, 260, 1000), { first: 0, end: 20 });
  assert.deepEqual(rowWindow(26 * 100, 260, 1000), { first: 90, end: 120 });
  assert.deepEqual(rowWindow(26 * 995, 260, 1000), { first: 985, end: 1000 });
  assert.deepEqual(rowWindow(0, 600, 0), { first: 0, end: 0 });
});

test('subtrees: ends and where the changes are', () => {
  // 0 ─┬─ 1 ── 2 (changed)
  //    └─ 3 ── 4
  const nodes = [
    { parent: -1, status: 'same' }, { parent: 0, status: 'same' }, { parent: 1, status: 'changed' },
    { parent: 0, status: 'same' }, { parent: 3, status: 'same' },
  ];
  const { end, diff } = subtrees(nodes);
  assert.deepEqual([...end], [5, 3, 3, 5, 5]);
  assert.deepEqual([...diff], [1, 1, 1, 0, 0]);
  const added = subtrees([{ parent: -1, status: 'same' }, { parent: 0, status: 'added' }]);
  assert.deepEqual([...added.diff], [1, 1]);
  assert.deepEqual([...subtrees([]).end], []);
});
