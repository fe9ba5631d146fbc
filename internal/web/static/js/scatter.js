// scatter.js: a scatter plot of traces on a canvas, duration over start
// time (zico's and Jaeger's search chart). Points are drawn on one
// canvas; hover marks, the tooltip and the brush live on an overlay so
// that moving the mouse never redraws thousands of points.
//
//   const s = new Scatter(wrap, {onPick, onBrush, tooltip});
//   s.set(points); s.setLog(true); s.highlight(id); s.destroy();
//
// A point is {t: start ns, d: duration ns, error: bool, id, data}.

/** @typedef {{t: number, d: number, error?: boolean, id?: string, data?: any}} Point */

import { canvasFor, fmtDur, h } from './lib.js';

const HEIGHT = 240;
const M = { left: 64, right: 14, top: 12, bottom: 30 };
const R = 3.5; // point radius, CSS pixels
const HIT = 8; // how close (px) the mouse must be to pick a point
const OK = 'rgba(37, 99, 235, 0.72)';
const ERR = 'rgba(220, 38, 38, 0.9)';

// Time steps for the x axis's ticks, ms.
const SEC = 1000, MIN = 60 * SEC, HOUR = 60 * MIN, DAY = 24 * HOUR;
const TIME_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, SEC, 2 * SEC, 5 * SEC, 10 * SEC, 15 * SEC, 30 * SEC,
  MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, 91 * DAY, 365 * DAY];

export class Scatter {
  // wrap is an empty element the plot fills; opts.onPick(point) runs on
  // a click on a point, opts.onBrush(fromNs, toNs) after a drag across
  // the time axis, opts.tooltip(point) answers the tooltip's lines.
  constructor(wrap, opts = {}) {
    this.wrap = wrap;
    this.opts = opts;
    this.points = [];
    this.log = true;
    this.hover = -1;
    this.marked = -1;
    this.brush = null;
    wrap.classList.add('scatter-wrap');
    this.base = h('canvas', { class: 'scatter-plot', 'aria-label': 'trace duration over start time' });
    this.over = h('canvas', { class: 'scatter-over' });
    this.tip = h('div', { class: 'scatter-tip', hidden: true });
    wrap.replaceChildren(this.base, this.over, this.tip);
    // Tests and scripts read where each point is drawn (CSS px, relative
    // to the canvas): the plot is otherwise opaque pixels.
    this.base.tbPoints = () => this.positions();
    this.listen();
    this.resize = new ResizeObserver(() => {
      if (this.wrap.clientWidth !== this.width) this.draw();
    });
    this.resize.observe(wrap);
  }

  set(points) {
    this.points = points;
    this.hover = -1;
    this.marked = -1;
    this.draw();
  }

  setLog(log) {
    this.log = log;
    this.draw();
  }

  // highlight marks the point of trace id (null: none), as when its
  // table row is hovered.
  highlight(id) {
    this.marked = id == null ? -1 : this.points.findIndex((p) => p.id === id);
    this.drawOverlay();
  }

  destroy() {
    this.resize.disconnect();
    delete this.base.tbPoints; // the hook would keep the points alive
    this.wrap.replaceChildren();
  }

  // positions answers every point's drawn position.
  positions() {
    const out = [];
    for (let i = 0; i < this.points.length; i++) {
      const p = this.points[i];
      out.push({ x: this.px[i], y: this.py[i], id: p.id, error: !!p.error });
    }
    return out;
  }

  // scales fits the axes to the points.
  scales() { return scales(this.points, this.width, this.log); }

  draw() {
    this.width = Math.max(320, this.wrap.clientWidth);
    const ctx = canvasFor(this.base, this.width, HEIGHT);
    canvasFor(this.over, this.width, HEIGHT);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, this.width, HEIGHT);
    this.px = new Float32Array(this.points.length);
    this.py = new Float32Array(this.points.length);
    if (!this.points.length) {
      ctx.fillStyle = '#6b7280';
      ctx.font = '13px system-ui, sans-serif';
      ctx.fillText('No traces to plot.', M.left, HEIGHT / 2);
      this.sc = null;
      this.drawOverlay();
      return;
    }
    const sc = this.sc = this.scales();
    this.axes(ctx, sc);
    for (let i = 0; i < this.points.length; i++) {
      this.px[i] = sc.x(this.points[i].t);
      this.py[i] = sc.y(this.points[i].d);
    }
    // Errors last, so that they stay visible over a crowd of others.
    for (const err of [false, true]) {
      ctx.fillStyle = err ? ERR : OK;
      ctx.beginPath();
      for (let i = 0; i < this.points.length; i++) {
        if (!!this.points[i].error !== err) continue;
        ctx.moveTo(this.px[i] + R, this.py[i]);
        ctx.arc(this.px[i], this.py[i], R, 0, 2 * Math.PI);
      }
      ctx.fill();
    }
    this.drawOverlay();
  }

  axes(ctx, sc) {
    const w = this.width, bottom = HEIGHT - M.bottom;
    ctx.font = '11px system-ui, sans-serif';
    ctx.lineWidth = 1;
    ctx.strokeStyle = '#eceff4';
    ctx.fillStyle = '#6b7280';
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (const d of sc.yTicks) {
      const py = Math.round(sc.y(d)) + 0.5;
      if (py < M.top - 1 || py > bottom + 1) continue;
      line(ctx, M.left, py, w - M.right, py);
      ctx.fillText(tickDur(d), M.left - 6, py);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    for (const tk of sc.xTicks) {
      const px = Math.round(M.left + ((tk.ms - sc.a) / (sc.b - sc.a)) * (w - M.left - M.right)) + 0.5;
      line(ctx, px, M.top, px, bottom);
      ctx.fillText(tk.label, px, bottom + 6);
    }
    ctx.strokeStyle = '#9ca3af';
    line(ctx, M.left + 0.5, M.top, M.left + 0.5, bottom + 0.5);
    line(ctx, M.left, bottom + 0.5, w - M.right, bottom + 0.5);
  }

  drawOverlay() {
    const ctx = this.over.getContext('2d');
    const r = window.devicePixelRatio || 1;
    ctx.setTransform(r, 0, 0, r, 0, 0);
    ctx.clearRect(0, 0, this.width, HEIGHT);
    if (this.brush) {
      const x0 = Math.min(this.brush.x0, this.brush.x1), x1 = Math.max(this.brush.x0, this.brush.x1);
      ctx.fillStyle = 'rgba(37, 99, 235, 0.12)';
      ctx.fillRect(x0, M.top, x1 - x0, HEIGHT - M.top - M.bottom);
    }
    /** @type {[number, string][]} */
    const marks = [[this.marked, '#111827'], [this.hover, '#111827']];
    for (const [i, color] of marks) {
      if (i < 0 || i >= this.points.length) continue;
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.arc(this.px[i], this.py[i], R + 3, 0, 2 * Math.PI);
      ctx.stroke();
    }
  }

  // hit answers the index of the point nearest (x, y) within HIT px, or
  // -1; errors are drawn on top, so among equals they win.
  hit(x, y) { return nearest(this.points, this.px, this.py, x, y); }

  listen() {
    const pos = (e) => {
      const b = this.over.getBoundingClientRect();
      return [e.clientX - b.left, e.clientY - b.top];
    };
    this.over.addEventListener('mousedown', (e) => {
      if (e.button !== 0 || !this.sc) return;
      const [x] = pos(e);
      this.brush = { x0: x, x1: x, moved: false };
    });
    this.over.addEventListener('mousemove', (e) => {
      const [x, y] = pos(e);
      // A brush lasts from mousedown to mouseup or leaving the plot.
      if (this.brush) {
        this.brush.x1 = x;
        this.brush.moved = this.brush.moved || Math.abs(x - this.brush.x0) > 4;
      }
      const i = this.brush && this.brush.moved ? -1 : this.hit(x, y);
      this.over.classList.toggle('on-point', i >= 0);
      if (i !== this.hover || this.brush) { this.hover = i; this.drawOverlay(); }
      this.showTip(i, x, y);
    });
    this.over.addEventListener('mouseleave', () => {
      this.hover = -1;
      this.brush = null;
      this.drawOverlay();
      this.showTip(-1);
    });
    this.over.addEventListener('mouseup', (e) => {
      const [x, y] = pos(e);
      const b = this.brush;
      this.brush = null;
      this.drawOverlay();
      if (b && b.moved && this.sc && this.opts.onBrush) {
        const t0 = this.sc.xInv(Math.min(b.x0, x)), t1 = this.sc.xInv(Math.max(b.x0, x));
        this.opts.onBrush(Math.floor(t0), Math.ceil(t1));
        return;
      }
      const i = this.hit(x, y);
      if (i >= 0 && this.opts.onPick) this.opts.onPick(this.points[i], e);
    });
  }

  showTip(i, x, y) {
    if (i < 0 || !this.opts.tooltip) { this.tip.hidden = true; return; }
    this.tip.replaceChildren(...this.opts.tooltip(this.points[i]).map((l) => h('div', null, l)));
    this.tip.hidden = false;
    // Keep the tooltip inside the plot: left of the pointer near the
    // right edge, above it near the bottom.
    const tw = this.tip.offsetWidth, th = this.tip.offsetHeight;
    const left = x + 14 + tw > this.width ? x - 14 - tw : x + 14;
    const top = Math.min(Math.max(0, y - th / 2), HEIGHT - th);
    this.tip.style.left = Math.max(0, left) + 'px';
    this.tip.style.top = top + 'px';
  }
}

// scales fits the axes of a plot w px wide (HEIGHT tall) to the points:
// x maps a start (ns) to px and xInv back, y a duration (ns, log or
// linear) to px; the ticks go with them; a and b are the x axis's ends
// in ms since the epoch.
/**
 * @param {Point[]} points
 * @param {number} w
 * @param {boolean} log
 */
export function scales(points, w, log) {
  const ht = HEIGHT;
  let t0 = Infinity, t1 = -Infinity, d0 = Infinity, d1 = -Infinity;
  for (const p of points) {
    if (p.t < t0) t0 = p.t;
    if (p.t > t1) t1 = p.t;
    if (p.d < d0) d0 = p.d;
    if (p.d > d1) d1 = p.d;
  }
  // ms from here on: ns since the epoch lose precision in doubles
  // beyond what a plot shows, but the ticks are nicer in ms.
  let a = t0 / 1e6, b = t1 / 1e6;
  if (b - a < 1) { a -= 500; b += 500; }
  const pad = (b - a) * 0.03;
  a -= pad; b += pad;
  const x = (t) => M.left + ((t / 1e6 - a) / (b - a)) * (w - M.left - M.right);
  const xInv = (px) => (a + ((px - M.left) / (w - M.left - M.right)) * (b - a)) * 1e6;
  let y, yTicks;
  const top = M.top, bottom = ht - M.bottom;
  if (log) {
    let l0 = Math.log10(Math.max(1, d0)), l1 = Math.log10(Math.max(1, d1));
    if (l1 - l0 < 0.5) { l0 -= 0.25; l1 += 0.25; }
    const lp = (l1 - l0) * 0.06;
    l0 -= lp; l1 += lp;
    y = (d) => bottom - ((Math.log10(Math.max(1, d)) - l0) / (l1 - l0)) * (bottom - top);
    yTicks = logTicks(l0, l1);
  } else {
    const hi = niceCeil(d1 * 1.05 || 1);
    y = (d) => bottom - (d / hi) * (bottom - top);
    yTicks = linearTicks(hi);
  }
  return { x, xInv, y, yTicks, xTicks: timeTicks(a, b, w), a, b };
}

// nearest answers the index of the point (drawn at px[i], py[i]) nearest
// (x, y) within HIT px, or -1; errors are drawn on top, so among equals
// they win.
/**
 * @param {Point[]} points
 * @param {ArrayLike<number>} px
 * @param {ArrayLike<number>} py
 * @param {number} x
 * @param {number} y
 * @returns {number}
 */
export function nearest(points, px, py, x, y) {
  let best = -1, bestD = HIT * HIT, bestErr = false;
  for (let i = 0; i < points.length; i++) {
    const dx = px[i] - x, dy = py[i] - y;
    const d = dx * dx + dy * dy;
    const err = !!points[i].error;
    if (d < bestD || (d === bestD && err && !bestErr)) { best = i; bestD = d; bestErr = err; }
  }
  return best;
}

// tickDur formats a tick's duration without trailing zeros: 10ms, 2.5s.
export function tickDur(ns) {
  return fmtDur(ns).replace(/^(-?\d+)\.(\d*?)0*([^\d.].*)$/, (m, a, b, u) => a + (b ? '.' + b : '') + u);
}

function line(ctx, x0, y0, x1, y1) {
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
}

// logTicks answers durations (ns) for a log axis from 10^l0 to 10^l1:
// decades, with 2 and 5 between them when the range is short.
export function logTicks(l0, l1) {
  const out = [];
  const steps = l1 - l0 < 2 ? [1, 2, 5] : [1];
  for (let e = Math.floor(l0); e <= Math.ceil(l1); e++) {
    for (const s of steps) {
      const v = s * 10 ** e;
      const l = Math.log10(v);
      if (l >= l0 && l <= l1) out.push(v);
    }
  }
  return out;
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
export function niceCeil(v) {
  const e = 10 ** Math.floor(Math.log10(v));
  for (const s of [1, 2, 5, 10]) if (s * e >= v) return s * e;
  return 10 * e;
}

export function linearTicks(hi) {
  const step = niceCeil(hi / 5);
  const out = [];
  for (let v = 0; v <= hi + step / 2; v += step) out.push(v);
  return out;
}

// timeTicks answers ticks {ms, label} from a to b (ms) at a step that
// leaves room for about one label per 110 px.
export function timeTicks(a, b, width) {
  const want = Math.max(2, Math.floor((width - M.left - M.right) / 110));
  const step = TIME_STEPS.find((s) => (b - a) / s <= want) || TIME_STEPS[TIME_STEPS.length - 1];
  // Round in local time: steps of hours and days start at midnight.
  const off = new Date(a).getTimezoneOffset() * MIN;
  const out = [];
  for (let t = Math.ceil((a - off) / step) * step + off; t <= b; t += step) out.push({ ms: t, label: timeLabel(t, step, b - a) });
  return out;
}

export function timeLabel(ms, step, range) {
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  const hm = `${p(d.getHours())}:${p(d.getMinutes())}`;
  if (step >= DAY) return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
  if (range > DAY) return `${p(d.getMonth() + 1)}-${p(d.getDate())} ${hm}`;
  if (step >= MIN) return hm;
  if (step >= SEC) return `${hm}:${p(d.getSeconds())}`;
  return `${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}
