// flame.js: a flame graph (root at the bottom) or icicle (root at the
// top) of a Flame tree from the API (a trace's, in ns, or a JFR
// profile's, in samples), drawn on a canvas. Frames narrower
// than half a pixel are not drawn nor descended into, so a tree of any
// size draws in bounded time. A click zooms into a frame (its ancestors
// stay as full-width bars to click back out).

import { color, fmtBytes, fmtDur, fmtNum, h, sized } from './lib.js';
import { clip } from './timeline.js';

const rowH = 18;

/**
 * A frame of a flame graph (the API's FlameNode): value in ns or
 * samples, self what is not in its children.
 * @typedef {object} FlameNode
 * @property {string} name
 * @property {number} value
 * @property {number} self
 * @property {number} [calls]
 * @property {number} [errors]
 * @property {FlameNode[]} children
 * @property {number} [childSum] kept by childSum
 */

/**
 * A frame as drawn: x and w in px, d its level (0: the root).
 * @typedef {object} Frame
 * @property {FlameNode} node
 * @property {FlameNode[]} path the root … node
 * @property {number} x
 * @property {number} w
 * @property {number} d
 * @property {boolean} ancestor one of the zoomed frame's ancestors
 */

export class Flame {
  // root: the API's FlameNode tree; unit: "ns" or "samples".
  /**
   * @param {{root: FlameNode, unit?: string, mode?: string, onZoom?: (names: string[]) => void}} opts
   */
  constructor({ root, unit = 'ns', mode = 'flame', onZoom }) {
    this.root = root;
    this.unit = unit;
    this.mode = mode;
    this.onZoom = onZoom;
    this.path = [root]; // root … the zoomed frame
    this.levels = depth(root);
    this.scrollY = 0;
    this.rects = [];
    this.widths = new Map(); // text widths in the frames' font
    this.canvas = h('canvas', { id: 'flame-canvas', class: 'flame-canvas' });
    this.tip = h('div', { class: 'tl-tip', hidden: true });
    this.crumbs = h('div', { class: 'flame-crumbs' });
    this.el = h('div', { class: 'flame-box' }, this.crumbs, h('div', { class: 'flame-plot' }, this.canvas, this.tip));
    this.frame = 0;
    this.listen();
    this.request();
  }

  setMode(mode) { this.mode = mode; this.scrollY = 0; this.request(); }

  // zoomTo zooms into the frame at path (names from the root's child).
  zoomTo(names) {
    this.path = zoomPath(this.root, names);
    this.request();
  }

  zoomed() { return this.path.slice(1).map((n) => n.name); }

  height() { return Math.min(640, Math.max(120, this.levels * rowH + 4)); }
  width() { return this.el.clientWidth || 800; }

  request() { if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); }); }

  listen() {
    this.canvas.addEventListener('click', (e) => {
      const r = this.hit(e.offsetX, e.offsetY);
      if (!r) return;
      const i = this.path.indexOf(r.node);
      if (i >= 0) this.path = this.path.slice(0, i + 1); // an ancestor: zoom out to it
      else this.path = r.path;
      this.request();
      if (this.onZoom) this.onZoom(this.zoomed());
    });
    this.canvas.addEventListener('wheel', (e) => {
      const max = Math.max(0, this.levels * rowH + 4 - this.height());
      if (!max) return;
      e.preventDefault();
      this.scrollY = Math.max(0, Math.min(max, this.scrollY + (this.mode === 'flame' ? -e.deltaY : e.deltaY)));
      this.request();
    }, { passive: false });
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    this.resize = new ResizeObserver(() => this.request());
    this.resize.observe(this.el);
  }

  destroy() { this.resize.disconnect(); if (this.frame) cancelAnimationFrame(this.frame); }

  hit(x, y) {
    for (const r of this.rects) if (x >= r.x && x <= r.x + r.w && y >= r.y && y <= r.y + rowH - 1) return r;
    return null;
  }

  hover(e) {
    const r = this.hit(e.offsetX, e.offsetY);
    if (!r) { this.tip.hidden = true; return; }
    this.tip.textContent = frameTip(r.node, this.root.value, this.unit);
    this.tip.hidden = false;
    this.tip.style.left = Math.min(e.offsetX + 12, this.width() - 320) + 'px';
    this.tip.style.top = (e.offsetY + 14) + 'px';
  }

  // yOf answers the canvas y of level d.
  yOf(d, H) { return this.mode === 'flame' ? H - (d + 1) * rowH + this.scrollY : d * rowH - this.scrollY; }

  draw() {
    const W = this.width(), H = this.height();
    const g = sized(this.canvas, W, H);
    g.fillStyle = '#fff';
    g.fillRect(0, 0, W, H);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    this.rects = [];
    for (const f of frames(this.path, W)) this.box(g, f.node, f.path, f.x, f.w, f.d, H, f.ancestor);
    this.drawCrumbs();
    this.canvas.dataset.frames = String(this.rects.length);
    this.canvas.dataset.mode = this.mode; // what the canvas shows, for tests and styles
  }

  box(g, node, path, x, w, d, H, ancestor) {
    const y = this.yOf(d, H);
    if (y + rowH < 0 || y > H) return;
    g.fillStyle = ancestor ? '#d1d5db' : color(node.name, 'warm');
    g.fillRect(x, y, Math.max(0.5, w - 0.5), rowH - 1);
    if (node.errors) {
      g.strokeStyle = '#c62828';
      g.strokeRect(x + 0.5, y + 0.5, Math.max(0.5, w - 1.5), rowH - 2);
    }
    if (w > 30) {
      g.fillStyle = '#1d2330';
      g.fillText(clip(g, node.name, w - 6, this.widths), x + 3, y + rowH / 2);
    }
    this.rects.push({ x, y, w, node, path });
  }

  drawCrumbs() {
    const parts = this.path.map((n, i) => h('button', {
      type: 'button', class: 'linkish',
      onclick: () => { this.path = this.path.slice(0, i + 1); this.request(); if (this.onZoom) this.onZoom(this.zoomed()); },
    }, i ? n.name : 'all'));
    const out = [];
    parts.forEach((p, i) => { if (i) out.push(' › '); out.push(p); });
    this.crumbs.replaceChildren(...out);
  }
}

// zoomPath answers the frames from root along names (from the root's
// child), as far as the tree has them.
/**
 * @param {FlameNode} root
 * @param {string[]} names
 * @returns {FlameNode[]}
 */
export function zoomPath(root, names) {
  const path = [root];
  for (const n of names) {
    const c = path[path.length - 1].children.find((x) => x.name === n);
    if (!c) break;
    path.push(c);
  }
  return path;
}

// frames answers what a graph zoomed into path (root … the zoomed
// frame) W px wide shows, in drawing order: the zoomed frame's ancestors
// full width, then the zoomed frame's subtree, each frame as wide as its
// share of its parent; a frame narrower than half a pixel is left out
// with what is below it. d is the level (0: the root).
/**
 * @param {FlameNode[]} path
 * @param {number} W
 * @returns {Frame[]}
 */
export function frames(path, W) {
  /** @type {Frame[]} */
  const out = [];
  for (let d = 0; d < path.length - 1; d++) out.push({ node: path[d], path: path.slice(0, d + 1), x: 0, w: W, d, ancestor: true });
  /** @type {(node: FlameNode, p: FlameNode[], x: number, w: number, d: number) => void} */
  const walk = (node, p, x, w, d) => {
    if (w < 0.5) return;
    out.push({ node, path: p, x, w, d, ancestor: false });
    // Calls that ran in parallel (a span's children on other threads)
    // can add up to more than their parent: then they share its width.
    const total = Math.max(node.value, childSum(node));
    if (!total) return;
    let cx = x;
    for (const c of node.children) {
      const cw = w * c.value / total;
      if (cw >= 0.5) walk(c, p.concat([c]), cx, cw, d + 1);
      cx += cw;
    }
  };
  walk(path[path.length - 1], path, 0, W, path.length - 1);
  return out;
}

// fmtAmount formats a flame graph's value in its unit: "ns" as a
// duration, "bytes" in KiB/MiB…, anything else as a count of the unit.
/** @param {number} x @param {string} unit @returns {string} */
export function fmtAmount(x, unit) {
  if (unit === 'ns') return fmtDur(x);
  if (unit === 'bytes') return fmtBytes(x);
  return fmtNum(x) + ' ' + unit;
}

// frameTip is a frame's tooltip: its value, share of the whole (total)
// and self value in unit ("ns", "bytes" or a count's name), calls and
// errors.
/**
 * @param {FlameNode} n
 * @param {number} total
 * @param {string} unit
 * @returns {string}
 */
export function frameTip(n, total, unit) {
  const v = (x) => fmtAmount(x, unit);
  return `${n.name} — ${v(n.value)} (${(100 * n.value / (total || 1)).toFixed(1)} %), self ${v(n.self)}` +
    (n.calls ? `, ${fmtNum(n.calls)} calls` : '') + (n.errors ? `, ${fmtNum(n.errors)} errors` : '');
}

// childSum is the sum of n's children's values (kept on n).
/** @param {FlameNode} n @returns {number} */
export function childSum(n) {
  if (n.childSum === undefined) n.childSum = (n.children || []).reduce((a, c) => a + c.value, 0);
  return n.childSum;
}

// depth answers the number of levels of the tree under root.
/** @param {FlameNode} root @returns {number} */
export function depth(root) {
  // Iterative: a deep trace must not overflow the stack.
  let max = 0;
  /** @type {[FlameNode, number][]} */
  const stack = [[root, 0]];
  while (stack.length) {
    const [n, d] = stack.pop();
    if (d > max) max = d;
    for (const c of n.children || []) stack.push([c, d + 1]);
  }
  return max + 1;
}
