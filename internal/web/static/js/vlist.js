// vlist.js: a virtualised list of fixed-height rows. Only the rows in
// view (and a few around them) exist in the DOM, so a list of 10^5 or
// 10^6 rows scrolls as fast as one of 50.

import { h } from './lib.js';

// Browsers cap an element's height (Chromium near 33.5 million px); a
// list taller than this scales its scroll range (rows stay rowHeight
// tall on screen, the scroll bar moves by more than one row a pixel).
const maxPx = 15_000_000;

// vlist makes a scrolling list in a new element: render(i) answers the
// element of row i (the list positions it). count is the number of
// rows; set it again with update(count).
export function vlist({ rowHeight, count = 0, render, className = '' }) {
  const spacer = h('div', { class: 'vl-spacer' });
  const layer = h('div', { class: 'vl-layer' });
  const el = h('div', { class: 'vlist ' + className, tabindex: '0' }, spacer, layer);
  let n = count;
  let frame = 0;
  let scale = 1;

  function sizes() {
    const px = n * rowHeight;
    scale = px > maxPx ? px / maxPx : 1;
    spacer.style.height = Math.min(px, maxPx) + 'px';
  }

  // first row in view.
  function top() { return Math.floor(el.scrollTop * scale / rowHeight); }

  function draw() {
    frame = 0;
    const first = Math.max(0, top() - 5);
    const visible = Math.ceil((el.clientHeight || 600) / rowHeight) + 10;
    const last = Math.min(n, first + visible);
    const rows = [];
    // Rows are placed relative to the scroll position so that a scaled
    // list still shows consecutive rows.
    const offset = el.scrollTop - (el.scrollTop * scale - first * rowHeight);
    for (let i = first; i < last; i++) {
      const r = render(i);
      r.style.top = (offset + (i - first) * rowHeight) + 'px';
      r.style.height = rowHeight + 'px';
      rows.push(r);
    }
    layer.replaceChildren(...rows);
  }

  function refresh() { if (!frame) frame = requestAnimationFrame(draw); }

  el.addEventListener('scroll', refresh, { passive: true });
  sizes();

  return {
    el,
    get count() { return n; },
    update(count) { n = count; sizes(); draw(); },
    refresh,
    // now draws at once (after a change the caller waits on).
    now: draw,
    // scrollTo brings row i into view (centred when it was out of view).
    scrollTo(i) {
      const first = top();
      const rows = Math.floor(el.clientHeight / rowHeight);
      if (i >= first + 1 && i < first + rows - 1) return;
      el.scrollTop = Math.max(0, (i - Math.floor(rows / 2)) * rowHeight / scale);
      draw();
    },
    destroy() { if (frame) cancelAnimationFrame(frame); },
  };
}
