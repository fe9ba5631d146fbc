// The GC timeline's layout: bars by pause at their time, the heap line.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { gcLayout } from '../static/js/gctimeline.js';

const pause = (time, pauseNs) => ({ time, gcId: time, name: 'G1New', cause: 'G1 Evacuation Pause', durationNs: pauseNs, pauseNs, longestNs: pauseNs });

test('gcLayout: bars grow from the axis by their pause, at their time', () => {
  const l = gcLayout([pause(1000, 10), pause(2000, 5), pause(3000, 20)], [], 303, 116, 16);
  assert.equal(l.t0, 1000);
  assert.equal(l.t1, 3000);
  assert.equal(l.maxPause, 20);
  assert.deepEqual(l.bars.map((b) => [b.x, b.y, b.h]), [[0, 50, 50], [150, 75, 25], [300, 0, 100]]);
  assert.equal(l.line, '');
});

test('gcLayout: the heap line in time order, the most used at the top', () => {
  const heap = [{ time: 3000, gcId: 2, usedBytes: 50, committedBytes: 100 }, { time: 1000, gcId: 1, usedBytes: 100, committedBytes: 100 }];
  const l = gcLayout([], heap, 103, 116, 16);
  assert.equal(l.line, 'M0,0 L100,50');
  assert.equal(l.maxHeap, 100);
});

test('gcLayout: nothing, and one collection', () => {
  const l = gcLayout([], [], 100, 100);
  assert.deepEqual(l.bars, []);
  const one = gcLayout([pause(5, 0)], [], 100, 100);
  assert.equal(one.bars.length, 1);
  assert.ok(one.bars[0].h >= 1, 'a pause of 0 still shows');
});
