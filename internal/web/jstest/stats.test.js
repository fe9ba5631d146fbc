// Trace statistics: self time with overlapping and overhanging children,
// groups, exact unix ns.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { offsets, selfTimes, serviceName, traceStats } from '../static/js/stats.js';

const ms = 1e6;
// s builds a span; start and end in ms from 0.
const s = (spanId, parentSpanId, service, operation, start, end, host = '') =>
  ({ spanId, parentSpanId, service, host, operation, start: start * ms, end: end * ms });

// root A 0─100 ─┬─ B q 10─40     ┐ overlap: the union is 10─60
//               ├─ B q 30─60     ┘
//               ├─ C r 90─120      clipped to 90─100
//               └─ C r 50─55       inside the union: adds nothing
// B q 10─40 ─── D s 20─35 ─── D s 21─22 (grandchildren count for their parents only)
const known = () => [
  s('a', null, 'A', 'GET /x', 0, 100),
  s('b1', 'a', 'B', 'q', 10, 40),
  s('d1', 'b1', 'D', 's', 20, 35),
  s('d2', 'd1', 'D', 's', 21, 22),
  s('b2', 'a', 'B', 'q', 30, 60),
  s('c1', 'a', 'C', 'r', 90, 120),
  s('c2', 'a', 'C', 'r', 50, 55),
];

test('self time: the duration less the union of the children clipped to the span', () => {
  const self = selfTimes(known());
  // a: 100 − (10─60 ∪ 90─100 = 60) = 40; b1: 30 − 15 = 15; d1: 15 − 1 = 14.
  assert.deepEqual(self.map((x) => x / ms), [40, 15, 14, 1, 30, 30, 5]);
});

test('self time: identical, nested and touching children; a child wholly outside; no children', () => {
  const spans = [
    s('p', null, 'A', 'p', 0, 10),
    s('k1', 'p', 'A', 'k', 2, 4), s('k2', 'p', 'A', 'k', 2, 4), // the same interval twice
    s('k3', 'p', 'A', 'k', 4, 6), // touches k1: 2─6 in all
    s('k4', 'p', 'A', 'k', 3, 5), // inside 2─6
    s('k5', 'p', 'A', 'k', 12, 15), // after the parent: clipped to nothing
    s('k6', 'p', 'A', 'k', -5, 1), // starts before the parent: 0─1
  ];
  assert.deepEqual(selfTimes(spans).map((x) => x / ms), [10 - 4 - 1, 2, 2, 2, 2, 3, 6]);
  // Children that cover the parent leave it no self time, never less.
  assert.deepEqual(selfTimes([s('p', null, 'A', 'p', 0, 1), s('c', 'p', 'A', 'c', -1, 2)]).map((x) => x / ms), [0, 3]);
});

test('a parent missing from the trace: its children are roots', () => {
  assert.deepEqual(selfTimes([s('x', 'gone', 'A', 'x', 0, 5), s('y', 'x', 'A', 'y', 1, 2)]).map((x) => x / ms), [4, 1]);
});

test('statistics per service and operation: count, total, avg, min, max, self time and its share', () => {
  const st = traceStats(known());
  assert.equal(st.durationNs, 120 * ms);
  assert.equal(st.spans, 7);
  const row = (svc, op) => st.rows.find((r) => r.service === svc && r.operation === op);
  assert.deepEqual(row('B', 'q'), {
    service: 'B', operation: 'q', count: 2, totalNs: 60 * ms, avgNs: 30 * ms, minNs: 30 * ms, maxNs: 30 * ms,
    selfTotalNs: 45 * ms, selfAvgNs: 22.5 * ms, selfMinNs: 15 * ms, selfMaxNs: 30 * ms, selfShare: 45 / 120,
  });
  assert.deepEqual(row('C', 'r'), {
    service: 'C', operation: 'r', count: 2, totalNs: 35 * ms, avgNs: 17.5 * ms, minNs: 5 * ms, maxNs: 30 * ms,
    selfTotalNs: 35 * ms, selfAvgNs: 17.5 * ms, selfMinNs: 5 * ms, selfMaxNs: 30 * ms, selfShare: 35 / 120,
  });
  assert.equal(row('A', 'GET /x').selfTotalNs, 40 * ms);
  assert.equal(row('D', 's').count, 2);
  // Largest total first.
  assert.deepEqual(st.rows.map((r) => r.service + ' ' + r.operation), ['A GET /x', 'B q', 'C r', 'D s']);
  // Siblings that overlap each keep their own self time (b1 and b2 both
  // hold 30─40): self times add up to more than the trace here.
  assert.equal(st.rows.reduce((a, r) => a + r.selfTotalNs, 0), 135 * ms);
});

test('grouped by service, by operation', () => {
  const spans = known();
  spans.push(s('e', 'b2', 'D', 'q', 31, 32));
  const bySvc = traceStats(spans, 'service');
  assert.deepEqual(bySvc.rows.map((r) => [r.service, r.operation, r.count]), [['A', '', 1], ['B', '', 2], ['C', '', 2], ['D', '', 3]]);
  const byOp = traceStats(spans, 'operation');
  const q = byOp.rows.find((r) => r.operation === 'q');
  assert.equal(q.service, '');
  assert.equal(q.count, 3);
  assert.equal(q.totalNs, 61 * ms);
});

test('unix ns beyond 2^53, as parseExact gives them, are exact', () => {
  const t0 = 1795500000123456789n;
  const at = (ns) => String(t0 + BigInt(ns));
  const spans = [
    { spanId: '1', parentSpanId: null, operation: 'root', service: 'S', start: at(0), end: at(1001) },
    { spanId: '2', parentSpanId: '1', operation: 'child', service: 'S', start: at(1), end: at(998) },
  ];
  assert.deepEqual(offsets(spans), { start: [0, 1], end: [1001, 998] });
  const st = traceStats(spans);
  assert.equal(st.durationNs, 1001);
  assert.deepEqual(st.rows.map((r) => [r.operation, r.totalNs, r.selfTotalNs]), [['root', 1001, 4], ['child', 997, 997]]);
});

test('a service is the span\'s service, else its host, else unknown_service', () => {
  assert.equal(serviceName({ spanId: '', parentSpanId: null, operation: '', service: 'svc', host: 'h', start: 0, end: 0 }), 'svc');
  assert.equal(serviceName({ spanId: '', parentSpanId: null, operation: '', service: '', host: 'h', start: 0, end: 0 }), 'h');
  assert.equal(serviceName({ spanId: '', parentSpanId: null, operation: '', start: 0, end: 0 }), 'unknown_service');
  assert.deepEqual(traceStats([]), { rows: [], durationNs: 0, spans: 0 });
});

test('a trace of 500,000 spans: no stack overflow, the root\'s children cover it', () => {
  const n = 500_000;
  const spans = [{ spanId: 'r', parentSpanId: null, operation: 'root', service: 'S', start: 0, end: 2 * n }];
  for (let i = 0; i < n; i++) spans.push({ spanId: 'c' + i, parentSpanId: 'r', operation: 'child', service: 'S', start: 2 * i, end: 2 * i + 1 });
  const st = traceStats(spans);
  assert.equal(st.durationNs, 2 * n);
  const root = st.rows.find((r) => r.operation === 'root');
  assert.equal(root.selfTotalNs, n);
  assert.equal(st.rows.find((r) => r.operation === 'child').count, n);
});
