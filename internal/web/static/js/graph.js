// graph.js: a layered (Sugiyama-style) layout of a directed graph, drawn
// left to right as SVG with pan, zoom and highlighting.
//
//   layout(nodes, edges, opts) → {nodes, edges, width, height}
//     nodes: [{id, w, h}]; edges: [{from, to}] (self loops are ignored).
//     Pure: no DOM. Steps: break cycles (reverse DFS back edges), longest
//     path layering, dummy nodes on long edges, barycentre ordering (the
//     order with the fewest crossings wins), then vertical positions that
//     pull each node towards its neighbours without overlaps.
//   firstView(width, height, W, H) → {k, tx, ty, scroll, w, h}
//     Pure: where a drawing of width × height first goes in a W × H box.
//   drawGraph(el, graph, opts) → {fit, zoom(f), select(id), destroy}
//     graph: {nodes: [{id, lines: [main, sub, stats], title, fill,
//     stroke, entry}], edges: [{from, to, label: [l1, l2], title, data}]}.

const SVG = 'http://www.w3.org/2000/svg';

// Layout ----------------------------------------------------------------

/** @typedef {{id: string, w: number, h: number}} SizedNode */
/** @typedef {[number, number]} Point */

/**
 * A node placed: x and y its top left corner, layer its column.
 * @typedef {SizedNode & {layer: number, x: number, y: number}} PlacedNode
 */

/**
 * An edge routed: k its index in the edges given, points from its
 * source's side to its target's, gap the segment where its label goes.
 * @typedef {object} RoutedEdge
 * @property {number} k
 * @property {string} from
 * @property {string} to
 * @property {boolean} reversed it points against the layers (a cycle's back edge)
 * @property {Point[]} points
 * @property {{a: Point, b: Point}} gap
 */

/**
 * @typedef {object} GraphLayout
 * @property {PlacedNode[]} nodes
 * @property {RoutedEdge[]} edges
 * @property {number} width
 * @property {number} height
 * @property {number} layers
 */

/**
 * @typedef {object} LayoutOptions
 * @property {string} [root] the node to start breaking cycles from
 * @property {number} [gapX] between columns
 * @property {number} [gapY] between nodes
 * @property {number} [sweeps] ordering iterations
 * @property {number} [maxSize] nodes and dummy nodes beyond which it refuses
 */

// layout places nodes in columns (layers) with edges routed through
// dummy points. opts: gapX (between columns), gapY (between nodes),
// sweeps (ordering iterations).
/**
 * @param {SizedNode[]} nodes
 * @param {{from: string, to: string}[]} edges
 * @param {LayoutOptions} [opts]
 * @returns {GraphLayout}
 */
export function layout(nodes, edges, opts = {}) {
  const gapX = opts.gapX ?? 120, gapY = opts.gapY ?? 18, sweeps = opts.sweeps ?? 24;
  const index = new Map(nodes.map((n, i) => [n.id, i]));
  /** @type {{from: string, to: string, k: number}[]} */
  const real = [];
  edges.forEach((e, k) => { if (e.from !== e.to && index.has(e.from) && index.has(e.to)) real.push({ from: e.from, to: e.to, k }); });
  const dir = breakCycles(nodes.length, real.map((e) => [index.get(e.from), index.get(e.to)]), index.get(opts.root));
  const layerOf = longestPath(nodes.length, dir);
  // Long edges cost a dummy node per layer they cross: past a budget
  // the graph is too big to draw legibly (and quickly).
  let dummies = 0;
  for (const e of dir) dummies += layerOf[e.to] - layerOf[e.from] - 1;
  if (dummies + nodes.length > (opts.maxSize ?? 150000)) {
    throw new Error(`the graph is too big to draw: ${nodes.length} nodes, ${real.length} edges over ${maxOf(layerOf, 0) + 1} layers; narrow the filters or choose a coarser graph`);
  }
  const g = withDummies(nodes, dir, layerOf);
  // Big graphs get fewer ordering sweeps: each costs a pass over every
  // segment.
  const layers = order(g, g.n > 20000 ? Math.min(sweeps, 6) : sweeps);
  const ys = verticals(g, layers, gapY);
  const cols = columns(g, layers, gapX), xs = cols.x;
  const out = nodes.map((n, i) => ({ id: n.id, w: n.w, h: n.h, layer: layerOf[i], x: xs[i] - n.w / 2, y: ys[i] - n.h / 2 }));
  const routed = real.map((e, k) => {
    const r = route(g, dir[k], k, cols, ys);
    return { k: e.k, from: e.from, to: e.to, reversed: dir[k].reversed, points: r.pts, gap: r.gap };
  });
  let width = 0, height = 0;
  for (let i = 0; i < g.n; i++) {
    width = Math.max(width, xs[i] + g.w[i] / 2);
    height = Math.max(height, ys[i] + g.h[i] / 2);
  }
  return { nodes: out, edges: routed, width, height, layers: layers.length };
}

// maxOf is the largest of xs and at least: Math.max(...xs) overflows the
// stack on big arrays.
/**
 * @param {Iterable<number>} xs
 * @param {number} least
 * @returns {number}
 */
function maxOf(xs, least) {
  let m = least;
  for (const x of xs) if (x > m) m = x;
  return m;
}

// breakCycles answers the edges as [from, to] pairs pointing forward: a
// depth-first search (from root first) reverses the edges that close a
// cycle.
function breakCycles(n, pairs, root) {
  const out = [];
  for (let i = 0; i < n; i++) out[i] = [];
  pairs.forEach(([a, b], k) => out[a].push(k));
  const state = new Uint8Array(n); // 0 new, 1 on the stack, 2 done
  const back = new Set();
  const visit = (start) => {
    // Iterative: graphs of thousands of nodes would overflow recursion.
    const stack = [[start, 0]];
    state[start] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [v, i] = top;
      if (i >= out[v].length) { state[v] = 2; stack.pop(); continue; }
      top[1]++;
      const k = out[v][i], w = pairs[k][1];
      if (state[w] === 1) back.add(k);
      else if (state[w] === 0) { state[w] = 1; stack.push([w, 0]); }
    }
  };
  if (root !== undefined) visit(root);
  for (let v = 0; v < n; v++) if (!state[v]) visit(v);
  return pairs.map(([a, b], k) => (back.has(k) ? { from: b, to: a, reversed: true } : { from: a, to: b, reversed: false }));
}

// longestPath layers nodes: sources in layer 0, every other node one
// right of its furthest predecessor.
function longestPath(n, dir) {
  const indeg = new Int32Array(n), succ = [];
  for (let i = 0; i < n; i++) succ[i] = [];
  for (const e of dir) { succ[e.from].push(e.to); indeg[e.to]++; }
  const layer = new Int32Array(n);
  const queue = [];
  for (let i = 0; i < n; i++) if (!indeg[i]) queue.push(i);
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q];
    for (const w of succ[v]) {
      layer[w] = Math.max(layer[w], layer[v] + 1);
      if (--indeg[w] === 0) queue.push(w);
    }
  }
  return layer;
}

// withDummies answers the layout graph: the real nodes, then a dummy
// node per layer an edge crosses; segments join adjacent layers only.
// chain[k] lists edge k's nodes from its forward start to its end.
function withDummies(nodes, dir, layerOf) {
  const g = { n: nodes.length, layer: Array.from(layerOf), w: nodes.map((x) => x.w), h: nodes.map((x) => x.h), dummy: nodes.map(() => false), pred: [], succ: [], chain: [] };
  for (let i = 0; i < g.n; i++) { g.pred[i] = []; g.succ[i] = []; }
  dir.forEach((e, k) => {
    const chain = [e.from];
    for (let l = g.layer[e.from] + 1; l < g.layer[e.to]; l++) {
      const d = g.n++;
      g.layer[d] = l; g.w[d] = 0; g.h[d] = 0; g.dummy[d] = true; g.pred[d] = []; g.succ[d] = [];
      chain.push(d);
    }
    chain.push(e.to);
    for (let i = 1; i < chain.length; i++) { g.succ[chain[i - 1]].push(chain[i]); g.pred[chain[i]].push(chain[i - 1]); }
    g.chain[k] = chain;
  });
  return g;
}

// order answers the nodes of each layer, top to bottom: a depth-first
// start, then barycentre sweeps down and up, keeping the order with the
// fewest crossings.
function order(g, sweeps) {
  const nl = maxOf(g.layer, 0) + 1;
  const layers = Array.from({ length: nl }, () => []);
  const seen = new Uint8Array(g.n);
  const dfs = (s) => {
    const stack = [s];
    while (stack.length) {
      const v = stack.pop();
      if (seen[v]) continue;
      seen[v] = 1;
      layers[g.layer[v]].push(v);
      for (let i = g.succ[v].length - 1; i >= 0; i--) if (!seen[g.succ[v][i]]) stack.push(g.succ[v][i]);
    }
  };
  for (let v = 0; v < g.n; v++) if (!seen[v] && g.pred[v].length === 0) dfs(v);
  for (let v = 0; v < g.n; v++) if (!seen[v]) dfs(v);
  const pos = new Float64Array(g.n);
  const number = () => { for (const l of layers) l.forEach((v, i) => { pos[v] = i; }); };
  number();
  let best = layers.map((l) => l.slice()), bestX = crossings(g, layers, pos);
  for (let s = 0; s < sweeps && bestX > 0; s++) {
    const down = s % 2 === 0;
    for (let li = down ? 1 : nl - 2; down ? li < nl : li >= 0; li += down ? 1 : -1) {
      const l = layers[li];
      const bary = new Map();
      for (const v of l) {
        const nb = down ? g.pred[v] : g.succ[v];
        bary.set(v, nb.length ? nb.reduce((a, w) => a + pos[w], 0) / nb.length : pos[v]);
      }
      // Stable: ties keep their order, so sweeps converge.
      l.sort((a, b) => bary.get(a) - bary.get(b) || pos[a] - pos[b]);
      l.forEach((v, i) => { pos[v] = i; });
    }
    const x = crossings(g, layers, pos);
    if (x < bestX) { bestX = x; best = layers.map((l) => l.slice()); }
  }
  best.forEach((l) => l.forEach((v, i) => { pos[v] = i; }));
  return best;
}

// crossings counts edge crossings between adjacent layers: inversions
// of the segments' lower ends sorted by their upper ends (a Fenwick
// tree).
function crossings(g, layers, pos) {
  let total = 0;
  for (let li = 0; li + 1 < layers.length; li++) {
    const segs = [];
    for (const v of layers[li]) for (const w of g.succ[v]) segs.push([pos[v], pos[w]]);
    segs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const size = layers[li + 1].length + 1, tree = new Int32Array(size + 1);
    let seen = 0;
    for (const [, b] of segs) {
      // Segments seen so far whose lower end is below b cross this one.
      let le = 0;
      for (let i = b + 1; i > 0; i -= i & -i) le += tree[i];
      total += seen - le;
      for (let i = b + 1; i <= size; i += i & -i) tree[i]++;
      seen++;
    }
  }
  return total;
}

// verticals answers each node's centre y: nodes start stacked, then
// each layer moves towards the mean of its neighbours (left, right, both)
// as far as the order and gaps allow (isotonic regression).
function verticals(g, layers, gapY) {
  const y = new Float64Array(g.n);
  const sep = (a, b) => (g.h[a] + g.h[b]) / 2 + (g.dummy[a] && g.dummy[b] ? gapY / 3 : g.dummy[a] || g.dummy[b] ? gapY / 1.5 : gapY);
  for (const l of layers) {
    let at = 0;
    l.forEach((v, i) => { at += i ? sep(l[i - 1], v) : g.h[v] / 2; y[v] = at; });
  }
  /** @type {['pred' | 'succ' | 'both', number][]} */
  const passes = [['pred', 1], ['succ', -1], ['pred', 1], ['succ', -1], ['both', 1], ['both', -1], ['both', 1]];
  for (const [which, step] of passes) {
    const nl = layers.length;
    for (let li = step > 0 ? 0 : nl - 1; li >= 0 && li < nl; li += step) {
      const l = layers[li];
      if (!l.length) continue;
      const want = l.map((v) => {
        const nb = which === 'pred' ? g.pred[v] : which === 'succ' ? g.succ[v] : g.pred[v].concat(g.succ[v]);
        return nb.length ? nb.reduce((a, w) => a + y[w], 0) / nb.length : y[v];
      });
      place(l, want, l.map((v, i) => (i ? sep(l[i - 1], v) : 0))).forEach((p, i) => { y[l[i]] = p; });
    }
  }
  let top = Infinity;
  for (let v = 0; v < g.n; v++) top = Math.min(top, y[v] - g.h[v] / 2);
  for (let v = 0; v < g.n; v++) y[v] -= top;
  return y;
}

// place answers positions as close as possible (least squares) to want,
// in order, each at least gaps[i] below the one before: pool adjacent
// violators on want minus the cumulative gaps.
/**
 * @param {unknown[]} l
 * @param {number[]} want
 * @param {number[]} gaps
 * @returns {number[]}
 */
function place(l, want, gaps) {
  const off = [];
  let acc = 0;
  for (let i = 0; i < l.length; i++) { acc += gaps[i]; off.push(acc); }
  const blocks = []; // [mean, count]
  for (let i = 0; i < l.length; i++) {
    blocks.push([want[i] - off[i], 1]);
    while (blocks.length > 1 && blocks[blocks.length - 2][0] > blocks[blocks.length - 1][0]) {
      const [m2, c2] = blocks.pop(), [m1, c1] = blocks.pop();
      blocks.push([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2]);
    }
  }
  const out = [];
  for (const [m, c] of blocks) for (let j = 0; j < c; j++) out.push(m + off[out.length]);
  return out;
}

// columns answers each node's centre x and each layer's left and right
// edges: a column per layer as wide as its widest node.
function columns(g, layers, gapX) {
  const x = new Float64Array(g.n), left = [], right = [];
  let at = 0;
  for (const l of layers) {
    const w = maxOf(l.map((v) => g.w[v]), 0);
    for (const v of l) x[v] = at + w / 2;
    left.push(at); right.push(at + w);
    at += w + gapX;
  }
  return { x, left, right };
}

// route answers the points of edge k: out of its source's right side to
// its column's edge, across each gap and through each column it passes
// (at its dummy's height), into its target's left side; reversed edges
// the other way round, so they still end at their target. gap is the
// segment over the gap next to the caller, where its label goes.
function route(g, e, k, cols, ys) {
  const chain = g.chain[k];
  const { x, left, right } = cols;
  const pts = [];
  const last = chain.length - 1;
  chain.forEach((v, i) => {
    const L = g.layer[v], y = ys[v];
    if (i > 0) pts.push([left[L], y]);
    if (i === last) { pts.push([x[v] - g.w[v] / 2, y]); return; }
    if (i === 0) pts.push([x[v] + g.w[v] / 2, y]);
    pts.push([right[L], y]);
  });
  // Forward, the caller is the chain's start: its gap segment is the
  // second; reversed, the caller is the chain's end: the last but one.
  const gi = e.reversed ? pts.length - 3 : 1;
  const gap = { a: pts[gi], b: pts[gi + 1] };
  if (e.reversed) { pts.reverse(); [gap.a, gap.b] = [gap.b, gap.a]; }
  return { pts, gap };
}

// The first view ----------------------------------------------------------

// READABLE is the smallest scale of the first view: the text at the size
// the style sheet gives it (node names 12 px, labels 11 px); MARGIN the
// space around the drawing, LOOP_ROOM the room above it for self loops.
export const READABLE = 1, MAX_SCALE = 1.25, MARGIN = 24, LOOP_ROOM = 40;

/**
 * Where the first view puts a drawing: all of it in the box, centred, at a
 * scale from READABLE to MAX_SCALE; when it does not fit at READABLE, at
 * READABLE with the box scrolling over a canvas of w × h (the drawing and
 * its margins, at least the box): nothing is out of reach, nothing too
 * small to read.
 * @param {number} width the drawing's width (layout units)
 * @param {number} height its height
 * @param {number} W the box's width (px)
 * @param {number} H its height
 * @returns {{k: number, tx: number, ty: number, scroll: boolean, w: number, h: number}}
 */
export function firstView(width, height, W, H) {
  const m = MARGIN, fit = Math.min(MAX_SCALE, (W - 2 * m) / Math.max(1, width), (H - 2 * m) / Math.max(1, height + LOOP_ROOM));
  const k = Math.max(READABLE, fit);
  const cw = width * k + 2 * m, ch = (height + LOOP_ROOM) * k + 2 * m;
  const tx = Math.max(m, (W - width * k) / 2), ty = Math.max(m, (H - (height + LOOP_ROOM) * k) / 2) + (LOOP_ROOM / 2) * k;
  const scroll = fit < READABLE;
  return { k, tx, ty, scroll, w: scroll ? Math.ceil(Math.max(W, cw)) : W, h: scroll ? Math.ceil(Math.max(H, ch)) : H };
}

// Drawing ---------------------------------------------------------------

const FONT_MAIN = '600 12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const FONT_SUB = '11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const PAD = 8, LINE = 15;

let measurer;
function textWidth(s, font) {
  if (!measurer) measurer = document.createElement('canvas').getContext('2d');
  measurer.font = font;
  return measurer.measureText(s).width;
}

function el(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  for (const c of children) if (c) e.append(c);
  return e;
}

// pathOf draws points as cubic curves with horizontal tangents.
function pathOf(pts) {
  let d = `M${pts[0][0].toFixed(1)},${pts[0][1].toFixed(1)}`;
  for (let i = 1; i < pts.length; i++) {
    const [x0, y0] = pts[i - 1], [x1, y1] = pts[i];
    const dx = (x1 - x0) / 2;
    d += ` C${(x0 + dx).toFixed(1)},${y0.toFixed(1)} ${(x1 - dx).toFixed(1)},${y1.toFixed(1)} ${x1.toFixed(1)},${y1.toFixed(1)}`;
  }
  return d;
}

// drawGraph draws graph into el (emptied) and answers its controls.
// opts.onSelect(node | null) is told about clicks on nodes.
export function drawGraph(host, graph, opts = {}) {
  const sizes = graph.nodes.map((n) => {
    const widths = n.lines.map((s, i) => textWidth(s || '', i === 0 ? FONT_MAIN : FONT_SUB));
    return { id: n.id, w: Math.ceil(Math.max(40, ...widths)) + 2 * PAD, h: n.lines.length * LINE + 2 * PAD - 4 };
  });
  const labelSize = (lines) => lines && lines.length ? { w: Math.ceil(Math.max(...lines.map((s, i) => textWidth(s, i ? FONT_SUB : FONT_MAIN)))) + 8, h: lines.length * 13 + 3 } : null;
  const labels = graph.edges.map((e) => labelSize(e.label));
  // Labels go into the gaps between the columns: as wide as the widest.
  const gapX = Math.min(260, maxOf(labels.map((l) => (l ? l.w + 36 : 0)), 70));
  const lay = layout(sizes, graph.edges, { root: opts.root, gapX });
  const byId = new Map(lay.nodes.map((n) => [n.id, n]));
  const routed = new Map(lay.edges.map((r) => [r.k, r]));
  const svg = el('svg', { class: 'graph', role: 'img', 'aria-label': opts.label || 'graph' });
  const defs = el('defs', null,
    el('marker', { id: 'gr-arrow', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '8', markerHeight: '8', orient: 'auto-start-reverse' },
      el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' })),
    el('marker', { id: 'gr-arrow-hl', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '8', markerHeight: '8', orient: 'auto-start-reverse' },
      el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow hl' })));
  const view = el('g', { class: 'viewport' });
  const edgeLayer = el('g', { class: 'edges' }), labelLayer = el('g', { class: 'edge-labels' }), nodeLayer = el('g', { class: 'nodes' });
  view.append(edgeLayer, nodeLayer, labelLayer);
  svg.append(defs, view);

  // Where labels go: self loops above their node; the others in the gap
  // next to their caller, moved apart where they would overlap.
  const spots = new Array(graph.edges.length).fill(null), gaps = new Map();
  graph.edges.forEach((e, k) => {
    if (!labels[k]) return;
    if (e.from === e.to) {
      const n = byId.get(e.from);
      if (n) spots[k] = { x: n.x + n.w / 2, y: n.y - 34 - labels[k].h / 2 };
      return;
    }
    const r = routed.get(k);
    if (!r) return;
    const x = (r.gap.a[0] + r.gap.b[0]) / 2, key = Math.round(x);
    if (!gaps.has(key)) gaps.set(key, []);
    gaps.get(key).push({ k, x, y: (r.gap.a[1] + r.gap.b[1]) / 2 });
  });
  for (const list of gaps.values()) {
    list.sort((a, b) => a.y - b.y);
    const ys = place(list, list.map((s) => s.y), list.map((s, i) => (i ? (labels[list[i - 1].k].h + labels[s.k].h) / 2 + 3 : 0)));
    list.forEach((s, i) => { spots[s.k] = { x: s.x, y: ys[i] }; });
  }

  const edgeEls = [], touching = new Map(); // node id → [edge index]
  const touch = (id, k) => { if (!touching.has(id)) touching.set(id, []); touching.get(id).push(k); };
  graph.edges.forEach((e, k) => {
    const g = el('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to });
    for (const [key, v] of Object.entries(e.data || {})) g.setAttribute('data-' + key, v);
    if (e.title) g.append(el('title', null, document.createTextNode(e.title)));
    if (e.from === e.to) {
      // A self call: a loop over the node's top edge.
      const n = byId.get(e.from);
      if (n) {
        const x0 = n.x + n.w * 0.35, x1 = n.x + n.w * 0.65, y = n.y;
        g.append(el('path', { d: `M${x0},${y} C${x0 - 10},${y - 36} ${x1 + 10},${y - 36} ${x1},${y}`, class: 'edge-line', 'marker-end': 'url(#gr-arrow)' }));
      }
    } else {
      const r = routed.get(k);
      if (r) g.append(el('path', { d: pathOf(r.points), class: 'edge-line' + (r.reversed ? ' back' : ''), 'marker-end': 'url(#gr-arrow)' }));
    }
    const lab = spots[k] ? edgeLabel(e.label, labels[k], spots[k].x, spots[k].y) : null;
    if (lab) { lab.setAttribute('data-edge', k); labelLayer.append(lab); }
    edgeLayer.append(g);
    edgeEls.push({ g, lab });
    touch(e.from, k); if (e.to !== e.from) touch(e.to, k);
  });

  const nodeEls = new Map();
  for (const n of graph.nodes) {
    const p = byId.get(n.id);
    const g = el('g', { class: 'node' + (n.entry ? ' entry' : ''), 'data-id': n.id, transform: `translate(${p.x.toFixed(1)},${p.y.toFixed(1)})`, tabindex: '0' });
    g.append(el('title', null, document.createTextNode(n.title || n.lines.join('\n'))));
    g.append(el('rect', { width: p.w, height: p.h, rx: n.entry ? p.h / 2 : 5, fill: n.fill || '#eef2f7', stroke: n.stroke || '#8a94a6' }));
    n.lines.forEach((s, i) => {
      g.append(el('text', { x: p.w / 2, y: PAD + 11 + i * LINE, class: i === 0 ? 'main' : i === n.lines.length - 1 && n.lines.length > 1 && n.statsLast ? 'stats' : 'sub', 'text-anchor': 'middle' }, document.createTextNode(s || '')));
    });
    nodeLayer.append(g);
    nodeEls.set(n.id, g);
  }

  host.replaceChildren(svg);

  // Highlighting: a hovered or selected node lights its edges, the rest
  // fades.
  let selected = null;
  const highlight = (id) => {
    svg.classList.toggle('focus', !!id);
    for (const g of nodeEls.values()) g.classList.remove('hl', 'nb');
    for (const { g, lab } of edgeEls) { g.classList.remove('hl'); lab?.classList.remove('hl'); g.querySelector('.edge-line').setAttribute('marker-end', 'url(#gr-arrow)'); }
    if (!id) return;
    nodeEls.get(id)?.classList.add('hl');
    for (const k of touching.get(id) || []) {
      const { g, lab } = edgeEls[k];
      g.classList.add('hl'); lab?.classList.add('hl');
      g.querySelector('.edge-line').setAttribute('marker-end', 'url(#gr-arrow-hl)');
      // Raise it above the other edges and labels.
      g.parentNode.append(g); if (lab) lab.parentNode.append(lab);
      const e = graph.edges[k];
      nodeEls.get(e.from === id ? e.to : e.from)?.classList.add('nb');
    }
  };
  const nodeOf = (t) => t.closest && t.closest('g.node');
  svg.addEventListener('pointerover', (ev) => { const g = nodeOf(ev.target); if (g && !selected) highlight(g.dataset.id); });
  svg.addEventListener('pointerout', (ev) => { const g = nodeOf(ev.target); if (g && !selected && !g.contains(ev.relatedTarget)) highlight(null); });

  // Pan (drag the background or a node) and zoom (wheel, around the
  // pointer). When the drawing does not fit at a readable scale the box
  // scrolls (the svg is as big as the drawing): then a drag scrolls it.
  let tx = 0, ty = 0, k = 1, drag = null, scroll = false;
  const boxW = () => host.clientWidth || svg.clientWidth || 800, boxH = () => host.clientHeight || svg.clientHeight || 500;
  const apply = () => {
    view.setAttribute('transform', `translate(${tx.toFixed(1)},${ty.toFixed(1)}) scale(${k.toFixed(4)})`);
    if (scroll) {
      svg.setAttribute('width', String(Math.ceil(Math.max(boxW(), tx + lay.width * k + MARGIN))));
      svg.setAttribute('height', String(Math.ceil(Math.max(boxH(), ty + lay.height * k + MARGIN))));
    }
  };
  const setScroll = (on) => {
    scroll = on;
    svg.classList.toggle('scroll', on);
    host.classList.toggle('graph-scroll', on);
    if (!on) { svg.removeAttribute('width'); svg.removeAttribute('height'); }
  };
  // zoomAt zooms around cx, cy: a point of the box as the user sees it.
  const zoomAt = (f, cx, cy) => {
    const nk = Math.min(4, Math.max(0.05, k * f));
    if (scroll) {
      // The drawing's point under the pointer stays there: the margins
      // stay, the box scrolls.
      const px = (host.scrollLeft + cx - tx) / k, py = (host.scrollTop + cy - ty) / k;
      ty = MARGIN + (LOOP_ROOM / 2) * nk; tx = MARGIN; k = nk;
      apply();
      host.scrollLeft = px * k + tx - cx; host.scrollTop = py * k + ty - cy;
      return;
    }
    tx = cx - (cx - tx) * (nk / k); ty = cy - (cy - ty) * (nk / k); k = nk;
    apply();
  };
  svg.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = host.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * (ev.deltaMode ? 0.05 : 0.0015)), ev.clientX - r.left - host.clientLeft, ev.clientY - r.top - host.clientTop);
  }, { passive: false });
  svg.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, tx, ty, sx: host.scrollLeft, sy: host.scrollTop, moved: false, id: ev.pointerId };
  });
  svg.addEventListener('pointermove', (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) { drag.moved = true; svg.setPointerCapture(drag.id); svg.classList.add('panning'); }
    if (scroll) { host.scrollLeft = drag.sx - dx; host.scrollTop = drag.sy - dy; return; }
    tx = drag.tx + dx; ty = drag.ty + dy; apply();
  });
  const endDrag = (ev) => {
    if (!drag) return;
    const moved = drag.moved;
    if (moved) svg.releasePointerCapture(drag.id);
    svg.classList.remove('panning');
    drag = null;
    if (moved || ev.type !== 'pointerup') return;
    const g = nodeOf(ev.target);
    select(g ? g.dataset.id : null);
  };
  svg.addEventListener('pointerup', endDrag);
  svg.addEventListener('pointercancel', endDrag);
  svg.addEventListener('keydown', (ev) => {
    const g = nodeOf(ev.target);
    if (g && (ev.key === 'Enter' || ev.key === ' ')) { ev.preventDefault(); select(g.dataset.id); }
    if (ev.key === 'Escape') select(null);
  });

  const select = (id) => {
    if (id && !nodeEls.has(id)) id = null;
    selected = id;
    for (const g of nodeEls.values()) g.classList.toggle('selected', g.dataset.id === id);
    highlight(id);
    if (opts.onSelect) opts.onSelect(id ? graph.nodes.find((n) => n.id === id) : null);
  };
  // fit shows all of the drawing in the box, however small.
  const fit = () => {
    setScroll(false);
    const W = boxW(), H = boxH();
    const m = MARGIN;
    k = Math.min(MAX_SCALE, Math.max(0.05, Math.min((W - 2 * m) / Math.max(1, lay.width), (H - 2 * m) / Math.max(1, lay.height + LOOP_ROOM))));
    tx = (W - lay.width * k) / 2; ty = Math.max(m, (H - lay.height * k) / 2) + (LOOP_ROOM / 2) * k;
    apply();
  };
  // The first view: all of it if it is readable so, else readable with
  // the box scrolling, its left end (the entry) in view; Fit shows all.
  const first = () => {
    const v = firstView(lay.width, lay.height, boxW(), boxH());
    setScroll(v.scroll);
    k = v.k; tx = v.tx; ty = v.ty;
    apply();
    if (v.scroll) {
      const root = byId.get(opts.root) || lay.nodes[0];
      host.scrollLeft = 0;
      host.scrollTop = Math.max(0, ty + (root.y + root.h / 2) * k - boxH() / 2);
    }
  };
  first();
  return {
    fit,
    // scrolls: the drawing is bigger than the box (it scrolls).
    get scrolls() { return scroll; },
    zoom: (f) => zoomAt(f, boxW() / 2, boxH() / 2),
    select,
    layout: lay,
    destroy: () => { host.classList.remove('graph-scroll'); host.replaceChildren(); },
  };
}

// edgeLabel is a label on a white box centred on x, y.
function edgeLabel(lines, size, x, y) {
  const top = y - size.h / 2;
  const g = el('g', { class: 'edge-label' });
  g.append(el('rect', { x: (x - size.w / 2).toFixed(1), y: top.toFixed(1), width: size.w, height: size.h, rx: 3 }));
  lines.forEach((s, i) => g.append(el('text', { x: x.toFixed(1), y: (top + 12 + i * 13).toFixed(1), 'text-anchor': 'middle', class: i ? 'sub' : 'main' }, document.createTextNode(s))));
  return g;
}
