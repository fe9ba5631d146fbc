// gctimeline.js: the GC view's timeline (profile tab): each collection's
// pause as a bar at its time (height: the pause), and the heap used after
// each collection as a line, in SVG.

import { fmtDur, fmtBytes, fmtTime } from './lib.js';

const SVG = 'http://www.w3.org/2000/svg';

/**
 * @typedef {{time: number, gcId: number, name: string, cause: string, durationNs: number, pauseNs: number, longestNs: number}} GCPause
 * @typedef {{time: number, gcId: number, usedBytes: number, committedBytes: number}} HeapPoint
 * @typedef {{x: number, y: number, w: number, h: number, pause: GCPause}} Bar
 */

// gcLayout places the collections and heap points in a width × height
// box (pad px left free at the bottom for the axis): bars grow up from
// the axis by their pause relative to the longest; the heap line spans
// the box's height by the most used. Times outside [t0, t1] are clamped.
/**
 * @param {GCPause[]} pauses @param {HeapPoint[]} heap @param {number} width @param {number} height @param {number} [pad]
 * @returns {{bars: Bar[], line: string, t0: number, t1: number, maxPause: number, maxHeap: number}}
 */
export function gcLayout(pauses, heap, width, height, pad = 16) {
  const times = [...pauses.map((p) => p.time), ...heap.map((p) => p.time)];
  const t0 = times.length ? Math.min(...times) : 0;
  const t1 = times.length ? Math.max(...times, t0 + 1) : 1;
  const maxPause = Math.max(1, ...pauses.map((p) => p.pauseNs));
  const maxHeap = Math.max(1, ...heap.map((p) => p.usedBytes));
  const inner = height - pad;
  const x = (/** @type {number} */ t) => Math.round(Math.min(Math.max((t - t0) / (t1 - t0), 0), 1) * (width - 3) * 10) / 10;
  const bars = pauses.map((p) => {
    const h = Math.max(1, Math.round(p.pauseNs / maxPause * inner));
    return { x: x(p.time), y: inner - h, w: 3, h, pause: p };
  });
  const pts = heap.slice().sort((a, b) => a.time - b.time)
    .map((p) => `${x(p.time)},${Math.round((inner - p.usedBytes / maxHeap * inner) * 10) / 10}`);
  return { bars, line: pts.length ? 'M' + pts.join(' L') : '', t0, t1, maxPause, maxHeap };
}

/** @param {string} tag @param {Record<string, string | number>} attrs @returns {SVGElement} */
function el(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return /** @type {SVGElement} */ (e);
}

// gcTimeline draws the timeline; null when there is nothing to draw.
/** @param {GCPause[]} pauses @param {HeapPoint[]} heap @returns {SVGElement | null} */
export function gcTimeline(pauses, heap) {
  if (!(pauses || []).length && !(heap || []).length) return null;
  const width = 900, height = 140;
  const l = gcLayout(pauses || [], heap || [], width, height);
  const svg = el('svg', { class: 'gc-timeline', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'GC pauses and heap after GC over time' });
  for (const b of l.bars) {
    const r = el('rect', { x: b.x, y: b.y, width: b.w, height: b.h, class: 'gc-bar', fill: '#d9534f' });
    const title = el('title', {});
    title.textContent = `${fmtTime(b.pause.time)} ${b.pause.name} (${b.pause.cause}): ${fmtDur(b.pause.pauseNs)} paused`;
    r.append(title);
    svg.append(r);
  }
  if (l.line) svg.append(el('path', { d: l.line, class: 'gc-heap', fill: 'none', stroke: '#337ab7', 'stroke-width': 1.5 }));
  const label = (/** @type {number} */ x, /** @type {string} */ anchor, /** @type {string} */ text) => {
    const t = el('text', { x, y: height - 3, 'text-anchor': anchor, 'font-size': 11, fill: 'currentColor' });
    t.textContent = text;
    return t;
  };
  svg.append(label(0, 'start', fmtTime(l.t0)),
    label(width / 2, 'middle', `bars: pauses (longest ${fmtDur(l.maxPause)}), line: heap used after GC (most ${fmtBytes(l.maxHeap)})`),
    label(width, 'end', fmtTime(l.t1)));
  return svg;
}
