// The flame graph's frames: widths, pruning, zoom paths (no canvas).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { childSum, depth, fmtAmount, frameTip, frames, zoomPath } from '../static/js/flame.js';

const fn = (name, value, children = [], extra = {}) => Object.assign({ name, value, self: value - children.reduce((a, c) => a + c.value, 0), children }, extra);

// root 100: main 90 (parse 30, work 60 (tiny 0.001)), gc 10.
const tree = () => fn('root', 100, [
  fn('main', 90, [fn('parse', 30), fn('work', 60, [fn('tiny', 0.001)])]),
  fn('gc', 10, [], { errors: 2 }),
]);

const summary = (fs) => fs.map((f) => [f.node.name, f.d, +f.x.toFixed(6), +f.w.toFixed(6), f.ancestor]);

test('frames: each as wide as its share, depth first', () => {
  assert.deepEqual(summary(frames([tree()], 1000)), [
    ['root', 0, 0, 1000, false],
    ['main', 1, 0, 900, false],
    ['parse', 2, 0, 300, false],
    ['work', 2, 300, 600, false],
    ['gc', 1, 900, 100, false],
  ], 'tiny (0.006 px) is left out');
});

test('frames carry their path from the root', () => {
  const f = frames([tree()], 1000).find((x) => x.node.name === 'work');
  assert.deepEqual(f.path.map((n) => n.name), ['root', 'main', 'work']);
});

test('frames zoomed: ancestors full width, the zoomed frame fills the width', () => {
  const root = tree();
  const fs = frames(zoomPath(root, ['main', 'work']), 600);
  assert.deepEqual(summary(fs), [
    ['root', 0, 0, 600, true],
    ['main', 1, 0, 600, true],
    ['work', 2, 0, 600, false],
  ], 'tiny (0.00001 px) is left out');
  // Wide enough, the tiny frame shows.
  assert.equal(frames(zoomPath(root, ['main', 'work']), 1e6).at(-1).node.name, 'tiny');
});

test('frames: parallel children wider than their parent share its width', () => {
  const root = fn('root', 10, [fn('a', 10), fn('b', 10)]);
  assert.deepEqual(summary(frames([root], 100)), [['root', 0, 0, 100, false], ['a', 1, 0, 50, false], ['b', 1, 50, 50, false]]);
  assert.equal(childSum(root), 20);
});

test('frames of an empty tree', () => {
  assert.deepEqual(summary(frames([fn('root', 0)], 100)), [['root', 0, 0, 100, false]]);
  assert.deepEqual(frames([fn('root', 0)], 0.4), []);
});

test('zoomPath follows names as far as the tree has them', () => {
  const root = tree();
  assert.deepEqual(zoomPath(root, ['main', 'parse']).map((n) => n.name), ['root', 'main', 'parse']);
  assert.deepEqual(zoomPath(root, ['main', 'nope', 'parse']).map((n) => n.name), ['root', 'main']);
  assert.deepEqual(zoomPath(root, []).map((n) => n.name), ['root']);
});

test('depth counts levels, however deep', () => {
  assert.equal(depth(tree()), 4);
  assert.equal(depth(fn('leaf', 1)), 1);
  let deep = fn('n', 1);
  for (let i = 0; i < 100000; i++) deep = fn('n', 1, [deep]);
  assert.equal(depth(deep), 100001);
});

test('frameTip: value, share and self in the unit', () => {
  const root = tree();
  assert.equal(frameTip(root.children[0], root.value, 'ns'), 'main — 90ns (90.0 %), self 0ns');
  assert.equal(frameTip(root.children[1], root.value, 'samples'), 'gc — 10 samples (10.0 %), self 10 samples, 2 errors');
  assert.equal(frameTip(fn('x', 5, [], { calls: 1200 }), 0, 'ns'), 'x — 5ns (500.0 %), self 5ns, 1,200 calls');
  assert.equal(frameTip(fn('byte[]', 3 * 1024 * 1024), 4 * 1024 * 1024, 'bytes'), 'byte[] — 3.0 MiB (75.0 %), self 3.0 MiB');
});

test('fmtAmount: durations, bytes, counts', () => {
  assert.equal(fmtAmount(1500, 'bytes'), '1.5 KiB');
  assert.equal(fmtAmount(12, 'throws'), '12 throws');
  assert.equal(fmtAmount(2e9, 'ns'), fmtAmount(2e9, 'ns'));
  assert.ok(fmtAmount(2e9, 'ns').includes('2'));
});
