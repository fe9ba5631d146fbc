// timeline.js: the trace's spans as a Gantt chart on a canvas, in lanes
// (a host's thread, a service or a host), each lane as many rows as the
// nesting in it needs. Only the rows in view are drawn, and in a row only
// the spans in the time window, with spans narrower than a pixel merged,
// so a view of 200 000 spans pans and zooms at frame rate. Cross-lane
// calls (a child on another thread, process or host than its parent) are
// drawn as arrows; the critical path can be highlighted.

import { color, fmtDur, h, sized } from './lib.js';

const rowH = 16;
const axisH = 22;
const gutter = 190; // lane labels
const minSpanNs = 1; // the narrowest window a zoom can reach

// laneKey says which lane a span runs in. By thread, a lane is a
// service's thread on a host (host · service · thread) or, for spans that
// do not say their thread, the service on the host (host · service): the
// service is in both keys, so a service whose spans only partly carry a
// thread (an OpenTelemetry root span with thread.id, its children
// without) has lanes that all name it, instead of "host · 17" for some and "host · service" for the rest.
/** @typedef {import('./tracemodel.js').Span} Span */

/**
 * A lane: the spans (positions) of one thread, service or host.
 * @typedef {object} Lane
 * @property {string} name
 * @property {number[]} spans
 * @property {number} nrows
 * @property {number} [k] its place among the lanes
 * @property {number} [first] its first row
 */

/**
 * A row of a lane: its spans' positions by start, none overlapping.
 * @typedef {object} Row
 * @property {Lane} lane
 * @property {number} level the row's place in its lane
 * @property {number[]} items
 * @property {number} maxDur the longest of its spans
 */

/**
 * @typedef {object} Layout
 * @property {Row[]} rows
 * @property {Int32Array} rowOf each span's row
 * @property {number[]} links the spans whose parent is in another lane
 * @property {Lane[]} lanes
 */

/** @type {Object<string, (s: Span) => string>} */
const laneKeys = {
  thread: (s) => [s.host, s.service, s.thread].filter(Boolean).join(' · '),
  service: (s) => s.service || s.host,
  host: (s) => s.host || s.service,
};

export const laneModes = Object.keys(laneKeys);
export const colourModes = ['service', 'host', 'thread', 'operation'];

// layout puts the spans (tree order, each with pos = its place in spans,
// parentPos, depth, offsetNs and durationNs) in lanes and rows. It
// answers the rows (each with its spans' positions sorted by start) and,
// per span, its row.
/**
 * @param {Span[]} spans
 * @param {string} mode one of laneModes
 * @returns {Layout}
 */
export function layout(spans, mode) {
  const key = laneKeys[mode] || laneKeys.thread;
  /** @type {Map<string, Lane>} */
  const lanes = new Map();
  /** @type {Lane[]} */
  const laneOf = new Array(spans.length);
  for (let i = 0; i < spans.length; i++) {
    const k = key(spans[i]);
    let lane = lanes.get(k);
    if (!lane) { lane = { name: k, spans: [], nrows: 0 }; lanes.set(k, lane); }
    lane.spans.push(i);
    laneOf[i] = lane;
  }
  // Within a lane, spans are packed: each (by start) goes to the first
  // row at or below its depth (its rank among the lane's depths) and
  // below its parent's row (when the parent is in the lane) that is free
  // at its start (the row's last end ≤ its start). Calls nested in a
  // thread stack up as before, and calls that run at once (a parallel
  // fan-out, a service's spans without a thread) get rows of their own
  // instead of hiding each other.
  /** @type {Row[]} */
  const rows = [];
  const rowOf = new Int32Array(spans.length);
  let k = 0;
  for (const lane of lanes.values()) {
    lane.k = k++;
    lane.first = rows.length;
    const depths = [...new Set(lane.spans.map((i) => spans[i].depth))].sort((a, b) => a - b);
    const rank = new Map(depths.map((d, r) => [d, r]));
    const order = lane.spans.slice().sort((a, b) => spans[a].offsetNs - spans[b].offsetNs || a - b);
    const ends = []; // per row of the lane: its last span's end
    for (const i of order) {
      const s = spans[i];
      let r = rank.get(s.depth);
      if (s.parentPos >= 0 && laneOf[s.parentPos] === lane) r = Math.max(r, rowOf[s.parentPos] - lane.first + 1);
      while (r < ends.length && ends[r] > s.offsetNs) r++;
      while (ends.length <= r) {
        ends.push(-Infinity);
        rows.push({ lane, level: rows.length - lane.first, items: [], maxDur: 0 });
      }
      ends[r] = s.offsetNs + s.durationNs;
      const row = rows[lane.first + r];
      rowOf[i] = lane.first + r;
      row.items.push(i);
      row.maxDur = Math.max(row.maxDur, s.durationNs);
    }
    lane.nrows = ends.length;
  }
  /** @type {number[]} */
  const links = [];
  for (let i = 0; i < spans.length; i++) {
    const p = spans[i].parentPos;
    if (p >= 0 && laneOf[p] !== laneOf[i]) links.push(i);
  }
  return { rows, rowOf, links, lanes: [...lanes.values()] };
}

// Timeline draws spans on a canvas; onSelect(pos) is called when a span
// is clicked.
export class Timeline {
  constructor({ onSelect, maxHeight = 360 }) {
    this.onSelect = onSelect;
    this.maxHeight = maxHeight;
    this.height = 120;
    this.canvas = h('canvas', { id: 'tl-canvas', class: 'tl-canvas' });
    this.tip = h('div', { class: 'tl-tip', hidden: true });
    this.el = h('div', { class: 'tl-box' }, this.canvas, this.tip);
    /** @type {Span[]} */
    this.spans = [];
    /** @type {Layout} */
    this.lay = { rows: [], rowOf: new Int32Array(0), links: [], lanes: [] };
    // Times are offsets from the trace's start in ns (the API's offsetNs:
    // exact, where unix ns as doubles are rounded to 256 ns).
    this.t0 = 0; this.t1 = 1; // the time window shown
    this.start = 0; this.end = 1; // the trace's
    this.scrollY = 0;
    this.selected = -1;
    this.colour = 'service';
    this.critical = null; // [{pos, start, end}] (offsets) or null
    this.frame = 0;
    // drawTimes (ms per draw, the latest 500 to 1000) is for measuring:
    // bench/web (frameJS) reads it through window.__tbTimeline; the page
    // itself does not.
    this.drawTimes = [];
    this.colours = new Map(); // of names
    this.barWidths = new Map(); // text widths in the bars' font
    this.laneWidths = new Map(); // and in the lane labels'
    this.listen();
  }

  // set gives the timeline its spans (see layout) and the trace's time
  // (offsets: 0 and its duration).
  set(spans, start, end, lanes) {
    this.spans = spans;
    this.setLayout(layout(spans, lanes));
    if (end <= start) end = start + 1;
    const keep = this.start === start && this.end === end;
    this.start = start; this.end = end;
    if (!keep) { this.t0 = start; this.t1 = end; this.scrollY = 0; }
    this.request();
  }

  setLanes(mode) { this.setLayout(layout(this.spans, mode)); this.scrollY = 0; this.request(); }

  // setLayout takes new rows; the canvas is as tall as they need, up to
  // maxHeight (then its rows scroll).
  setLayout(lay) {
    this.lay = lay;
    this.height = Math.max(120, Math.min(this.maxHeight, axisH + lay.rows.length * rowH + 6));
  }
  setColour(mode) { this.colour = mode; this.request(); }
  setCritical(segments) { this.critical = segments; this.request(); }

  // select marks span pos and, when it is out of view, scrolls and pans
  // to it.
  select(pos, reveal) {
    this.selected = pos;
    if (reveal && pos >= 0 && pos < this.spans.length) {
      const r = this.lay.rowOf[pos];
      const rowsIn = this.rowsInView();
      if (r * rowH < this.scrollY || (r + 1) * rowH > this.scrollY + rowsIn * rowH) {
        this.scrollY = Math.max(0, r * rowH - Math.floor(rowsIn / 2) * rowH);
      }
      const s = this.spans[pos];
      const w = this.t1 - this.t0;
      if (s.offsetNs + s.durationNs < this.t0 || s.offsetNs > this.t1) {
        this.t0 = s.offsetNs - w / 10; this.t1 = this.t0 + w;
      }
      this.clamp();
    }
    this.request();
  }

  rowsInView() { return Math.max(1, Math.floor((this.height - axisH) / rowH)); }
  // width is the canvas's CSS width, read once per draw (a layout read
  // per span would cost more than the drawing).
  width() { return this.w || this.measure(); }
  measure() { this.w = this.el.clientWidth || 800; return this.w; }
  plotW() { return Math.max(50, this.width() - gutter - 10); }
  x(t) { return gutter + (t - this.t0) / (this.t1 - this.t0) * this.plotW(); }
  timeAt(x) { return this.t0 + (x - gutter) / this.plotW() * (this.t1 - this.t0); }

  // zoom scales the window by f around the time under x (a canvas x).
  zoom(f, x) {
    const at = x === undefined ? (this.t0 + this.t1) / 2 : this.timeAt(Math.max(gutter, x));
    [this.t0, this.t1] = zoomWindow(this.t0, this.t1, f, at, this.start, this.end);
    this.clamp();
    this.request();
  }

  reset() { this.t0 = this.start; this.t1 = this.end; this.scrollY = 0; this.request(); }

  // pan moves the window by dx canvas pixels and the rows by dy.
  pan(dx, dy) {
    const dt = dx / this.plotW() * (this.t1 - this.t0);
    this.t0 += dt; this.t1 += dt;
    this.scrollY += dy;
    this.clamp();
    this.request();
  }

  clamp() {
    [this.t0, this.t1] = clampWindow(this.t0, this.t1, this.start, this.end);
    const maxY = Math.max(0, this.lay.rows.length * rowH - (this.height - axisH));
    this.scrollY = Math.max(0, Math.min(this.scrollY, maxY));
  }

  request() { if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); }); }

  listen() {
    const c = this.canvas;
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const x = e.offsetX;
      if (e.ctrlKey || e.metaKey || e.altKey) this.zoom(Math.pow(1.0015, e.deltaY), x);
      else if (e.shiftKey) this.pan(e.deltaY, 0);
      else this.pan(e.deltaX, e.deltaY);
    }, { passive: false });
    let drag = null;
    c.addEventListener('mousedown', (e) => { drag = { x: e.clientX, y: e.clientY, moved: false }; });
    window.addEventListener('mousemove', this.onMove = (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
      if (drag.moved) { this.pan(-dx, -dy); drag.x = e.clientX; drag.y = e.clientY; }
    });
    window.addEventListener('mouseup', this.onUp = (e) => {
      if (drag && !drag.moved && e.target === c) {
        const pos = this.hit(e.offsetX, e.offsetY);
        if (pos >= 0 && this.onSelect) this.onSelect(pos);
      }
      drag = null;
    });
    c.addEventListener('mousemove', (e) => this.hover(e));
    c.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    this.resize = new ResizeObserver(() => this.request());
    this.resize.observe(this.el);
  }

  destroy() {
    window.removeEventListener('mousemove', this.onMove);
    window.removeEventListener('mouseup', this.onUp);
    this.resize.disconnect();
    if (this.frame) cancelAnimationFrame(this.frame);
  }

  // hit answers the span at canvas point (x, y), or -1.
  hit(x, y) {
    if (x < gutter || y < axisH) return -1;
    const r = Math.floor((y - axisH + this.scrollY) / rowH);
    const row = this.lay.rows[r];
    if (!row) return -1;
    const slop = 3 / this.plotW() * (this.t1 - this.t0); // 3 px
    return spanAt(this.spans, row.items, this.timeAt(x), slop);
  }

  hover(e) {
    const pos = this.hit(e.offsetX, e.offsetY);
    if (pos < 0) { this.tip.hidden = true; return; }
    const s = this.spans[pos];
    this.tip.textContent = `${s.operation} — ${fmtDur(s.durationNs)} (self ${fmtDur(s.selfNs)}) · ${s.service || ''} ${s.host ? '@ ' + s.host : ''}${s.thread ? ' · ' + s.thread : ''}`;
    this.tip.hidden = false;
    this.tip.style.left = Math.min(e.offsetX + 12, this.width() - 320) + 'px';
    this.tip.style.top = (e.offsetY + 14) + 'px';
  }

  colourOf(s) {
    let k;
    switch (this.colour) {
      case 'host': k = s.host; break;
      case 'thread': k = s.thread || s.service; break;
      case 'operation': k = s.operation; break;
      default: k = s.service || s.host;
    }
    k = k || '?';
    // Cached: hashing the name for every span of every frame adds up.
    let c = this.colours.get(k);
    if (!c) { c = color(k); this.colours.set(k, c); }
    return c;
  }

  draw() {
    const t0 = performance.now();
    const W = this.measure(), H = this.height;
    const g = sized(this.canvas, W, H);
    g.fillStyle = '#fff';
    g.fillRect(0, 0, W, H);
    this.clamp();
    const rows = this.lay.rows;
    const first = Math.floor(this.scrollY / rowH);
    const last = Math.min(rows.length, first + this.rowsInView() + 2);
    const dim = !!this.critical;
    g.save();
    g.beginPath();
    g.rect(0, axisH, W, H - axisH);
    g.clip();
    this.drawLanes(g, first, last, W);
    this.drawGrid(g);
    for (let r = first; r < last; r++) this.drawRow(g, r, dim);
    if (this.critical) this.drawCritical(g, first, last);
    this.drawLinks(g, first, last);
    this.drawSelected(g);
    g.restore();
    this.drawAxis(g, W);
    this.drawScrollbar(g, W, H);
    const ms = performance.now() - t0;
    this.drawTimes.push(ms); // for bench/web (see the constructor)
    if (this.drawTimes.length > 1000) this.drawTimes.splice(0, 500);
  }

  y(r) { return axisH + r * rowH - this.scrollY; }

  drawLanes(g, first, last, W) {
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    let prev = null;
    for (let r = first; r < last; r++) {
      const row = this.lay.rows[r];
      const y = this.y(r);
      if (row.lane !== prev) {
        prev = row.lane;
        // A lane's band and, on its first row (or the first in view), its name.
        const k = row.lane.k;
        const nrows = row.lane.nrows;
        const top = this.y(row.lane.first);
        g.fillStyle = k % 2 ? '#f7f8fb' : '#fff';
        g.fillRect(0, top, W, nrows * rowH);
        g.strokeStyle = '#e3e6ec';
        g.beginPath(); g.moveTo(0, top + 0.5); g.lineTo(W, top + 0.5); g.stroke();
        g.fillStyle = '#374151';
        g.fillText(clip(g, row.lane.name, gutter - 8, this.laneWidths), 4, Math.max(y, top) + rowH / 2);
      }
    }
    g.strokeStyle = '#d9dde5';
    g.beginPath(); g.moveTo(gutter - 0.5, axisH); g.lineTo(gutter - 0.5, this.height); g.stroke();
  }

  drawRow(g, r, dim) {
    const row = this.lay.rows[r];
    const y = this.y(r) + 2;
    const hh = rowH - 4;
    const lo = this.t0 - row.maxDur, hi = this.t1;
    const items = row.items;
    // First item that may reach into the window (items are by start).
    let a = 0, b = items.length;
    while (a < b) { const m = (a + b) >> 1; if (this.spans[items[m]].offsetNs < lo) a = m + 1; else b = m; }
    g.globalAlpha = dim ? 0.35 : 1;
    g.font = '10px system-ui, sans-serif'; // once: setting a font is slow
    // Spans narrower than 2 px that touch, in one colour, are drawn as one
    // run: zoomed out, a row of thousands of spans is a few rectangles.
    let runX0 = 0, runX1 = -10, runCol = '';
    const flush = () => { if (runX1 > runX0) { g.fillStyle = runCol; g.fillRect(runX0, y, Math.max(1, runX1 - runX0), hh); } runX1 = -10; };
    const W = this.width();
    for (let k = a; k < items.length; k++) {
      const s = this.spans[items[k]];
      if (s.offsetNs > hi) break;
      const x0 = Math.max(gutter, this.x(s.offsetNs));
      const x1 = Math.min(W, this.x(s.offsetNs + s.durationNs));
      if (x1 < gutter) continue;
      const col = this.colourOf(s);
      if (x1 - x0 < 2 && !s.error) {
        if (col === runCol && x0 <= runX1 + 1) { runX1 = Math.max(runX1, x1, x0 + 1); continue; }
        flush();
        runX0 = x0; runX1 = Math.max(x1, x0 + 1); runCol = col;
        continue;
      }
      flush();
      g.fillStyle = col;
      g.fillRect(x0, y, Math.max(1, x1 - x0), hh);
      if (s.error) errorMark(g, x0, y, Math.max(1, x1 - x0), hh);
      if (x1 - x0 > 40) {
        g.fillStyle = '#111';
        g.fillText(clip(g, s.operation, x1 - x0 - 6, this.barWidths), x0 + 3, y + hh / 2);
      }
    }
    flush();
    g.globalAlpha = 1;
  }

  drawCritical(g, first, last) {
    for (const seg of this.critical) {
      if (seg.pos < 0) continue;
      const r = this.lay.rowOf[seg.pos];
      if (r < first || r >= last || seg.end < this.t0 || seg.start > this.t1) continue;
      const s = this.spans[seg.pos];
      const x0 = Math.max(gutter, this.x(seg.start)), x1 = Math.min(this.width(), this.x(seg.end));
      const y = this.y(r) + 2;
      g.fillStyle = this.colourOf(s);
      g.fillRect(x0, y, Math.max(1, x1 - x0), rowH - 4);
      if (s.error) errorMark(g, x0, y, Math.max(1, x1 - x0), rowH - 4);
      g.strokeStyle = '#c2185b';
      g.lineWidth = 2;
      g.strokeRect(x0, y, Math.max(1, x1 - x0), rowH - 4);
      g.lineWidth = 1;
    }
  }

  drawLinks(g, first, last) {
    g.strokeStyle = '#1d4ed8';
    g.fillStyle = '#1d4ed8';
    g.lineWidth = 1.5;
    for (const i of this.lay.links) {
      const s = this.spans[i];
      const x = this.x(s.offsetNs);
      if (x < gutter || x > this.width()) continue;
      const rc = this.lay.rowOf[i], rp = this.lay.rowOf[s.parentPos];
      if (Math.max(rc, rp) < first || Math.min(rc, rp) >= last) continue;
      const yp = this.y(rp) + rowH / 2, yc = this.y(rc) + (rc > rp ? 2 : rowH - 2);
      g.beginPath(); g.moveTo(x + 0.5, yp); g.lineTo(x + 0.5, yc); g.stroke();
      const d = rc > rp ? -5 : 5;
      g.beginPath(); g.moveTo(x + 0.5, yc); g.lineTo(x - 3.5, yc + d); g.lineTo(x + 4.5, yc + d); g.closePath(); g.fill();
    }
    g.lineWidth = 1;
  }

  drawSelected(g) {
    const pos = this.selected;
    if (pos < 0 || pos >= this.spans.length) return;
    const s = this.spans[pos];
    const r = this.lay.rowOf[pos];
    const x0 = Math.max(gutter, this.x(s.offsetNs)), x1 = Math.min(this.width(), this.x(s.offsetNs + s.durationNs));
    const y = this.y(r);
    g.fillStyle = 'rgba(37, 99, 235, 0.08)';
    g.fillRect(gutter, y, this.width() - gutter, rowH);
    if (x1 >= gutter && x0 <= this.width()) {
      g.strokeStyle = '#111';
      g.lineWidth = 2;
      g.strokeRect(x0 - 1, y + 1, Math.max(2, x1 - x0 + 2), rowH - 2);
      g.lineWidth = 1;
    }
  }

  // ticks answers the axis's ticks: [x, offset from the trace's start].
  // Offsets are whole multiples of the step (adding steps would drift).
  ticks() {
    const step = niceStep((this.t1 - this.t0) / Math.max(1, this.plotW() / 110));
    const out = [];
    for (const off of tickOffsets(this.t0, this.t1, this.start, step)) {
      const x = Math.round(this.x(this.start + off)) + 0.5;
      if (x >= gutter) out.push([x, off]);
    }
    return out;
  }

  // drawGrid draws the ticks' lines under the spans.
  drawGrid(g) {
    g.strokeStyle = '#eceff4';
    g.beginPath();
    for (const [x] of this.ticks()) { g.moveTo(x, axisH); g.lineTo(x, this.height); }
    g.stroke();
  }

  drawAxis(g, W) {
    g.fillStyle = '#f5f7fa';
    g.fillRect(0, 0, W, axisH);
    g.strokeStyle = '#d9dde5';
    g.beginPath(); g.moveTo(0, axisH - 0.5); g.lineTo(W, axisH - 0.5); g.stroke();
    g.fillStyle = '#6b7280';
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'middle';
    g.strokeStyle = '#9aa3b2';
    for (const { x, tick, text } of this.axisLabels(g, W)) {
      g.beginPath(); g.moveTo(tick, axisH - 5); g.lineTo(tick, axisH); g.stroke();
      g.fillText(text, x, axisH / 2);
    }
    g.fillStyle = '#374151';
    const n = (k, w) => `${k} ${w}${k === 1 ? '' : 's'}`;
    g.fillText(`${n(this.lay.lanes.length, 'lane')} · ${n(this.lay.rows.length, 'row')}`, 4, axisH / 2);
  }

  // axisLabels answers the ticks' labels as drawn: the tick's x, the
  // text's x and width. Labels are offsets from the trace's start in
  // one unit with as many decimals as the step needs, so neighbouring
  // ticks differ however far the view is zoomed in; a label that would
  // run off the canvas's right edge goes left of its tick.
  axisLabels(g, W) {
    g = g || this.canvas.getContext('2d');
    W = W || this.width();
    g.font = '10px system-ui, sans-serif';
    const ticks = this.ticks();
    if (!ticks.length) return [];
    const step = ticks.length > 1 ? ticks[1][1] - ticks[0][1] : this.t1 - this.t0;
    const span = Math.max(Math.abs(this.t0 - this.start), Math.abs(this.t1 - this.start));
    return ticks.map(([tick, off]) => {
      const text = tickLabel(off, step, span);
      const w = g.measureText(text).width;
      const x = tick + 3 + w <= W - 2 ? tick + 3 : tick - 3 - w;
      return { tick, x, w, text };
    });
  }

  drawScrollbar(g, W, H) {
    const total = this.lay.rows.length * rowH;
    const view = H - axisH;
    if (total <= view) return;
    const hh = Math.max(20, view * view / total);
    const y = axisH + (view - hh) * (this.scrollY / (total - view));
    g.fillStyle = 'rgba(0,0,0,0.25)';
    g.fillRect(W - 6, y, 4, hh);
  }
}

// errorMark marks a span in error: a red frame and a red corner, so the
// colour of its service stays readable.
function errorMark(g, x, y, w, hh) {
  g.strokeStyle = '#c62828';
  g.lineWidth = 1.5;
  g.strokeRect(x + 0.75, y + 0.75, Math.max(0.5, w - 1.5), hh - 1.5);
  g.lineWidth = 1;
  g.fillStyle = '#c62828';
  g.beginPath(); g.moveTo(x, y); g.lineTo(x + Math.min(8, w), y); g.lineTo(x, y + Math.min(8, hh)); g.closePath(); g.fill();
}


// tickLabel formats a tick's offset off (ns) from the trace's start:
// in the unit of the largest offset in view (span), with the decimals
// the step needs (step 500µs in a 4ms view: 0.5ms, 1.0ms, …; step 2µs
// 50ms into the trace: 50.002ms, 50.004ms, …).
/**
 * @param {number} off
 * @param {number} step
 * @param {number} span
 * @returns {string}
 */
export function tickLabel(off, step, span) {
  let div = 1, unit = 'ns';
  /** @type {[number, string][]} */
  const units = [[1e3, 'µs'], [1e6, 'ms'], [1e9, 's']];
  for (const [d, u] of units) if (span >= d) { div = d; unit = u; }
  const decimals = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / div) - 1e-9)));
  const v = off / div;
  return (Object.is(Number(v.toFixed(decimals)), -0) ? 0 : v).toFixed(decimals) + unit;
}

// zoomWindow answers the window t0…t1 scaled by f around the time at
// (which stays where it is in the window), no narrower than minSpanNs
// nor wider than the trace's time (start…end) and 5 %.
/**
 * @param {number} t0
 * @param {number} t1
 * @param {number} f
 * @param {number} at
 * @param {number} start
 * @param {number} end
 * @returns {[number, number]}
 */
export function zoomWindow(t0, t1, f, at, start, end) {
  let w = (t1 - t0) * f;
  w = Math.max(minSpanNs, Math.min(w, (end - start) * 1.05));
  const share = (at - t0) / (t1 - t0);
  const z0 = at - share * w;
  return [z0, z0 + w];
}

// clampWindow answers the window t0…t1 moved, not resized, so that it
// reaches at most 5 % of the trace's time before start or after end.
/**
 * @param {number} t0
 * @param {number} t1
 * @param {number} start
 * @param {number} end
 * @returns {[number, number]}
 */
export function clampWindow(t0, t1, start, end) {
  const w = t1 - t0;
  const slack = (end - start) * 0.05;
  if (t0 < start - slack) { t0 = start - slack; t1 = t0 + w; }
  if (t1 > end + slack) { t1 = end + slack; t0 = t1 - w; }
  return [t0, t1];
}

// tickOffsets answers the ticks from t0 to t1 every step as offsets
// from start: whole multiples of the step (adding steps would drift).
/**
 * @param {number} t0
 * @param {number} t1
 * @param {number} start
 * @param {number} step
 * @returns {number[]}
 */
export function tickOffsets(t0, t1, start, step) {
  const out = [];
  for (let k = Math.ceil((t0 - start) / step); start + k * step <= t1; k++) out.push(k * step);
  return out;
}

// spanAt answers the last of a row's items (span positions, by start)
// whose span covers time t give or take slop, or -1.
/**
 * @param {Span[]} spans
 * @param {number[]} items
 * @param {number} t
 * @param {number} slop
 * @returns {number}
 */
export function spanAt(spans, items, t, slop) {
  let best = -1;
  for (const i of items) {
    const s = spans[i];
    if (s.offsetNs - slop <= t && t <= s.offsetNs + s.durationNs + slop) best = i;
    if (s.offsetNs > t + slop) break;
  }
  return best;
}

// niceStep rounds a tick interval to 1, 2 or 5 times a power of ten.
/** @param {number} x @returns {number} */
export function niceStep(x) {
  if (!(x > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  const m = x / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

// textWidth measures text on g, through cache (a Map for g's font):
// measureText is what drawing many labels costs.
/**
 * @param {{measureText(text: string): {width: number}}} g
 * @param {string} text
 * @param {Map<string, number>} cache
 * @returns {number}
 */
function textWidth(g, text, cache) {
  let w = cache.get(text);
  if (w === undefined) {
    if (cache.size > 20000) cache.clear();
    w = g.measureText(text).width;
    cache.set(text, w);
  }
  return w;
}

// clip shortens text to fit width px when drawn on g (in the font whose
// widths cache holds).
/**
 * @param {{measureText(text: string): {width: number}}} g
 * @param {string} text
 * @param {number} width
 * @param {Map<string, number>} cache
 * @returns {string}
 */
export function clip(g, text, width, cache) {
  if (!text || width <= 8) return '';
  const full = textWidth(g, text, cache);
  if (full <= width) return text;
  // Start from the share of the characters that fits, then step down
  // until it does (usually at once).
  let n = Math.floor(text.length * width / full);
  while (n > 0 && textWidth(g, text.slice(0, n) + '…', cache) > width) n--;
  return n ? text.slice(0, n) + '…' : '';
}
