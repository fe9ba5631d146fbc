// trace.js: the trace page (/trace/{id}). It opens on a server-side
// summary of the trace (/view: at most maxSpans spans, the longest ones,
// with counts of what is pruned), so a trace of a million spans opens as
// fast as one of a thousand; a pruned subtree is fetched when expanded
// (/view?root=), a span out of view when it is gone to (/view?reveal=).
// Tabs: timeline (canvas Gantt in lanes) with the call tree and the
// selected span's details, flame graph, icicle, method ranking and
// critical path. The address keeps the state: tab, span, search, limits,
// expansions, lanes and colours, critical-path highlight.

import { api, banner, download, errorBox, fill, fmtDur, fmtNum, guard, h, link, setQuery } from './lib.js';
import { groupings, traceStats } from './stats.js';
import { TraceModel } from './tracemodel.js';
import { CallTree } from './calltree.js';
import { Timeline, laneModes, colourModes } from './timeline.js';
import { Flame } from './flame.js';
import { renderSpan } from './spandetail.js';

const tabs = [
  ['timeline', 'Timeline + tree'], ['sequence', 'Sequence diagram'], ['flame', 'Flame graph'], ['icicle', 'Icicle'], ['rank', 'Ranking'],
  ['critical', 'Critical path'], ['stats', 'Statistics'],
];
const maxChoices = [1000, 10000, 50000, 200000];
// The statistics tab asks before it fetches a trace of more spans.
const statsConfirmAbove = 200000;
const defaults = { tab: 'timeline', max: 10000, lanes: 'thread', colour: 'service' };

export function mount(el, ctx) {
  const page = new TracePage(el, ctx.params.id, ctx.query);
  page.start();
  return () => page.destroy();
}

class TracePage {
  constructor(el, id, q) {
    this.el = el;
    this.id = id;
    this.base = '/api/v1/traces/' + encodeURIComponent(id);
    this.abort = new AbortController();
    this.st = {
      tab: tabs.some((t) => t[0] === q.get('tab')) ? q.get('tab') : defaults.tab,
      span: q.has('span') ? Number(q.get('span')) : -1, // selected span's index
      find: q.get('find') || '',
      hit: Number(q.get('hit') || 0),
      max: Math.min(200000, Math.max(1, Math.floor(Number(q.get('max'))) || defaults.max)),
      min: q.get('min') || '',
      x: parseExpansions(q.get('x')),
      lanes: laneModes.includes(q.get('lanes')) ? q.get('lanes') : defaults.lanes,
      colour: colourModes.includes(q.get('colour')) ? q.get('colour') : defaults.colour,
      crit: q.get('crit') === '1',
      flame: q.get('fz') ? q.get('fz').split('\u001f') : [],
      group: groupings.includes(q.get('group')) ? q.get('group') : groupings[0],
    };
    this.hits = []; // of the search
    this.hitCount = 0;
    this.cache = {}; // promises of flame, rank, critical-path
    this.panels = {};
    window.__tbTraceReady = undefined;
  }

  get(path, params) { return api(this.base + path, params, { signal: this.abort.signal }); }

  // mainView fetches the page's view of the whole trace (with the
  // selected span revealed).
  mainView() {
    return this.get('/view', { maxSpans: this.st.max, minDuration: this.st.min, reveal: this.st.span >= 0 ? [this.st.span] : undefined });
  }

  async start(prefetched) {
    this.el.classList.add('trace-page');
    if (!prefetched) fill(this.el, h('div', { class: 'loading' }, `Loading trace ${this.id}…`));
    await guard(this.el, async () => {
      const t0 = performance.now();
      let view = prefetched;
      try {
        view = view || await this.mainView();
      } catch (e) {
        // A span index from an old or edited address: open without it.
        if (!(e.status === 400 && this.st.span >= 0)) throw e;
        this.st.span = -1;
        view = await this.mainView();
      }
      this.model = new TraceModel(view);
      // An expansion from an old or edited address (a root the trace
      // does not have): dropped, the page kept.
      for (const [root, max] of this.st.x) {
        try {
          await this.expandIndex(root, max, false);
        } catch (e) {
          if (e.status !== 400) throw e;
          this.st.x = this.st.x.filter(([r]) => r !== root);
          this.save();
        }
      }
      this.fetched = performance.now() - t0;
      this.render();
      if (this.st.find) await this.search(this.st.find, this.st.hit, this.st.span < 0);
      if (this.st.span >= 0 && this.model.has(this.st.span)) this.select(this.model.pos(this.st.span));
      if (this.st.crit) this.setCritical(true);
    });
  }

  destroy() {
    this.abort.abort();
    if (this.detailAbort) this.detailAbort.abort();
    for (const c of [this.timeline, this.tree, this.flame]) if (c) c.destroy();
    // The test hooks must not keep a page that is gone (and its model).
    if (window.__tbTimeline === this.timeline) delete window.__tbTimeline;
    if (window.__tbFlame === this.flame) delete window.__tbFlame;
  }

  // save keeps the state in the address (defaults left out).
  save() {
    const s = this.st;
    setQuery({
      tab: s.tab !== defaults.tab ? s.tab : '', span: s.span >= 0 ? s.span : '', find: s.find, hit: s.find && s.hit ? s.hit : '',
      max: s.max !== defaults.max ? s.max : '', min: s.min, x: s.x.map(([r, m]) => `${r}.${m}`).join(','),
      lanes: s.lanes !== defaults.lanes ? s.lanes : '', colour: s.colour !== defaults.colour ? s.colour : '',
      crit: s.crit ? '1' : '', fz: s.flame.length ? s.flame.join('\u001f') : '',
      group: s.group !== groupings[0] ? s.group : '',
    });
  }

  render() {
    const v = this.model.view;
    this.tabBar = h('div', { class: 'tabs', role: 'tablist' }, tabs.map(([k, label]) => h('button', {
      type: 'button', id: 'tab-' + k, dataset: { tab: k }, onclick: () => this.showTab(k),
    }, label)));
    this.body = h('div', { class: 'trace-body' });
    fill(this.el, this.header(v), this.toolbar(v), this.tabBar, this.body);
    this.showTab(this.st.tab, true);
    // Another tab loads its own data; the page itself is there.
    ready(this.fetched);
  }

  header(v) {
    const root = this.model.spans[0];
    const badges = (xs, cls) => xs.map((x) => h('span', { class: 'badge ' + cls }, x));
    return h('div', { class: 'trace-head' },
      h('h2', null, root ? root.operation : 'Trace', ' ', h('span', { class: 'mono muted trace-id' }, this.id)),
      h('div', { class: 'trace-stats' },
        h('span', { id: 'trace-duration' }, h('b', null, fmtDur(v.durationNs))),
        h('span', { id: 'trace-spans' }, `${fmtNum(v.spanCount)} spans`),
        h('span', { id: 'trace-errors', class: v.errorCount ? 'err' : '' }, plural(v.errorCount, 'error')),
        h('span', { id: 'trace-shown', class: 'muted' }, ''),
        v.part ? h('span', { class: 'badge' }, `part ${v.part}`) : null,
        v.hosts.length ? h('span', null, 'hosts ', badges(v.hosts, 'host')) : null,
        v.services.length ? h('span', null, 'services ', badges(v.services, 'svc')) : null,
        link('/compare?a=' + encodeURIComponent(this.id), 'Compare with…'),
        this.downloads()),
      v.broken.length ? h('div', { class: 'trace-broken' }, h('span', { class: 'badge err' }, 'broken'),
        ...v.broken.map((b) => h('div', { class: 'muted' }, b))) : null);
  }

  // downloads are the "Trace JSON" buttons: the whole trace in Jaeger's
  // JSON (what Jaeger's UI shows and loads) and in OTLP/JSON.
  downloads() {
    const note = h('span', { id: 'download-note', class: 'muted' });
    const save = async (format, btn) => {
      btn.disabled = true;
      note.textContent = '';
      try {
        await download(this.base, { format }, `trace-${this.id}.${format}.json`);
        note.dataset.saved = format;
      } catch (e) {
        note.textContent = e.message;
      } finally {
        btn.disabled = false;
      }
    };
    const btn = (format, label, title) => {
      const b = h('button', { type: 'button', id: 'download-' + format, title, onclick: () => save(format, b) }, label);
      return b;
    };
    return h('span', { class: 'group trace-json' }, 'Trace JSON',
      btn('jaeger', 'Jaeger', "Download the trace in Jaeger's JSON (as Jaeger's /api/traces/{id} answers; Jaeger's UI loads it)"),
      btn('otlp', 'OTLP', 'Download the trace as OTLP/JSON (an ExportTraceServiceRequest)'), note);
  }

  // shownNote says how much of the trace the page holds.
  shownNote() {
    const el = this.el.querySelector('#trace-shown');
    if (!el) return;
    const v = this.model.view, n = this.model.spans.length;
    el.textContent = n < v.spanCount ? `${fmtNum(n)} shown, ${fmtNum(v.spanCount - n)} pruned` : 'all shown';
  }

  toolbar(v) {
    const errs = v.errorSpans || [];
    this.errNote = h('span', { id: 'error-pos', class: 'muted' }, errs.length ? plural(v.errorCount, 'error') : 'no errors');
    this.findInput = h('input', { id: 'find-input', type: 'search', placeholder: 'Search in trace (text or ~regex)', value: this.st.find, size: 28 });
    this.findInput.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); if (this.findInput.value !== this.st.find || !this.hits.length) this.search(this.findInput.value, 0, true); else this.stepHit(e.shiftKey ? -1 : 1); }
    });
    this.hitNote = h('span', { id: 'find-count', class: 'muted' }, '');
    const minInput = h('input', { id: 'min-duration', placeholder: 'e.g. 1ms', value: this.st.min, size: 7 });
    minInput.addEventListener('change', () => {
      const previous = { min: this.st.min };
      this.st.min = minInput.value.trim();
      this.reload(minInput, previous);
    });
    const maxSel = h('select', { id: 'max-spans', onchange: (e) => { const previous = { max: this.st.max }; this.st.max = Number(e.target.value); this.reload(e.target, previous); } },
      [...new Set([...maxChoices, this.st.max])].sort((a, b) => a - b)
        .map((n) => h('option', { value: String(n), selected: n === this.st.max }, fmtNum(n))));
    return h('div', { class: 'row trace-toolbar' },
      h('button', { type: 'button', id: 'go-slowest', title: 'Select the span with the most self time', onclick: () => this.goTo(v.slowest) }, 'Go to slowest'),
      h('span', { class: 'group' },
        h('button', { type: 'button', id: 'prev-error', disabled: !errs.length, onclick: () => this.stepError(-1) }, '◀ Error'),
        h('button', { type: 'button', id: 'next-error', disabled: !errs.length, onclick: () => this.stepError(1) }, 'Error ▶'),
        this.errNote),
      h('span', { class: 'group' }, this.findInput,
        h('button', { type: 'button', id: 'find-go', onclick: () => this.search(this.findInput.value, 0, true) }, 'Find'),
        h('button', { type: 'button', id: 'prev-hit', onclick: () => this.stepHit(-1) }, '◀'),
        h('button', { type: 'button', id: 'next-hit', onclick: () => this.stepHit(1) }, '▶'),
        this.hitNote),
      h('label', null, 'Spans shown', maxSel),
      h('label', null, 'Min duration', minInput));
  }

  // reload fetches the main view again (limits changed): expansions are
  // dropped, the selection kept.
  async reload(input, previous) {
    let view;
    try {
      view = await this.mainView();
    } catch (e) {
      if (e.name === 'AbortError') return;
      // A limit the API refuses (a malformed duration): say so at the
      // input and keep the page as it is.
      if (input) { input.classList.add('invalid'); input.title = e.message; }
      banner(e.message);
      Object.assign(this.st, previous);
      return;
    }
    banner('');
    this.st.x = [];
    this.save();
    for (const c of [this.timeline, this.tree, this.flame]) if (c) c.destroy();
    this.timeline = this.tree = this.flame = null;
    this.panels = {};
    await this.start(view);
  }

  showTab(k, first) {
    this.st.tab = k;
    for (const b of this.tabBar.children) b.classList.toggle('active', b.dataset.tab === k);
    for (const [name, p] of Object.entries(this.panels)) p.hidden = name !== (k === 'icicle' ? 'flame' : k);
    const key = k === 'icicle' ? 'flame' : k;
    if (!this.panels[key]) {
      const p = h('div', { class: 'tab-panel', id: 'panel-' + key });
      this.panels[key] = p;
      this.body.append(p);
      this['tab_' + key](p);
    } else if (key === 'flame' && this.flame) {
      this.flame.setMode(k);
      this.modeNote(k);
    }
    if (k === 'timeline' && this.timeline) this.timeline.request();
    if (!first) this.save();
  }

  // --- Timeline + tree ---------------------------------------------

  tab_timeline(p) {
    this.timeline = new Timeline({ onSelect: (pos) => this.select(pos) });
    const lanes = h('select', { id: 'tl-lanes', onchange: (e) => { this.st.lanes = e.target.value; this.timeline.setLanes(this.st.lanes); this.save(); } },
      laneModes.map((m) => h('option', { value: m, selected: m === this.st.lanes }, { thread: 'host · thread', service: 'service', host: 'host' }[m])));
    const colour = h('select', { id: 'tl-colour', onchange: (e) => { this.st.colour = e.target.value; this.timeline.setColour(this.st.colour); this.save(); } },
      colourModes.map((m) => h('option', { value: m, selected: m === this.st.colour }, m)));
    this.critBox = h('input', { type: 'checkbox', id: 'crit-toggle', checked: this.st.crit, onchange: (e) => this.setCritical(e.target.checked) });
    const tl = this.timeline;
    p.append(
      h('div', { class: 'row tl-toolbar' },
        h('label', null, 'Lanes', lanes), h('label', null, 'Colour by', colour),
        h('span', { class: 'group' },
          h('button', { type: 'button', id: 'zoom-in', title: 'Zoom in (ctrl + wheel)', onclick: () => tl.zoom(0.5) }, '+'),
          h('button', { type: 'button', id: 'zoom-out', title: 'Zoom out', onclick: () => tl.zoom(2) }, '−'),
          h('button', { type: 'button', id: 'zoom-reset', onclick: () => tl.reset() }, 'Whole trace')),
        h('label', { class: 'check' }, this.critBox, 'Critical path'),
        h('span', { class: 'muted' }, 'wheel: scroll · ctrl+wheel: zoom · drag: pan · arrows show calls to another thread or host')),
      tl.el);
    this.tree = new CallTree(this.model, { select: (pos) => this.select(pos), expand: (pos) => this.expand(pos) });
    this.details = h('aside', { id: 'span-details', class: 'panel span-details' }, h('div', { class: 'muted' }, 'Select a span to see its details.'));
    p.append(h('div', { class: 'row tree-toolbar' },
      h('button', { type: 'button', id: 'collapse-all', onclick: () => this.tree.collapseAll(false) }, 'Collapse all'),
      h('button', { type: 'button', id: 'expand-all', onclick: () => this.tree.collapseAll(true) }, 'Expand all')),
    h('div', { class: 'split trace-split' }, this.tree.el, this.details));
    this.timeline.set(this.model.spans, 0, this.model.view.durationNs, this.st.lanes);
    this.timeline.setColour(this.st.colour);
    this.shownNote();
    // Draw now, not at the next frame, so the page is ready when this
    // returns; a benchmark reads the mark.
    this.applyCritical();
    this.markHits();
    this.timeline.draw();
    this.tree.list.now();
    window.__tbTimeline = this.timeline;
    ready(this.fetched);
  }

  // refreshModel redraws what shows the model after spans were added.
  refreshModel() {
    if (this.tree) this.tree.rebuild();
    if (this.timeline) {
      this.timeline.set(this.model.spans, 0, this.model.view.durationNs, this.st.lanes);
      if (this.critSegments && this.st.crit) this.timeline.setCritical(this.mapCritical());
    }
    this.shownNote();
  }

  // select selects the span at pos: tree, timeline, details, address.
  select(pos) {
    const s = this.model.spans[pos];
    if (!s) return;
    this.st.span = s.index;
    this.save();
    if (this.tree) { this.tree.show(pos); }
    if (this.timeline) this.timeline.select(pos, true);
    this.noteError();
    this.loadDetails(s.index);
  }

  async loadDetails(index) {
    if (!this.details) return;
    if (this.detailAbort) this.detailAbort.abort();
    const ac = this.detailAbort = new AbortController();
    this.details.dataset.index = '';
    try {
      const d = await api(this.base + '/spans/' + index, null, { signal: ac.signal });
      if (ac.signal.aborted) return;
      const s = this.model.spans[this.model.pos(index)];
      fill(this.details, renderSpan(d, this.id, s ? s.offsetNs : d.offsetNs ?? d.start - this.model.view.start));
      this.details.dataset.index = String(index);
    } catch (e) {
      if (e.name !== 'AbortError') fill(this.details, errorBox(e));
    }
  }

  // goTo selects the span with this index, fetching it (and its
  // ancestors) first when the page does not hold it, and shows the
  // timeline.
  async goTo(index) {
    if (index == null || index < 0) return;
    if (!this.model.has(index)) {
      const v = await this.get('/view', { maxSpans: 1, reveal: [index] });
      this.model.merge(v);
      this.refreshModel();
    }
    if (this.st.tab !== 'timeline') this.showTab('timeline');
    this.select(this.model.pos(index));
  }

  // expand fetches more of the subtree below pos: what is shown of it
  // now and up to 1000 spans more.
  async expand(pos) {
    const s = this.model.spans[pos];
    const max = Math.min(200000, s.descendants - s.pruned + 1 + 1000);
    await guard(this.details || this.el, () => this.expandIndex(s.index, max, true));
  }

  async expandIndex(root, max, live) {
    const v = await this.get('/view', { root, maxSpans: max, minDuration: this.st.min });
    this.model.merge(v);
    if (!live) return;
    this.st.x = this.st.x.filter(([r]) => r !== root).concat([[root, max]]);
    this.save();
    this.refreshModel();
  }

  // --- errors and search --------------------------------------------

  stepError(dir) {
    const errs = this.model.view.errorSpans || [];
    if (!errs.length) return;
    const cur = this.st.span;
    let next;
    if (dir > 0) next = errs.find((i) => i > cur) ?? errs[0];
    else next = [...errs].reverse().find((i) => i < cur) ?? errs[errs.length - 1];
    this.goTo(next);
  }

  noteError() {
    const errs = this.model.view.errorSpans || [];
    if (!this.errNote || !errs.length) return;
    const k = errs.indexOf(this.st.span);
    this.errNote.textContent = k >= 0 ? `error ${k + 1} of ${fmtNum(this.model.view.errorCount)}` : plural(this.model.view.errorCount, 'error');
  }

  // search finds text in the trace (/find) and goes to hit k.
  async search(text, k, go) {
    text = text.trim();
    this.st.find = text;
    this.findInput.value = text;
    if (!text) {
      this.hits = []; this.hitCount = 0; this.st.hit = 0;
      this.hitNote.textContent = '';
      this.hitNote.title = '';
      this.hitNote.classList.replace('err', 'muted');
      this.markHits();
      this.save();
      return;
    }
    try {
      const r = await this.get('/find', { q: text, ignoreCase: true, limit: 100000 });
      this.hits = r.hits;
      this.hitCount = r.count;
      this.findInput.classList.remove('invalid');
    } catch (e) {
      if (e.name === 'AbortError') return;
      this.hits = []; this.hitCount = 0;
      this.findInput.classList.add('invalid');
      // The whole message is the note's tooltip; the note stays one
      // short line so the toolbar keeps its place.
      this.hitNote.textContent = e.message;
      this.hitNote.title = e.message;
      this.hitNote.classList.replace('muted', 'err');
      return;
    }
    this.st.hit = Math.min(k, Math.max(0, this.hits.length - 1));
    this.markHits();
    this.noteHit();
    this.save();
    if (go && this.hits.length) await this.goTo(this.hits[this.st.hit].index);
  }

  stepHit(dir) {
    if (!this.hits.length) return;
    this.st.hit = (this.st.hit + dir + this.hits.length) % this.hits.length;
    this.noteHit();
    this.goTo(this.hits[this.st.hit].index);
  }

  noteHit() {
    this.hitNote.textContent = this.hits.length ? `${this.st.hit + 1} / ${fmtNum(this.hitCount)}` : 'no hits';
    this.hitNote.title = '';
    this.hitNote.classList.replace('err', 'muted');
  }

  markHits() {
    if (!this.tree) return;
    this.tree.hits = new Set(this.hits.map((x) => x.index));
    this.tree.refresh();
  }

  // --- critical path ------------------------------------------------

  critical() { return this.cache.critical || (this.cache.critical = this.get('/critical-path')); }

  mapCritical() {
    return this.critSegments.map((sg) => ({ pos: this.model.pos(sg.index), start: sg.offsetNs, end: sg.endOffsetNs }));
  }

  async setCritical(on) {
    this.st.crit = on;
    if (this.critBox) this.critBox.checked = on;
    this.save();
    if (!on) {
      if (this.timeline) { this.timeline.setCritical(null); this.timeline.el.dataset.critical = '0'; }
      if (this.tree) { this.tree.critical = new Set(); this.tree.refresh(); }
      return;
    }
    const target = this.panels.timeline || this.el;
    await guard(target, async () => {
      const cp = await this.critical();
      // The path's spans may be pruned: fetch them so the path is whole.
      const missing = cp.spans.map((s) => s.index).filter((i) => !this.model.has(i));
      if (missing.length) {
        this.model.merge(await this.get('/view', { maxSpans: 1, reveal: missing.slice(0, 64) }));
      }
      this.critSegments = cp.segments;
      this.critSpans = cp.spans;
      this.refreshModel();
      this.applyCritical();
    });
  }

  // applyCritical shows the critical path (when on) in the timeline and
  // the tree.
  applyCritical() {
    if (!this.st.crit || !this.critSegments) return;
    if (this.timeline) {
      this.timeline.setCritical(this.mapCritical());
      this.timeline.el.dataset.critical = String(this.critSegments.length);
    }
    if (this.tree) { this.tree.critical = new Set(this.critSpans.map((s) => s.index)); this.tree.refresh(); }
  }

  tab_critical(p) {
    fill(p, h('div', { class: 'loading' }, 'Computing the critical path…'));
    guard(p, async () => {
      const cp = await this.critical();
      // The spans are by time on the path, most first; a long path's
      // tail adds nothing to read and would cost its DOM.
      const limit = 1000;
      const rows = cp.spans.slice(0, limit).map((s) => {
        const bar = h('i');
        bar.style.width = (100 * s.share).toFixed(1) + '%';
        return h('tr', { class: 'clickable', dataset: { index: String(s.index) }, onclick: () => this.goTo(s.index) },
          h('td', null, s.operation), h('td', null, s.service), h('td', null, s.host),
          h('td', { class: 'num' }, fmtDur(s.onPathNs)), h('td', { class: 'num' }, (100 * s.share).toFixed(1) + ' %'),
          h('td', { class: 'share' }, h('span', { class: 'share-bar' }, bar)));
      });
      fill(p,
        h('div', { class: 'row' },
          h('span', null, `${fmtNum(cp.spans.length)} spans on the path over ${fmtDur(cp.durationNs)}, ${fmtNum(cp.segments.length)} segments` +
            (cp.spans.length > limit ? `; the ${fmtNum(limit)} longest on it shown.` : '.')),
          h('button', { type: 'button', id: 'crit-show', onclick: async () => { await this.setCritical(true); this.showTab('timeline'); } }, 'Highlight in the timeline')),
        h('table', { class: 'grid', id: 'critical-table' },
          h('thead', null, h('tr', null, h('th', null, 'Span'), h('th', null, 'Service'), h('th', null, 'Host'),
            h('th', { class: 'num' }, 'On path'), h('th', { class: 'num' }, 'Share'), h('th', null, ''))),
          h('tbody', null, rows)));
    });
  }

  // --- sequence diagram (Kieker's trace-analysis) -----------------------

  // tab_sequence draws the trace's UML sequence diagram as Kieker draws
  // it: lifelines per assembly or deployment component, one diagram per
  // Kieker trace (thread) in it, the SVG made by the bridge.
  tab_sequence(p, mode = this.seqMode || 'assembly', index = this.seqIndex || 0) {
    this.seqMode = mode;
    this.seqIndex = index;
    fill(p, h('div', { class: 'loading' }, 'Drawing the sequence diagram…'));
    guard(p, async () => {
      const key = 'seq-' + mode;
      const d = await (this.cache[key] || (this.cache[key] = this.get('/sequence', { mode })));
      const invalid = d.invalid.map((v) => h('div', { class: 'muted small' }, `Kieker's trace analysis leaves out trace ${v.id} (${fmtNum(v.calls)} calls): ${v.reason}`));
      const modeSel = h('select', { id: 'seq-mode', onchange: () => this.tab_sequence(p, modeSel.value, 0) },
        [['assembly', 'per assembly component'], ['deployment', 'per deployment component']].map(([v, l]) => h('option', { value: v, selected: v === mode }, l)));
      if (!d.diagrams.length) {
        fill(p, h('div', { class: 'row' }, modeSel), h('div', { class: 'notice' }, 'No diagram: Kieker\'s rules find no valid trace in this one.'), invalid);
        return;
      }
      const i = Math.min(index, d.diagrams.length - 1);
      const diagSel = d.diagrams.length > 1 ? h('select', { id: 'seq-index', onchange: () => this.tab_sequence(p, mode, Number(diagSel.value)) },
        d.diagrams.map((x, k) => h('option', { value: String(k), selected: k === i }, `Kieker trace ${x.traceId} (${fmtNum(x.messages.length / 2)} calls)`))) : null;
      const svgText = await this.get('/sequence', { mode, format: 'svg', index: i });
      const doc = new DOMParser().parseFromString(svgText, 'image/svg+xml');
      const svg = document.importNode(doc.documentElement, true);
      const dg = d.diagrams[i];
      fill(p, h('div', { class: 'row' }, modeSel, diagSel,
        h('span', { class: 'muted', id: 'seq-info' }, `${fmtNum(dg.participants.length - 1)} lifelines, ${fmtNum(dg.messages.length)} messages`),
        h('button', { type: 'button', id: 'seq-pic', title: 'the diagram in Kieker\'s pic form, for pic2plot and UMLGraph\'s sequence.pic',
          onclick: () => guard(p, () => download(this.base + '/sequence', { mode, format: 'pic', index: i }, `${mode}SequenceDiagram-${dg.traceId}.pic`)) }, 'Download .pic')),
      h('div', { class: 'sequence-diagram', id: 'sequence-diagram' }, svg), invalid);
    });
  }

  // --- flame graph and icicle ----------------------------------------

  modeNote(k) {
    const m = this.panels.flame && this.panels.flame.querySelector('.flame-mode');
    if (m) m.textContent = k === 'icicle' ? 'Icicle: callers on top, callees below.' : 'Flame graph: callers at the bottom, callees above.';
  }

  tab_flame(p) {
    fill(p, h('div', { class: 'loading' }, 'Loading the flame graph…'));
    guard(p, async () => {
      const f = this.cache.flame || (this.cache.flame = this.get('/flame'));
      const data = await f;
      this.flame = new Flame({ root: data.root, unit: data.unit, mode: this.st.tab, onZoom: (names) => { this.st.flame = names; this.save(); } });
      if (this.st.flame.length) this.flame.zoomTo(this.st.flame);
      window.__tbFlame = this.flame;
      fill(p, h('div', { class: 'row' }, h('span', { class: 'flame-mode muted' }),
        h('span', { class: 'muted' }, 'Frames merge the calls of one path; width is time. Click a frame to zoom in, a grey bar or the path above to zoom out.')),
      this.flame.el);
      this.modeNote(this.st.tab);
      this.flame.draw();
    });
  }

  // --- statistics (Jaeger's trace statistics) ------------------------

  tab_stats(p, confirmed) {
    // The statistics need every span: a huge trace is fetched whole
    // only when asked to.
    const n = this.model.view.spanCount;
    if (n > statsConfirmAbove && !confirmed) {
      fill(p, h('div', { class: 'row' }, h('span', null, `The statistics read all ${fmtNum(n)} spans of the trace.`),
        h('button', { type: 'button', id: 'stats-compute', onclick: () => this.tab_stats(p, true) }, 'Compute them')));
      return;
    }
    fill(p, h('div', { class: 'loading' }, 'Computing the statistics…'));
    guard(p, async () => {
      // The whole trace, unix ns exact (parseExact): self times need
      // every span, and ns rounded to 256 would show.
      const t = await (this.cache.full || (this.cache.full = api(this.base, null, { signal: this.abort.signal, as: 'exact' })));
      /** @type {[string, string, boolean, string][]} */
      const cols = [
        ['service', 'Service', false, ''], ['operation', 'Operation', false, ''], ['count', 'Count', true, 'spans'],
        ['totalNs', 'Total', true, 'the spans\' durations added up'], ['avgNs', 'Avg', true, ''], ['minNs', 'Min', true, ''], ['maxNs', 'Max', true, ''],
        ['selfTotalNs', 'Self total', true, 'self time: a span\'s duration less the time its children cover (each child clipped to the span; overlapping children count once)'],
        ['selfAvgNs', 'Self avg', true, ''], ['selfMinNs', 'Self min', true, ''], ['selfMaxNs', 'Self max', true, ''],
        ['selfShare', 'Self % of trace', true, 'self total over the trace\'s duration'],
      ];
      let key = 'totalNs', desc = true;
      const head = h('tr'), body = h('tbody');
      const limit = 5000;
      const note = h('div', { class: 'muted', id: 'stats-note' });
      const groupSel = h('select', { id: 'stats-group', onchange: () => { this.st.group = groupSel.value; this.save(); draw(); } },
        [['service-operation', 'service and operation'], ['service', 'service'], ['operation', 'operation']]
          .map(([v, l]) => h('option', { value: v, selected: v === this.st.group }, l)));
      const draw = () => {
        const st = traceStats(t.spans, this.st.group);
        const shown = cols.filter(([k]) => !(k === 'service' && this.st.group === 'operation') && !(k === 'operation' && this.st.group === 'service'));
        const rows = [...st.rows].sort((a, b) => {
          const x = a[key], y = b[key];
          const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
          return desc ? -c : c;
        });
        head.replaceChildren(...shown.map(([k, label, num, title]) => h('th', {
          class: 'sortable' + (num ? ' num' : '') + (k === key ? ' sorted' : ''), dataset: { key: k }, title: title || null,
          onclick: () => { if (key === k) desc = !desc; else { key = k; desc = num; } draw(); },
        }, label + (k === key ? (desc ? ' ▼' : ' ▲') : ''))));
        const cell = (r, k) => {
          const v = r[k];
          if (k === 'service' || k === 'operation') return h('td', { dataset: { key: k } }, v);
          if (k === 'count') return h('td', { class: 'num', dataset: { key: k, value: String(v) } }, fmtNum(v));
          if (k === 'selfShare') return h('td', { class: 'num', dataset: { key: k, value: String(v) } }, (100 * v).toFixed(2) + ' %');
          return h('td', { class: 'num', dataset: { key: k, value: String(v) } }, fmtDur(v));
        };
        body.replaceChildren(...rows.slice(0, limit).map((r) => h('tr', { dataset: { service: r.service, operation: r.operation } },
          shown.map(([k]) => cell(r, k)))));
        note.textContent = `${fmtNum(st.spans)} spans over ${fmtDur(st.durationNs)} in ${fmtNum(st.rows.length)} groups` +
          (st.rows.length > limit ? `, the first ${fmtNum(limit)} shown` : '') + '. Times are of the spans of each group; self time leaves out what the span\'s children cover.';
        p.dataset.rows = String(st.rows.length);
      };
      draw();
      fill(p, h('div', { class: 'row' }, h('label', null, 'Group by', groupSel), note),
        h('div', { class: 'stats-scroll' }, h('table', { class: 'grid', id: 'stats-table' }, h('thead', null, head), body)));
    });
  }

  // --- ranking -------------------------------------------------------

  tab_rank(p) {
    fill(p, h('div', { class: 'loading' }, 'Ranking the methods…'));
    guard(p, async () => {
      const r = await (this.cache.rank || (this.cache.rank = this.get('/rank')));
      /** @type {[string, string, boolean][]} */
      const cols = [
        ['operation', 'Operation', false], ['component', 'Component', false], ['calls', 'Calls', true], ['errors', 'Errors', true],
        ['totalNs', 'Total', true], ['selfNs', 'Self', true], ['minNs', 'Min', true], ['maxNs', 'Max', true],
      ];
      let key = 'selfNs', desc = true;
      const body = h('tbody');
      const head = h('tr');
      const limit = 5000;
      const draw = () => {
        const rows = [...r.rows].sort((a, b) => {
          const x = a[key], y = b[key];
          const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
          return desc ? -c : c;
        });
        head.replaceChildren(...cols.map(([k, label, num]) => h('th', {
          class: 'sortable' + (num ? ' num' : '') + (k === key ? ' sorted' : ''), dataset: { key: k },
          onclick: () => { if (key === k) desc = !desc; else { key = k; desc = num; } draw(); },
        }, label + (k === key ? (desc ? ' ▼' : ' ▲') : ''))));
        body.replaceChildren(...rows.slice(0, limit).map((m) => h('tr', {
          class: 'clickable', title: 'Find its calls in the trace', onclick: () => { this.showTab('timeline'); this.search(m.operation, 0, true); },
        },
        h('td', null, m.operation), h('td', { class: 'muted' }, m.component), h('td', { class: 'num' }, fmtNum(m.calls)),
        h('td', { class: 'num' + (m.errors ? ' err' : '') }, fmtNum(m.errors)), h('td', { class: 'num' }, fmtDur(m.totalNs)),
        h('td', { class: 'num' }, fmtDur(m.selfNs)), h('td', { class: 'num' }, fmtDur(m.minNs)), h('td', { class: 'num' }, fmtDur(m.maxNs)))));
      };
      draw();
      fill(p, h('div', { class: 'muted' }, `${fmtNum(r.rows.length)} operations` + (r.rows.length > limit ? `, the first ${fmtNum(limit)} shown` : '') +
        '. Click a column to sort, a row to find its calls.'),
      h('table', { class: 'grid', id: 'rank-table' }, h('thead', null, head), body));
    });
  }
}

function plural(n, word) { return `${fmtNum(n)} ${word}${n === 1 ? '' : 's'}`; }

// ready marks the moment the page is drawn (the timeline and the tree,
// when it opens on them) for tests and the benchmark: a performance mark
// and window.__tbTraceReady (ms since the navigation).
function ready(fetchMs) {
  if (window.__tbTraceReady !== undefined) return;
  performance.mark('tb-trace-ready');
  window.__tbTraceReady = performance.now();
  window.__tbTraceFetchMs = fetchMs;
}

// parseExpansions reads x=ROOT.MAX,ROOT.MAX (MAX at most what /view
// takes: 200000).
export function parseExpansions(s) {
  if (!s) return [];
  return s.split(',').map((p) => p.split('.').map(Number)).filter(([r, m]) => Number.isInteger(r) && r >= 0 && m > 0)
    .map(([r, m]) => [r, Math.min(200000, Math.max(1, Math.floor(m)))]).slice(0, 50);
}
