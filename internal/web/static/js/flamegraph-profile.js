// flamegraph-profile.js: a flame graph of a profile (the API's Flame:
// {unit, root: {name, value, self, children}}) on a canvas: the root at
// the bottom, callers below callees, widths by value. Hover says what a
// frame is; a click zooms into it, a click on a frame below the zoomed
// one (or Reset) zooms out.

import { h, canvasFor, fmtNum, fmtDur } from './lib.js';

const ROW = 18;

// flame draws f into host and answers {destroy, zoom(path)}.
export function flame(host, f, opts = {}) {
  const canvas = h('canvas', { class: 'flame-canvas', 'aria-label': 'flame graph' });
  const tip = h('div', { class: 'flame-tip', hidden: true });
  const crumbs = h('div', { class: 'flame-crumbs muted' });
  const reset = h('button', { type: 'button', onclick: () => zoomTo(f.root) }, 'Reset zoom');
  const wrap = h('div', { class: 'flame-wrap' }, canvas, tip);
  host.replaceChildren(h('div', { class: 'row' }, reset, crumbs), wrap);

  const total = f.root.value || 1;
  const unit = f.unit || 'samples';
  const depth = maxDepth(f.root);
  const parents = new Map();
  (function link(n) { for (const c of n.children || []) { parents.set(c, n); link(c); } })(f.root);

  let focus = f.root, boxes = [];
  const fmtValue = (v) => (unit === 'ns' ? fmtDur(v) : fmtNum(v) + ' ' + unit);

  const draw = () => {
    const width = Math.max(300, wrap.clientWidth || host.clientWidth || 900);
    const height = (depth + 1) * ROW + 2;
    const ctx = canvasFor(canvas, width, height);
    ctx.clearRect(0, 0, width, height);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    boxes = [];
    // The focus spans the width; its ancestors span it too (they
    // contain it), drawn at their own depth.
    const chain = [];
    for (let n = focus; n; n = parents.get(n)) chain.unshift(n);
    chain.forEach((n, d) => frame(ctx, n, 0, width, d, height, true));
    const scale = width / (focus.value || 1);
    const walk = (n, x, d) => {
      let cx = x;
      for (const c of n.children || []) {
        const w = c.value * scale;
        if (w >= 0.5) {
          frame(ctx, c, cx, w, d, height, false);
          walk(c, cx, d + 1);
        }
        cx += w;
      }
    };
    walk(focus, 0, chain.length);
    crumbs.textContent = chain.length > 1 ? 'zoomed: ' + chain.slice(1).map((n) => n.name).join(' → ') : `${fmtValue(total)} in all; click a frame to zoom`;
    reset.disabled = focus === f.root;
  };

  const frame = (ctx, n, x, w, d, height, ancestor) => {
    const y = height - (d + 1) * ROW;
    ctx.fillStyle = ancestor && n !== focus ? '#d8dde6' : hue(n.name);
    ctx.fillRect(x + 0.5, y + 0.5, Math.max(0.5, w - 1), ROW - 1);
    if (w > 30) {
      ctx.fillStyle = '#1d2330';
      ctx.save();
      ctx.beginPath(); ctx.rect(x, y, w - 2, ROW); ctx.clip();
      ctx.fillText(fit(ctx, n.name, w - 8), x + 4, y + ROW / 2);
      ctx.restore();
    }
    boxes.push({ n, x, y, w });
  };

  const hit = (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    for (let i = boxes.length - 1; i >= 0; i--) {
      const b = boxes[i];
      if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + ROW) return { b, x, y };
    }
    return null;
  };
  canvas.addEventListener('mousemove', (ev) => {
    const t = hit(ev);
    if (!t) { tip.hidden = true; canvas.style.cursor = ''; return; }
    const n = t.b.n;
    tip.replaceChildren(h('b', null, n.name), h('br'),
      `${fmtValue(n.value)} (${(100 * n.value / total).toFixed(1)} %), self ${fmtValue(n.self || 0)}`);
    tip.hidden = false;
    const left = Math.min(t.x + 12, wrap.clientWidth - tip.offsetWidth - 4);
    tip.style.left = Math.max(0, left) + 'px';
    tip.style.top = Math.max(0, t.y - tip.offsetHeight - 4) + 'px';
    canvas.style.cursor = 'pointer';
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (ev) => { const t = hit(ev); if (t) zoomTo(t.b.n); });
  const zoomTo = (n) => { focus = n; tip.hidden = true; draw(); if (opts.onZoom) opts.onZoom(pathOf(n)); };
  const pathOf = (n) => { const p = []; for (; n && n !== f.root; n = parents.get(n)) p.unshift(n.name); return p; };

  // zoom follows a path of frame names from the root (a shared link).
  const zoom = (path) => {
    let n = f.root;
    for (const name of path || []) {
      const c = (n.children || []).find((x) => x.name === name);
      if (!c) break;
      n = c;
    }
    focus = n; draw();
  };

  const ro = new ResizeObserver(() => draw());
  ro.observe(wrap);
  if (opts.path) zoom(opts.path); else draw();
  return { destroy: () => { ro.disconnect(); host.replaceChildren(); }, zoom, canvas };
}

function maxDepth(n) {
  let d = 0;
  const stack = [[n, 0]];
  while (stack.length) {
    const [x, k] = stack.pop();
    d = Math.max(d, k);
    for (const c of x.children || []) stack.push([c, k + 1]);
  }
  return d;
}

// hue: warm colours, stable per name; Java frames lean orange, native
// and JVM frames red, like the classic flame graphs.
function hue(name) {
  let x = 2166136261;
  for (let i = 0; i < name.length; i++) { x ^= name.charCodeAt(i); x = Math.imul(x, 16777619); }
  const r = (x >>> 0) % 1000 / 1000;
  const base = /^(java|javax|jdk|sun)\./.test(name) ? 28 : /\.|\//.test(name) ? 40 : 8;
  return `hsl(${base + r * 22}, ${70 + r * 20}%, ${58 + r * 10}%)`;
}

// fit shortens s to w pixels with an ellipsis.
function fit(ctx, s, w) {
  if (ctx.measureText(s).width <= w) return s;
  let lo = 0, hi = s.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(s.slice(0, mid) + '…').width <= w) lo = mid; else hi = mid - 1;
  }
  return lo ? s.slice(0, lo) + '…' : '';
}
