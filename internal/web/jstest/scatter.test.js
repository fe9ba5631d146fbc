// The scatter plot's scales, ticks and picking (no canvas).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { linearTicks, logTicks, nearest, niceCeil, scales, tickDur, timeLabel, timeTicks } from '../static/js/scatter.js';

// Tick labels are in local time: the tests pin it.
process.env.TZ = 'UTC';

const close = (a, b, msg) => assert.ok(Math.abs(a - b) < 1e-6, `${msg}: ${a} ≠ ${b}`);

test('logTicks: decades, with 2 and 5 in a short range', () => {
  assert.deepEqual(logTicks(0, 1.5), [1, 2, 5, 10, 20]);
  assert.deepEqual(logTicks(2, 6.2), [100, 1000, 10000, 100000, 1000000]);
});

test('niceCeil and linearTicks', () => {
  assert.equal(niceCeil(3), 5);
  assert.equal(niceCeil(10), 10);
  assert.equal(niceCeil(11), 20);
  close(niceCeil(0.07), 0.1, 'niceCeil(0.07)');
  assert.deepEqual(linearTicks(10), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(linearTicks(200), [0, 50, 100, 150, 200]);
});

test('tickDur drops trailing zeros', () => {
  assert.equal(tickDur(10e6), '10ms');
  assert.equal(tickDur(2.5e9), '2.5s');
  assert.equal(tickDur(1.25e6), '1.25ms');
  assert.equal(tickDur(950), '950ns');
});

test('scales: a log axis over the points, x and xInv inverse', () => {
  const t0 = Date.UTC(2024, 0, 2, 3, 4, 0) * 1e6;
  const sc = scales([{ t: t0, d: 1e6 }, { t: t0 + 60e9, d: 100e6 }], 640, true);
  // 3 % of the time range either side.
  close(sc.a, t0 / 1e6 - 1800, 'a');
  close(sc.b, t0 / 1e6 + 61800, 'b');
  assert.ok(sc.x(t0) > 64 && sc.x(t0 + 60e9) < 640 - 14, 'inside the margins');
  close(sc.xInv(sc.x(t0 + 30e9)) / 1e6, (t0 + 30e9) / 1e6, 'xInv(x(t))');
  assert.ok(sc.y(100e6) < sc.y(10e6) && sc.y(10e6) < sc.y(1e6), 'longer is higher');
  close(sc.y(1e6) - sc.y(10e6), sc.y(10e6) - sc.y(100e6), 'a decade is a decade');
  assert.deepEqual(sc.yTicks, [1e6, 1e7, 1e8]);
  assert.deepEqual(sc.xTicks.map((t) => t.label), ['03:04:00', '03:04:15', '03:04:30', '03:04:45', '03:05:00']);
});

test('scales: one instant gets a second of room; linear from zero', () => {
  const t0 = Date.UTC(2024, 0, 2) * 1e6;
  const sc = scales([{ t: t0, d: 0 }, { t: t0, d: 100 }], 640, false);
  close(sc.b - sc.a, 1000 * 1.06, 'range');
  close(sc.y(0), 240 - 30, 'zero on the bottom axis');
  assert.deepEqual(sc.yTicks, [0, 50, 100, 150, 200]);
});

test('timeTicks: days from midnight, a label per 110 px', () => {
  const ticks = timeTicks(Date.UTC(2024, 0, 1), Date.UTC(2024, 0, 8), 640);
  assert.deepEqual(ticks.map((t) => t.label), ['2024-01-02', '2024-01-04', '2024-01-06', '2024-01-08']);
  assert.ok(ticks.length <= Math.floor((640 - 64 - 14) / 110) + 1);
  for (const t of ticks) assert.equal(t.ms % 86400000, 0);
});

test('timeLabel shows what the step needs', () => {
  const ms = Date.UTC(2024, 0, 2, 3, 4, 5, 6);
  assert.equal(timeLabel(ms, 100, 1000), '04:05.006');
  assert.equal(timeLabel(ms, 1000, 60000), '03:04:05');
  assert.equal(timeLabel(ms, 60000, 3600000), '03:04');
  assert.equal(timeLabel(ms, 3600000, 3 * 86400000), '01-02 03:04');
  assert.equal(timeLabel(ms, 86400000, 30 * 86400000), '2024-01-02');
});

test('nearest: within 8 px, errors win ties', () => {
  const pts = [{}, { error: true }, {}];
  assert.equal(nearest(pts, [10, 20, 20], [10, 10, 10], 19, 10), 1);
  assert.equal(nearest(pts, [10, 20, 20], [10, 10, 10], 11, 10), 0);
  assert.equal(nearest(pts, [10, 20, 20], [10, 10, 10], 40, 40), -1);
  assert.equal(nearest([], [], [], 0, 0), -1);
});
