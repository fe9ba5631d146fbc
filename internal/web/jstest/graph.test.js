// The layered layout of graph.js (no DOM).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { layout, firstView, READABLE, MAX_SCALE, MARGIN, LOOP_ROOM } from '../static/js/graph.js';

const node = (id, w = 40, h = 20) => ({ id, w, h });
const edge = (from, to) => ({ from, to });

// A call graph: entry calls a and c; a and b call each other (a cycle);
// a calls c; c calls itself.
const calls = () => layout([node('entry'), node('a'), node('b'), node('c')],
  [edge('entry', 'a'), edge('a', 'b'), edge('b', 'a'), edge('a', 'c'), edge('entry', 'c'), edge('c', 'c')], { root: 'entry' });

const byId = (g) => new Map(g.nodes.map((n) => [n.id, n]));

test('layers by the longest path from the root, cycles broken', () => {
  const g = calls();
  const n = byId(g);
  assert.deepEqual(['entry', 'a', 'b', 'c'].map((id) => n.get(id).layer), [0, 1, 2, 2]);
  assert.equal(g.layers, 3);
});

test('columns go left to right by layer, gapX apart', () => {
  const g = layout([node('x', 40), node('y', 100), node('z', 60)], [edge('x', 'y'), edge('y', 'z')], { gapX: 50 });
  const n = byId(g);
  assert.equal(n.get('x').x, 0);
  assert.equal(n.get('y').x, 40 + 50);
  assert.equal(n.get('z').x, 40 + 50 + 100 + 50);
  assert.equal(g.width, 300);
});

test('nodes of a layer do not overlap', () => {
  const g = layout([node('r'), node('a', 40, 30), node('b', 40, 50), node('c'), node('d')],
    [edge('r', 'a'), edge('r', 'b'), edge('r', 'c'), edge('r', 'd')], { gapY: 18 });
  const col = g.nodes.filter((n) => n.layer === 1).sort((p, q) => p.y - q.y);
  assert.equal(col.length, 4);
  for (let i = 1; i < col.length; i++) assert.ok(col[i].y >= col[i - 1].y + col[i - 1].h + 18 - 1e-9, `${col[i - 1].id} and ${col[i].id}`);
  for (const n of g.nodes) {
    assert.ok(n.y >= -1e-9, 'nothing above the top');
    assert.ok(n.y + n.h <= g.height + 1e-9, 'nothing below the height');
  }
});

test('edges: self loops left out, back edges reversed, each ends at its target', () => {
  const g = calls();
  const n = byId(g);
  assert.deepEqual(g.edges.map((e) => e.k), [0, 1, 2, 3, 4], 'the self loop (k 5) is not routed');
  const back = g.edges.find((e) => e.k === 2);
  assert.equal(back.reversed, true);
  assert.ok(g.edges.filter((e) => e.k !== 2).every((e) => !e.reversed));
  for (const e of g.edges) {
    const from = n.get(e.from), to = n.get(e.to);
    const [x0, y0] = e.points[0], [x1, y1] = e.points[e.points.length - 1];
    assert.ok(y0 >= from.y && y0 <= from.y + from.h, `edge ${e.k} leaves its source`);
    assert.ok(y1 >= to.y && y1 <= to.y + to.h, `edge ${e.k} reaches its target`);
    assert.ok(x0 === from.x || x0 === from.x + from.w, `edge ${e.k} leaves a side of its source`);
    assert.ok(x1 === to.x || x1 === to.x + to.w, `edge ${e.k} reaches a side of its target`);
  }
});

test('a long edge passes the columns between', () => {
  const g = calls();
  const long = g.edges.find((e) => e.k === 4); // entry → c: layer 0 to 2
  assert.equal(long.points.length, 6);
  const short = g.edges.find((e) => e.k === 0);
  assert.equal(short.points.length, 4);
  // The label's gap is the segment after the caller's column.
  assert.deepEqual(long.gap.a, long.points[1]);
});

// crossings counts pairs of edges between adjacent layers that cross.
function crossings(g) {
  const n = byId(g);
  const segs = g.edges.map((e) => [n.get(e.from), n.get(e.to)]);
  let x = 0;
  for (let i = 0; i < segs.length; i++) {
    for (let j = i + 1; j < segs.length; j++) {
      const [a, b] = segs[i], [c, d] = segs[j];
      if (a.layer !== c.layer || b.layer !== d.layer || a === c || b === d) continue;
      if ((a.y - c.y) * (b.y - d.y) < 0) x++;
    }
  }
  return x;
}

test('ordering removes the crossings the first order has', () => {
  // Depth first, the order is s1, s2 over a, b, c: s2→a crosses s1→b.
  const nodes = [node('s1'), node('s2'), node('a'), node('b'), node('c')];
  const edges = [edge('s1', 'a'), edge('s2', 'a'), edge('s1', 'b'), edge('s2', 'c')];
  assert.equal(crossings(layout(nodes, edges, { sweeps: 0 })), 1);
  assert.equal(crossings(layout(nodes, edges)), 0);
});

test('a graph beyond the size budget is refused', () => {
  assert.throws(() => layout([node('a'), node('b'), node('c')], [edge('a', 'b'), edge('b', 'c'), edge('a', 'c')], { maxSize: 3 }), /too big to draw/);
});

test('edges to unknown nodes are ignored', () => {
  const g = layout([node('a'), node('b')], [edge('a', 'b'), edge('a', 'nowhere')]);
  assert.deepEqual(g.edges.map((e) => e.k), [0]);
});

test('the layout is deterministic', () => {
  assert.deepEqual(calls(), calls());
});

// The first view: the whole drawing when it fits at a readable scale
// (READABLE: the text at its style sheet's size), else readable and
// scrolling over a canvas that holds all of it.
test('first view: a drawing that fits is shown whole, centred, readable', () => {
  for (const [w, h, W, H] of [[600, 300, 1000, 600], [1000 - 2 * MARGIN, 200, 1000, 600], [300, 560 - 2 * MARGIN - LOOP_ROOM, 800, 560]]) {
    const v = firstView(w, h, W, H);
    assert.equal(v.scroll, false, `${w}×${h} in ${W}×${H}`);
    assert.ok(v.k >= READABLE && v.k <= MAX_SCALE, `scale ${v.k}`);
    assert.ok(v.tx >= MARGIN - 1e-9 && v.tx + w * v.k <= W - MARGIN + 1e-9, `x ${v.tx}…${v.tx + w * v.k} in ${W}`);
    assert.ok(v.ty >= 0 && v.ty + h * v.k <= H + 1e-9, `y ${v.ty}…${v.ty + h * v.k} in ${H}`);
    assert.ok(Math.abs(v.tx - (W - v.tx - w * v.k)) < 1e-6, 'centred');
    assert.deepEqual([v.w, v.h], [W, H]);
  }
});

test('first view: a drawing too big to read whole scrolls at a readable scale and is all on the canvas', () => {
  // The 7-node OpenTelemetry graph the issue saw clipped (1500 wide in a
  // box of 800), a tall one, a huge one.
  for (const [w, h, W, H] of [[1500, 240, 800, 558], [1500, 240, 1000, 617], [400, 2000, 1000, 600], [90000, 40000, 1000, 600]]) {
    const v = firstView(w, h, W, H);
    assert.equal(v.scroll, true, `${w}×${h} in ${W}×${H}`);
    assert.equal(v.k, READABLE);
    assert.ok(v.tx >= MARGIN - 1e-9 && v.ty >= MARGIN - 1e-9, 'the left and top ends are on the canvas');
    assert.ok(v.tx + w * v.k <= v.w - MARGIN + 1e-9, `the right end ${v.tx + w * v.k} on a canvas of ${v.w}`);
    assert.ok(v.ty + h * v.k <= v.h - MARGIN + 1e-9, `the bottom ${v.ty + h * v.k} on a canvas of ${v.h}`);
    assert.ok(v.w >= W && v.h >= H, 'the canvas fills the box');
  }
});

test('first view: never below the readable scale, whatever the box', () => {
  for (let W = 100; W <= 3000; W += 290) {
    for (let w = 10; w <= 5000; w += 730) {
      const v = firstView(w, 300, W, 600);
      assert.ok(v.k >= READABLE, `${w} in ${W}: scale ${v.k}`);
      assert.equal(v.scroll, (W - 2 * MARGIN) / w < READABLE || (600 - 2 * MARGIN) / (300 + LOOP_ROOM) < READABLE);
    }
  }
});
