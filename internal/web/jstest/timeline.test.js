// The timeline's lanes and row packing, and its window and axis maths.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { clampWindow, clip, layout, niceStep, spanAt, tickLabel, tickOffsets, zoomWindow } from '../static/js/timeline.js';

const sp = (pos, parentPos, depth, offsetNs, durationNs, host, service, thread) => ({ pos, parentPos, depth, offsetNs, durationNs, host, service, thread });

// A root on h1's thread t1 with two calls in a row on it, and calls to
// service B on h2 (no thread): two at once (3 and 4) and one inside 3.
const trace = () => [
  sp(0, -1, 0, 0, 100, 'h1', 'A', 't1'),
  sp(1, 0, 1, 10, 30, 'h1', 'A', 't1'),
  sp(2, 0, 1, 50, 40, 'h1', 'A', 't1'),
  sp(3, 0, 1, 20, 50, 'h2', 'B'),
  sp(4, 0, 1, 30, 10, 'h2', 'B'),
  sp(5, 3, 2, 25, 5, 'h2', 'B'),
];

test('layout by thread: lanes in order of first span', () => {
  const l = layout(trace(), 'thread');
  assert.deepEqual(l.lanes.map((x) => [x.name, x.k, x.first, x.nrows]), [['h1 · A · t1', 0, 0, 2], ['h2 · B', 1, 2, 2]]);
});

test('layout packs calls in a row onto one row and calls at once onto rows of their own', () => {
  const l = layout(trace(), 'thread');
  assert.deepEqual([...l.rowOf], [0, 1, 1, 2, 3, 3]);
  assert.deepEqual(l.rows.map((r) => r.items), [[0], [1, 2], [3], [5, 4]]);
  assert.deepEqual(l.rows.map((r) => r.level), [0, 1, 0, 1]);
  assert.deepEqual(l.rows.map((r) => r.maxDur), [100, 40, 50, 10]);
  // Each row's spans are by start and do not overlap.
  const spans = trace();
  for (const r of l.rows) {
    for (let i = 1; i < r.items.length; i++) {
      const a = spans[r.items[i - 1]], b = spans[r.items[i]];
      assert.ok(a.offsetNs <= b.offsetNs);
      assert.ok(a.offsetNs + a.durationNs <= b.offsetNs);
    }
  }
});

test('layout puts a child below its parent in the same lane', () => {
  const l = layout(trace(), 'thread');
  const spans = trace();
  for (const s of spans) {
    if (s.parentPos < 0) continue;
    const same = l.rows[l.rowOf[s.pos]].lane === l.rows[l.rowOf[s.parentPos]].lane;
    if (same) assert.ok(l.rowOf[s.pos] > l.rowOf[s.parentPos], `span ${s.pos}`);
  }
});

test('layout links the calls that cross lanes', () => {
  assert.deepEqual(layout(trace(), 'thread').links, [3, 4]);
  assert.deepEqual(layout(trace(), 'host').links, [3, 4]);
  const one = trace().map((s) => Object.assign(s, { host: 'h', service: 'S', thread: '' }));
  assert.deepEqual(layout(one, 'thread').links, []);
});

test('layout by host, by service, and an unknown mode as by thread', () => {
  assert.deepEqual(layout(trace(), 'host').lanes.map((x) => x.name), ['h1', 'h2']);
  assert.deepEqual(layout(trace(), 'service').lanes.map((x) => x.name), ['A', 'B']);
  assert.deepEqual(layout(trace(), 'nonsense').lanes.map((x) => x.name), ['h1 · A · t1', 'h2 · B']);
  const noService = [sp(0, -1, 0, 0, 10, 'h9', '', '')];
  assert.deepEqual(layout(noService, 'service').lanes.map((x) => x.name), ['h9']);
});

test('layout of nothing', () => {
  const l = layout([], 'thread');
  assert.deepEqual(l.rows, []);
  assert.deepEqual(l.lanes, []);
  assert.deepEqual(l.links, []);
});

test('tickLabel: the unit of the view, the decimals of the step', () => {
  assert.equal(tickLabel(500e3, 500e3, 4e6), '0.5ms');
  assert.equal(tickLabel(1e6, 500e3, 4e6), '1.0ms');
  assert.equal(tickLabel(50.002e6, 2e3, 50.01e6), '50.002ms');
  assert.equal(tickLabel(2e9, 1e9, 3e9), '2s');
  assert.equal(tickLabel(0, 1, 10), '0ns');
  assert.equal(tickLabel(-1e-12, 1e6, 1e9), '0.000s', 'no minus zero');
});

test('niceStep rounds to 1, 2 or 5 times a power of ten', () => {
  const cases = [[1, 1], [1.4, 1], [1.6, 2], [3, 2], [4, 5], [7, 5], [8, 10], [1234, 1000], [0.3, 0.2], [0, 1], [-1, 1], [NaN, 1]];
  for (const [x, want] of cases) assert.ok(Math.abs(niceStep(x) - want) < 1e-12, `niceStep(${x}) = ${niceStep(x)}`);
});

test('zoomWindow keeps the time under the pointer in place', () => {
  assert.deepEqual(zoomWindow(0, 100, 0.5, 50, 0, 100), [25, 75]);
  assert.deepEqual(zoomWindow(0, 100, 0.5, 0, 0, 100), [0, 50]);
  const [a, b] = zoomWindow(10, 30, 0.25, 15, 0, 100);
  assert.equal((15 - a) / (b - a), (15 - 10) / (30 - 10));
});

test('zoomWindow stops at 1 ns and at the trace and 5 %', () => {
  assert.deepEqual(zoomWindow(0, 100, 10, 50, 0, 100), [-2.5, 102.5]);
  assert.deepEqual(zoomWindow(0, 100, 1e-9, 50, 0, 100), [49.5, 50.5]);
});

test('clampWindow moves the window back onto the trace', () => {
  assert.deepEqual(clampWindow(-20, 80, 0, 100), [-5, 95]);
  assert.deepEqual(clampWindow(30, 130, 0, 100), [5, 105]);
  assert.deepEqual(clampWindow(10, 20, 0, 100), [10, 20]);
});

test('tickOffsets are whole steps from the start', () => {
  assert.deepEqual(tickOffsets(0, 100, 0, 25), [0, 25, 50, 75, 100]);
  assert.deepEqual(tickOffsets(12, 60, 10, 20), [20, 40]);
  assert.deepEqual(tickOffsets(-7, 7, 0, 5), [-5, 0, 5]);
  // Far into a trace, no drift: each is k × step exactly.
  const offs = tickOffsets(1e9, 1e9 + 10 * 0.1, 0, 0.1);
  for (const o of offs) assert.equal(o, Math.round(o / 0.1) * 0.1);
});

test('spanAt finds the span at a time within the slop', () => {
  const spans = trace();
  assert.equal(spanAt(spans, [5, 4], 27, 0), 5);
  assert.equal(spanAt(spans, [5, 4], 32, 0), 4);
  assert.equal(spanAt(spans, [5, 4], 45, 0), -1);
  assert.equal(spanAt(spans, [5, 4], 41, 2), 4);
  assert.equal(spanAt(spans, [], 1, 1), -1);
});

test('clip shortens text to a width with an ellipsis', () => {
  let measured = 0;
  const g = { measureText: (s) => { measured++; return { width: s.length * 10 }; } };
  const cache = new Map();
  assert.equal(clip(g, 'abcdef', 100, cache), 'abcdef');
  assert.equal(clip(g, 'abcdefghij', 50, cache), 'abcd…');
  assert.equal(clip(g, 'abcdef', 8, cache), '', 'too narrow for anything');
  assert.equal(clip(g, '', 100, cache), '');
  const n = measured;
  assert.equal(clip(g, 'abcdefghij', 50, cache), 'abcd…');
  assert.equal(measured, n, 'widths come from the cache');
});
