package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// getJSON fetches an API address and decodes its answer.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, b := apiGet(t, "GET", url, "", "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// apiView is what the tests read of a trace view.
type apiView struct {
	SpanCount  int        `json:"spanCount"`
	Slowest    int        `json:"slowest"`
	ErrorSpans []int      `json:"errorSpans"`
	Spans      []viewSpan `json:"spans"`
}

type viewSpan struct {
	Index       int    `json:"index"`
	DurationNs  int64  `json:"durationNs"`
	Operation   string `json:"operation"`
	SelfNs      int64  `json:"selfNs"`
	Descendants int    `json:"descendants"`
}

// treeRows is the call tree's rows as the page shows them: index and
// operation.
func treeRows(t *testing.T, ctx context.Context) []string {
	return eval[[]string](t, ctx, `[...document.querySelectorAll('#trace-tree .tr-row')].map(r => r.dataset.index + ' ' + r.querySelector('.tr-op').textContent)`)
}

func selectedIndex(t *testing.T, ctx context.Context) int {
	return eval[int](t, ctx, `(() => { const r = document.querySelector('#trace-tree .tr-row.selected'); return r ? Number(r.dataset.index) : -1; })()`)
}

func pageQuery(t *testing.T, ctx context.Context) url.Values {
	u, err := url.Parse(eval[string](t, ctx, "location.href"))
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// openTrace opens a trace page and waits until its timeline and tree
// are drawn.
func openTrace(t *testing.T, ctx context.Context, base, path string) {
	t.Helper()
	act(t, ctx, "open "+path, chromedp.Navigate(base+path))
	waitJS(t, ctx, "the trace page drawn", `window.__tbTraceReady !== undefined`)
}

// noBanner fails the test when the page shows an error across the top
// (an exception the view did not handle).
func noBanner(t *testing.T, ctx context.Context) {
	t.Helper()
	if msg := eval[string](t, ctx, `(() => { const b = document.getElementById('banner'); return b.hidden ? '' : b.textContent; })()`); msg != "" {
		t.Errorf("the page shows an error: %s", msg)
	}
}

// TestWebTrace: the trace page and the comparison in Chromium, on
// traces the real OpenTelemetry SDK, a Kieker log and a ZICO agent sent
// to the real binary.
func TestWebTrace(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	// An OpenTelemetry trace with an error (request 3: Reserve fails).
	var otel, otelOK webTrace
	for _, tr := range w.traces {
		if strings.HasPrefix(tr.Host, "frontend") && tr.Error && otel.TraceID == "" {
			otel = tr
		}
		if strings.HasPrefix(tr.Host, "frontend") && !tr.Error && otelOK.TraceID == "" {
			otelOK = tr
		}
	}
	if otel.TraceID == "" || otelOK.TraceID == "" {
		t.Fatalf("no OpenTelemetry traces with and without errors in %v", w.traces)
	}
	api := w.base + "/api/v1/traces/" + otel.TraceID
	var full apiView
	getJSON(t, api+"/view?maxSpans=200000", &full)

	t.Run("Rows", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		var want []string
		for _, s := range full.Spans {
			want = append(want, fmt.Sprintf("%d %s", s.Index, s.Operation))
		}
		got := treeRows(t, ctx)
		if !slices.Equal(got, want) {
			t.Errorf("rows %q, want %q", got, want)
		}
		for _, op := range []string{"GET /cart", "checkout.Pay", "Pay", "inventory.Reserve#0", "Reserve"} {
			if !slices.ContainsFunc(got, func(r string) bool { return strings.HasSuffix(r, " "+op) }) {
				t.Errorf("no row %q in %q", op, got)
			}
		}
		head := eval[string](t, ctx, `document.querySelector('.trace-head').innerText`)
		for _, s := range []string{otel.TraceID, fmt.Sprintf("%d spans", full.SpanCount), "1 error", "frontend-host", "checkout-host", "inventory-host", "Compare with"} {
			if !strings.Contains(head, s) {
				t.Errorf("header %q lacks %q", head, s)
			}
		}
		noBanner(t, ctx)
	})

	t.Run("Collapse", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		pay := slices.IndexFunc(full.Spans, func(s viewSpan) bool { return s.Operation == "Pay" })
		before := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`)
		sel := fmt.Sprintf(`#trace-tree .tr-row[data-index="%d"] .tr-tog`, full.Spans[pay].Index)
		act(t, ctx, "collapse Pay", chromedp.Click(css(sel)))
		after := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`)
		if before != len(full.Spans) || after != before-full.Spans[pay].Descendants {
			t.Errorf("rows %d, after collapsing Pay (%d descendants) %d", before, full.Spans[pay].Descendants, after)
		}
		if n := len(treeRows(t, ctx)); n != after {
			t.Errorf("%d rows drawn, %d counted", n, after)
		}
		act(t, ctx, "expand Pay", chromedp.Click(css(sel)))
		if n := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`); n != before {
			t.Errorf("after expanding again: %d rows, want %d", n, before)
		}
		noBanner(t, ctx)
	})

	t.Run("Slowest", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		want, most := -1, int64(-1)
		for _, s := range full.Spans {
			if s.SelfNs > most {
				want, most = s.Index, s.SelfNs
			}
		}
		act(t, ctx, "go to slowest", chromedp.Click(css("#go-slowest")))
		waitJS(t, ctx, "the slowest span selected", fmt.Sprintf(`document.querySelector('#trace-tree .tr-row.selected[data-index="%d"]')`, want))
		if q := pageQuery(t, ctx); q.Get("span") != fmt.Sprint(want) {
			t.Errorf("address %v, want span=%d", q, want)
		}
		waitJS(t, ctx, "its details", fmt.Sprintf(`document.querySelector('#span-details').dataset.index === "%d"`, want))
		noBanner(t, ctx)
	})

	t.Run("Errors", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		if len(full.ErrorSpans) != 1 {
			t.Fatalf("the API lists errors %v", full.ErrorSpans)
		}
		act(t, ctx, "next error", chromedp.Click(css("#next-error")))
		waitJS(t, ctx, "the error selected", fmt.Sprintf(`document.querySelector('#trace-tree .tr-row.selected.is-error[data-index="%d"]')`, full.ErrorSpans[0]))
		waitJS(t, ctx, "its status in the details", `document.querySelector('#span-details').innerText.includes('out of stock')`)
		if s := eval[string](t, ctx, `document.querySelector('#error-pos').textContent`); s != "error 1 of 1" {
			t.Errorf("error position %q", s)
		}
		act(t, ctx, "previous error (wraps)", chromedp.Click(css("#go-slowest")), chromedp.Click(css("#prev-error")))
		waitJS(t, ctx, "the error selected again", fmt.Sprintf(`document.querySelector('#trace-tree .tr-row.selected.is-error[data-index="%d"]')`, full.ErrorSpans[0]))
		noBanner(t, ctx)
	})

	t.Run("Search", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		var found struct {
			Count int
			Hits  []struct{ Index int }
		}
		getJSON(t, api+"/find?q=reserve&ignoreCase", &found)
		if found.Count < 2 {
			t.Fatalf("the API finds %+v", found)
		}
		act(t, ctx, "search", chromedp.SendKeys(css("#find-input"), "reserve\r"))
		waitJS(t, ctx, "the first hit", fmt.Sprintf(`document.querySelector('#find-count').textContent === "1 / %d"`, found.Count))
		if got := selectedIndex(t, ctx); got != found.Hits[0].Index {
			t.Errorf("first hit: selected %d, want %d", got, found.Hits[0].Index)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('#trace-tree .tr-row.hit').length`); n != found.Count {
			t.Errorf("%d rows marked as hits, want %d", n, found.Count)
		}
		act(t, ctx, "next hit", chromedp.Click(css("#next-hit")))
		waitJS(t, ctx, "the second hit", fmt.Sprintf(`document.querySelector('#find-count').textContent === "2 / %d"`, found.Count))
		if got := selectedIndex(t, ctx); got != found.Hits[1].Index {
			t.Errorf("second hit: selected %d, want %d", got, found.Hits[1].Index)
		}
		act(t, ctx, "previous hit", chromedp.Click(css("#prev-hit")), chromedp.Click(css("#prev-hit")))
		waitJS(t, ctx, "the last hit (wrapped)", fmt.Sprintf(`document.querySelector('#find-count').textContent === "%d / %d"`, found.Count, found.Count))
		q := pageQuery(t, ctx)
		if q.Get("find") != "reserve" || q.Get("span") != fmt.Sprint(found.Hits[found.Count-1].Index) {
			t.Errorf("address %v", q)
		}
		// The address reproduces the view: reload it.
		act(t, ctx, "reload", chromedp.Reload())
		waitJS(t, ctx, "the page again", `window.__tbTraceReady !== undefined && document.querySelector('#trace-tree .tr-row.selected')`)
		waitJS(t, ctx, "the search again", fmt.Sprintf(`document.querySelector('#find-count').textContent === "%d / %d"`, found.Count, found.Count))
		if got := selectedIndex(t, ctx); got != found.Hits[found.Count-1].Index {
			t.Errorf("after a reload: selected %d, want %d", got, found.Hits[found.Count-1].Index)
		}
		noBanner(t, ctx)
	})

	t.Run("Details", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		act(t, ctx, "select the root", chromedp.Click(css(`#trace-tree .tr-row[data-index="0"]`)))
		waitJS(t, ctx, "the root's details", `document.querySelector('#span-details').dataset.index === "0"`)
		text := eval[string](t, ctx, `document.querySelector('#span-details').innerText`)
		for _, s := range []string{"GET /cart", "request", "frontend-host", "server", "Attributes"} {
			if !strings.Contains(text, s) {
				t.Errorf("details %q lack %q", text, s)
			}
		}
		noBanner(t, ctx)
	})

	t.Run("Timeline", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		if ink := canvasInk(t, ctx, "#tl-canvas"); ink < 3000 {
			t.Errorf("the timeline has %d pixels of ink", ink)
		}
		// Three hosts: three lanes at least, and arrows where a call
		// crosses to another one (checkout.Pay → Pay, each
		// inventory.Reserve#N → Reserve).
		lanes := eval[int](t, ctx, `window.__tbTimeline.lay.lanes.length`)
		links := eval[int](t, ctx, `window.__tbTimeline.lay.links.length`)
		reserves := 0
		for _, s := range full.Spans {
			if s.Operation == "Reserve" {
				reserves++
			}
		}
		if lanes < 3 || links != 1+reserves {
			t.Errorf("%d lanes, %d cross-lane links (want %d)", lanes, links, 1+reserves)
		}
		// Lanes by service: one a service; the address keeps it.
		eval[bool](t, ctx, `(() => { const s = document.querySelector('#tl-lanes'); s.value = 'service'; s.dispatchEvent(new Event('change')); return true; })()`)
		if n := eval[int](t, ctx, `window.__tbTimeline.lay.lanes.length`); n != 3 || pageQuery(t, ctx).Get("lanes") != "service" {
			t.Errorf("lanes by service: %d lanes, address %v", n, pageQuery(t, ctx))
		}
		w0 := eval[float64](t, ctx, `window.__tbTimeline.t1 - window.__tbTimeline.t0`)
		act(t, ctx, "zoom in", chromedp.Click(css("#zoom-in")))
		if w1 := eval[float64](t, ctx, `window.__tbTimeline.t1 - window.__tbTimeline.t0`); w1 > w0*0.51 {
			t.Errorf("zoom in: window %v → %v", w0, w1)
		}
		// A wheel with ctrl zooms out again around the cursor.
		eval[bool](t, ctx, `document.querySelector('#tl-canvas').dispatchEvent(new WheelEvent('wheel', {deltaY: 400, ctrlKey: true, clientX: 600, clientY: 300, bubbles: true, cancelable: true}))`)
		if w2 := eval[float64](t, ctx, `window.__tbTimeline.t1 - window.__tbTimeline.t0`); w2 <= w0*0.51 {
			t.Errorf("ctrl+wheel did not zoom out: %v", w2)
		}
		// The axis's labels: on the canvas and all different, over the
		// whole trace and zoomed in to 20 µs a third into it (where
		// three digits would label every tick alike).
		for _, zoom := range []string{`tl.reset()`, `tl.t0 = tl.start + Math.round((tl.end - tl.start) / 3); tl.t1 = tl.t0 + 20000`} {
			labels := eval[[]string](t, ctx, `(() => { const tl = window.__tbTimeline; `+zoom+`; tl.draw();
				const W = tl.canvas.clientWidth;
				return tl.axisLabels().map((l) => l.x >= 0 && l.x + l.w <= W ? l.text : 'off the canvas: ' + l.text); })()`)
			seen := map[string]bool{}
			for _, l := range labels {
				if seen[l] || strings.HasPrefix(l, "off") {
					t.Errorf("after %s the axis reads %q", zoom, labels)
					break
				}
				seen[l] = true
			}
			if len(labels) < 4 {
				t.Errorf("after %s the axis has %d labels: %q", zoom, len(labels), labels)
			}
		}
		// Within a lane, spans that run at once get rows of their own,
		// below their parent: no two bars in a row overlap (this trace
		// in each lane mode, and a fan-out of concurrent calls of a
		// service without threads), so a click can reach each.
		if bad := eval[string](t, ctx, `(async () => {
			const m = await import('/ui/js/timeline.js');
			const check = (spans, mode) => {
				const lay = m.layout(spans, mode);
				for (const row of lay.rows) {
					let end = -Infinity;
					for (const i of row.items) {
						if (spans[i].offsetNs < end) return mode + ': spans overlap in a row of lane ' + row.lane.name;
						end = spans[i].offsetNs + spans[i].durationNs;
					}
				}
				for (let i = 0; i < spans.length; i++) {
					const p = spans[i].parentPos;
					if (p >= 0 && lay.rows[lay.rowOf[p]].lane === lay.rows[lay.rowOf[i]].lane && lay.rowOf[p] >= lay.rowOf[i]) return mode + ': span ' + i + ' is not below its parent';
				}
				return '';
			};
			for (const mode of m.laneModes) { const b = check(window.__tbTimeline.spans, mode); if (b) return b; }
			const at = (parentPos, depth, offsetNs, durationNs, thread) => ({ parentPos, depth, offsetNs, durationNs, host: 'h', service: 's', thread });
			const fan = [at(-1, 0, 0, 100)];
			for (let k = 0; k < 4; k++) { const c = fan.length; fan.push(at(0, 1, 10 + k, 50), at(c, 2, 12 + k, 20)); }
			const b = check(fan, 'thread');
			if (b) return 'fan-out: ' + b;
			const lay = m.layout(fan, 'thread');
			const rows = new Set([1, 3, 5, 7].map((i) => lay.rowOf[i]));
			if (lay.lanes.length !== 1 || rows.size !== 4) return 'fan-out: ' + lay.lanes.length + ' lanes, the 4 calls in ' + rows.size + ' rows';
			// A service whose root span says its thread: its lanes all
			// name the service.
			const names = m.layout([at(-1, 0, 0, 100, '17'), at(0, 1, 10, 50)], 'thread').lanes.map((l) => l.name).join(' | ');
			if (names !== 'h · s · 17 | h · s') return 'lanes ' + names;
			return '';
		})()`); bad != "" {
			t.Error(bad)
		}
		act(t, ctx, "whole trace", chromedp.Click(css("#zoom-reset")), chromedp.Click(css("#next-error")))
		waitJS(t, ctx, "the error's details", `document.querySelector('#span-details').innerText.includes('out of stock')`)
		shot(t, ctx, "trace-timeline")
		// The critical path: highlighted in the timeline and the tree.
		act(t, ctx, "critical path on", chromedp.Click(css("#crit-toggle")))
		waitJS(t, ctx, "the critical path drawn", `Number(document.querySelector('.tl-box').dataset.critical) > 0 && document.querySelector('#trace-tree .tr-row.crit')`)
		if pageQuery(t, ctx).Get("crit") != "1" {
			t.Errorf("the address does not keep the critical path")
		}
		var cp struct{ Spans []struct{ Index int } }
		getJSON(t, api+"/critical-path", &cp)
		if n := eval[int](t, ctx, `document.querySelectorAll('#trace-tree .tr-row.crit').length`); n != len(cp.Spans) {
			t.Errorf("%d tree rows on the critical path, the API says %d", n, len(cp.Spans))
		}
		act(t, ctx, "critical path off", chromedp.Click(css("#crit-toggle")))
		if n := eval[int](t, ctx, `document.querySelectorAll('#trace-tree .tr-row.crit').length`); n != 0 {
			t.Errorf("%d rows still marked", n)
		}
		// Clicking a bar selects its span.
		act(t, ctx, "click the root's bar", chromedp.Click(css("#zoom-reset")))
		eval[bool](t, ctx, `(() => {
			const c = document.querySelector('#tl-canvas'), r = c.getBoundingClientRect(), tl = window.__tbTimeline;
			const s = tl.spans[0], x = r.left + tl.x(s.offsetNs + s.durationNs / 2), y = r.top + tl.y(tl.lay.rowOf[0]) + 8;
			for (const type of ['mousedown', 'mouseup']) c.dispatchEvent(new MouseEvent(type, {clientX: x, clientY: y, bubbles: true}));
			return true;
		})()`)
		waitJS(t, ctx, "the root selected from the timeline", `document.querySelector('#trace-tree .tr-row.selected[data-index="0"]')`)
		noBanner(t, ctx)
	})

	t.Run("Flame", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		act(t, ctx, "flame tab", chromedp.Click(css("#tab-flame")))
		waitJS(t, ctx, "the flame graph", `document.querySelector('#flame-canvas') && Number(document.querySelector('#flame-canvas').dataset.frames) > 3`)
		if ink := canvasInk(t, ctx, "#flame-canvas"); ink < 3000 {
			t.Errorf("the flame graph has %d pixels of ink", ink)
		}
		shot(t, ctx, "trace-flame")
		// Click the checkout.Pay frame: it becomes the whole width.
		n := eval[int](t, ctx, `(() => {
			const c = document.querySelector('#flame-canvas'), b = c.getBoundingClientRect();
			const r = window.__tbFlame.rects.find(r => r.node.name === 'checkout.Pay');
			c.dispatchEvent(new MouseEvent('click', {clientX: b.left + r.x + r.w / 2, clientY: b.top + r.y + 5, bubbles: true}));
			return window.__tbFlame.path.length;
		})()`)
		if n != 3 {
			t.Errorf("after a click on checkout.Pay the zoom path has %d frames", n)
		}
		// The crumbs are drawn with the frame, on the next animation frame.
		waitJS(t, ctx, "the crumbs to checkout.Pay", `document.querySelector('.flame-crumbs').innerText.includes('checkout.Pay')`)
		if q := pageQuery(t, ctx); q.Get("tab") != "flame" || !strings.Contains(q.Get("fz"), "checkout.Pay") {
			t.Errorf("address %v", q)
		}
		act(t, ctx, "icicle tab", chromedp.Click(css("#tab-icicle")))
		waitJS(t, ctx, "the icicle drawn", `document.querySelector('#flame-canvas').dataset.mode === 'icicle'`)
		if ink := canvasInk(t, ctx, "#flame-canvas"); ink < 3000 {
			t.Errorf("the icicle has %d pixels of ink", ink)
		}
		noBanner(t, ctx)
	})

	t.Run("Ranking", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID+"?tab=rank")
		var rank struct {
			Rows []struct {
				Operation string
				Calls     int
			}
		}
		getJSON(t, api+"/rank", &rank)
		waitJS(t, ctx, "the ranking", `document.querySelector('#rank-table tbody tr')`)
		if n := eval[int](t, ctx, `document.querySelectorAll('#rank-table tbody tr').length`); n != len(rank.Rows) {
			t.Errorf("%d ranking rows, the API has %d", n, len(rank.Rows))
		}
		most := 0
		for _, r := range rank.Rows {
			most = max(most, r.Calls)
		}
		act(t, ctx, "sort by calls", chromedp.Click(css(`#rank-table th[data-key="calls"]`)))
		if s := eval[string](t, ctx, `document.querySelector('#rank-table tbody tr td:nth-child(3)').textContent`); s != fmt.Sprint(most) {
			t.Errorf("sorted by calls, the first row has %s calls, want %d", s, most)
		}
		noBanner(t, ctx)
	})

	t.Run("CriticalPath", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID+"?tab=critical")
		var cp struct{ Spans []struct{ Index int } }
		getJSON(t, api+"/critical-path", &cp)
		waitJS(t, ctx, "the critical path", `document.querySelector('#critical-table tbody tr')`)
		if n := eval[int](t, ctx, `document.querySelectorAll('#critical-table tbody tr').length`); n != len(cp.Spans) || n == 0 {
			t.Errorf("%d rows on the critical path, the API has %d", n, len(cp.Spans))
		}
		act(t, ctx, "highlight", chromedp.Click(css("#crit-show")))
		waitJS(t, ctx, "the timeline with the path", `Number(document.querySelector('.tl-box').dataset.critical) > 0 && document.querySelector('#crit-toggle').checked`)
		noBanner(t, ctx)
	})

	t.Run("Pruned", func(t *testing.T) {
		// The Kieker trace, cut to 3 spans: expanding a pruned marker
		// shows more, and the address keeps the expansion.
		k := w.find(t, "realclients")
		var v apiView
		getJSON(t, w.base+"/api/v1/traces/"+url.PathEscape(k.TraceID)+"/view?maxSpans=200000", &v)
		if v.SpanCount < 5 {
			t.Fatalf("the Kieker trace has %d spans", v.SpanCount)
		}
		openTrace(t, ctx, w.base, "/trace/"+url.PathEscape(k.TraceID)+"?max=3")
		if n := len(treeRows(t, ctx)); n != 3 {
			t.Errorf("%d rows with max=3", n)
		}
		act(t, ctx, "expand", chromedp.Click(css(".tr-pruned")))
		waitJS(t, ctx, "more rows", `Number(document.querySelector('#trace-tree').dataset.rows) > 3`)
		if q := pageQuery(t, ctx); q.Get("x") == "" {
			t.Errorf("address %v lacks the expansion", q)
		}
		shown := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`)
		x := pageQuery(t, ctx).Get("x")
		act(t, ctx, "reload", chromedp.Reload())
		waitJS(t, ctx, "the page again", `window.__tbTraceReady !== undefined`)
		if n := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`); n != shown {
			t.Errorf("after a reload %d rows, before %d", n, shown)
		}
		// An edited address: an expansion of a root the trace does not
		// have is dropped, one of more than /view takes is cut to 200000;
		// the page opens with the rest.
		root := strings.SplitN(x, ".", 2)[0]
		openTrace(t, ctx, w.base, "/trace/"+url.PathEscape(k.TraceID)+"?max=3&x=99999999.5,"+root+".900000")
		if n := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`); n <= 3 || n > v.SpanCount {
			t.Errorf("with an edited expansion %d rows", n)
		}
		if q := pageQuery(t, ctx); q.Get("x") != root+".900000" && q.Get("x") != root+".200000" {
			t.Errorf("with an edited expansion the address is %v", q)
		}
		noBanner(t, ctx)
		// A search hit the page does not hold is fetched (reveal) and
		// selected: the last span of the trace.
		openTrace(t, ctx, w.base, "/trace/"+url.PathEscape(k.TraceID)+"?max=3")
		last := v.Spans[len(v.Spans)-1]
		if eval[bool](t, ctx, fmt.Sprintf(`!!document.querySelector('#trace-tree .tr-row[data-index="%d"]')`, last.Index)) {
			t.Fatalf("the last span %d is shown already", last.Index)
		}
		var found struct {
			Hits []struct{ Index int }
		}
		getJSON(t, w.base+"/api/v1/traces/"+url.PathEscape(k.TraceID)+"/find?ignoreCase&q="+url.QueryEscape(last.Operation), &found)
		k0 := slices.IndexFunc(found.Hits, func(h struct{ Index int }) bool { return h.Index == last.Index })
		act(t, ctx, "search the last span", chromedp.SendKeys(css("#find-input"), last.Operation+"\r"))
		// Step by step: the search answers after /find (a click on ▶
		// before it is lost), and a hit the page does not hold is
		// selected after its /view?reveal= (two steps at once could end
		// on the earlier hit).
		for k := 0; k < k0; k++ {
			waitJS(t, ctx, fmt.Sprintf("hit %d selected", k+1), fmt.Sprintf(`document.querySelector('#find-count').textContent.startsWith('%d / ') && document.querySelector('#trace-tree .tr-row.selected[data-index="%d"]')`, k+1, found.Hits[k].Index))
			act(t, ctx, "next hit", chromedp.Click(css("#next-hit")))
		}
		waitJS(t, ctx, "the hidden hit revealed and selected", fmt.Sprintf(`document.querySelector('#trace-tree .tr-row.selected[data-index="%d"]')`, last.Index))
		// Kieker's positions in the details.
		waitJS(t, ctx, "its details", fmt.Sprintf(`document.querySelector('#span-details').dataset.index === "%d"`, last.Index))
		text := eval[string](t, ctx, `document.querySelector('#span-details').innerText`)
		for _, s := range []string{"Kieker record", "eoi", "ess", "orderIndex", "realclients-host"} {
			if !strings.Contains(text, s) {
				t.Errorf("details %q lack %q", text, s)
			}
		}
		shot(t, ctx, "trace-kieker")
		noBanner(t, ctx)
	})

	t.Run("MinDuration", func(t *testing.T) {
		k := w.find(t, "realclients")
		var all, some apiView
		getJSON(t, w.base+"/api/v1/traces/"+url.PathEscape(k.TraceID)+"/view", &all)
		// A threshold in the middle of the spans' durations.
		durs := []int64{}
		for _, s := range all.Spans {
			durs = append(durs, s.DurationNs)
		}
		slices.Sort(durs)
		min := time.Duration(durs[len(durs)/2]).String()
		getJSON(t, w.base+"/api/v1/traces/"+url.PathEscape(k.TraceID)+"/view?minDuration="+url.QueryEscape(min), &some)
		if len(some.Spans) >= len(all.Spans) {
			t.Fatalf("minDuration %s prunes nothing", min)
		}
		openTrace(t, ctx, w.base, "/trace/"+url.PathEscape(k.TraceID))
		act(t, ctx, "min duration", chromedp.SendKeys(css("#min-duration"), min+"\t"))
		waitJS(t, ctx, "the pruned view", fmt.Sprintf(`Number((document.querySelector('#trace-tree') || {dataset: {}}).dataset.rows) === %d`, len(some.Spans)))
		if q := pageQuery(t, ctx); q.Get("min") != min {
			t.Errorf("address %v, want min=%s", q, min)
		}
		// A duration the API refuses: said at the top, the page kept.
		act(t, ctx, "a bad duration", chromedp.SendKeys(css("#min-duration"), "x\t"))
		waitJS(t, ctx, "the API's message", `!document.getElementById('banner').hidden && document.getElementById('banner').textContent.includes('minDuration')`)
		if n := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`); n != len(some.Spans) || pageQuery(t, ctx).Get("min") != min {
			t.Errorf("after a bad duration: %d rows, address %v", n, pageQuery(t, ctx))
		}
		act(t, ctx, "back to the page", chromedp.Navigate(w.base+"/trace/"+url.PathEscape(k.TraceID)+"?span=999999"))
		waitJS(t, ctx, "the page without the unknown span", `window.__tbTraceReady !== undefined && document.querySelector('#trace-tree .tr-row')`)
		noBanner(t, ctx)
	})

	t.Run("Zorka", func(t *testing.T) {
		// A trace from a ZICO agent: every span in the tree, the
		// timeline drawn.
		z := w.find(t, "zorka")
		var v apiView
		getJSON(t, w.base+"/api/v1/traces/"+url.PathEscape(z.TraceID)+"/view?maxSpans=200000", &v)
		openTrace(t, ctx, w.base, "/trace/"+url.PathEscape(z.TraceID))
		if n := eval[int](t, ctx, `Number(document.querySelector('#trace-tree').dataset.rows)`); n != len(v.Spans) || n != v.SpanCount {
			t.Errorf("%d rows, the trace has %d spans", n, v.SpanCount)
		}
		if ink := canvasInk(t, ctx, "#tl-canvas"); ink < 1000 {
			t.Errorf("the timeline has %d pixels of ink", ink)
		}
		noBanner(t, ctx)
	})

	t.Run("Unknown", func(t *testing.T) {
		id := "0123456789abcdef0123456789abcdef"
		code, b := apiGet(t, "GET", w.base+"/api/v1/traces/"+id+"/view", "", "")
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		if code != 404 || e.Error == "" {
			t.Fatalf("the API answers %d %s", code, b)
		}
		act(t, ctx, "open", chromedp.Navigate(w.base+"/trace/"+id))
		waitJS(t, ctx, "the error", `document.querySelector('#view .error')`)
		if s := eval[string](t, ctx, `document.querySelector('#view .error').textContent`); s != "404: "+e.Error {
			t.Errorf("the page says %q, the API %q", s, e.Error)
		}
		noBanner(t, ctx)
	})

	t.Run("Compare", func(t *testing.T) {
		openTrace(t, ctx, w.base, "/trace/"+otel.TraceID)
		act(t, ctx, "compare with", chromedp.Click(css(`.trace-head a[href^="/compare"]`)), chromedp.WaitVisible(css("#cmp-b")))
		// The trace page is gone, and its test hook with it.
		if eval[bool](t, ctx, `window.__tbTimeline !== undefined`) {
			t.Errorf("the timeline of the trace page left is still in window.__tbTimeline")
		}
		if v := eval[string](t, ctx, `document.querySelector('#cmp-a').value`); v != otel.TraceID {
			t.Errorf("a is %q", v)
		}
		act(t, ctx, "enter b", chromedp.SendKeys(css("#cmp-b"), otelOK.TraceID), chromedp.Click(css("#cmp-go")))
		waitJS(t, ctx, "the diff", `document.querySelector('#cmp-tree .cmp-row')`)
		var c struct {
			Nodes []struct {
				Parent int
				Status string
			}
			Counts map[string]int
		}
		getJSON(t, w.base+"/api/v1/compare?a="+otel.TraceID+"&b="+otelOK.TraceID, &c)
		if n := eval[int](t, ctx, `document.querySelectorAll('#cmp-tree .cmp-row').length`); n != len(c.Nodes) {
			t.Errorf("%d rows, the API merged %d paths", n, len(c.Nodes))
		}
		if c.Counts["changed"]+c.Counts["added"]+c.Counts["removed"] == 0 {
			t.Fatalf("the API finds no difference: %v", c.Counts)
		}
		for k, n := range c.Counts {
			if got := eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll('#cmp-tree .cmp-row[data-status=%q]').length`, k)); got != n {
				t.Errorf("%d rows %s, the API says %d", got, k, n)
			}
			if s := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('.cmp-count-%s').textContent`, k)); s != fmt.Sprintf("%d %s", n, k) {
				t.Errorf("count %q", s)
			}
		}
		q := pageQuery(t, ctx)
		if q.Get("a") != otel.TraceID || q.Get("b") != otelOK.TraceID {
			t.Errorf("address %v", q)
		}
		// Only differences: the paths that differ and their ancestors.
		keep := map[int]bool{}
		for i, n := range c.Nodes {
			for j := i; n.Status != "same" && j >= 0 && !keep[j]; j = c.Nodes[j].Parent {
				keep[j] = true
			}
		}
		act(t, ctx, "only differences", chromedp.Click(css("#cmp-diff-only")))
		if n := eval[int](t, ctx, `document.querySelectorAll('#cmp-tree .cmp-row').length`); n != len(keep) {
			t.Errorf("%d rows with differences only, want %d", n, len(keep))
		}
		shot(t, ctx, "trace-compare")
		act(t, ctx, "unknown b", chromedp.Navigate(w.base+"/compare?a="+otel.TraceID+"&b=0123456789abcdef0123456789abcdef"))
		waitJS(t, ctx, "the error", `document.querySelector('#cmp-result .error') && document.querySelector('#cmp-result .error').textContent.includes('not found')`)
		noBanner(t, ctx)
	})
	w.p.Stop()
}
