package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

const graphConfig = `flush_interval: 100ms
traces: {window: 200ms}
receivers:
  - {name: otlp, type: otlp-http, listen: "127.0.0.1:0"}
sinks:
  - {type: store, path: store}
`

// checkoutRequest is one request across six services, sent with the
// OpenTelemetry SDK: frontend → cart → payment → postgres, cart → redis,
// frontend → recommendation (with 'Entry', a 7-node operation graph).
func checkoutRequest(svcs map[string]*otlpService) {
	type call struct{ svc, op string }
	var run func(parent context.Context, c call, kids map[string][]call)
	tree := map[string][]call{
		"GET /checkout":         {{"cart", "CartService/GetCart"}, {"recommendation", "ListRecommendations"}},
		"CartService/GetCart":   {{"payment", "PaymentService/Charge"}, {"redis", "redis.GET"}},
		"PaymentService/Charge": {{"postgres", "postgres.query"}},
	}
	run = func(parent context.Context, c call, kids map[string][]call) {
		remote := oteltrace.ContextWithRemoteSpanContext(context.Background(), oteltrace.SpanContextFromContext(parent))
		ctx, s := svcs[c.svc].tr.Start(remote, c.op, oteltrace.WithSpanKind(oteltrace.SpanKindServer))
		for _, k := range kids[c.op] {
			run(ctx, k, kids)
		}
		s.End()
	}
	run(context.Background(), call{"frontend", "GET /checkout"}, tree)
}

// firstViewProblems answers what in the dependency graph's first view a
// user cannot read or reach: a node name or edge label drawn below 11 px,
// or a node or label outside what the graph's box shows or scrolls to.
const firstViewProblems = `(() => {
	const box = document.querySelector('.graph-box'), svg = box.querySelector('svg.graph');
	const b = box.getBoundingClientRect(), s = svg.getBoundingClientRect();
	const cs = getComputedStyle(box);
	const scrolls = (o) => o === 'auto' || o === 'scroll';
	const W = scrolls(cs.overflowX) ? box.scrollWidth : box.clientWidth, H = scrolls(cs.overflowY) ? box.scrollHeight : box.clientHeight;
	const out = [];
	const reach = (what, r) => {
		// Its place in the box's content (what scrolling reaches).
		const x = r.left - b.left - box.clientLeft + box.scrollLeft, y = r.top - b.top - box.clientTop + box.scrollTop;
		if (x < -0.5 || y < -0.5 || x + r.width > W + 0.5 || y + r.height > H + 0.5) out.push(what + ' is out of reach at ' + [x, y, r.width, r.height].map(Math.round) + ' of ' + [W, H]);
		if (r.left < s.left - 0.5 || r.top < s.top - 0.5 || r.right > s.right + 0.5 || r.bottom > s.bottom + 0.5) out.push(what + ' is clipped by the drawing');
	};
	const size = (what, t) => {
		const px = t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize);
		if (px < 10.95) out.push(what + ' is ' + px.toFixed(1) + ' px');
	};
	for (const g of svg.querySelectorAll('g.node')) {
		const name = g.querySelector('text').textContent;
		reach('node ' + name, g.querySelector('rect').getBoundingClientRect());
		size('the name of ' + name, g.querySelector('text.main'));
	}
	for (const g of svg.querySelectorAll('.edge-label')) {
		reach('edge label ' + g.textContent, g.querySelector('rect').getBoundingClientRect());
		size('edge label ' + g.textContent, g.querySelector('text'));
	}
	return out.join('; ');
})()`

// TestWebGraphFirstViewReadable: the dependency graph's first view shows
// a 7-node OpenTelemetry graph (sent with the SDK over OTLP) with its
// names and labels at least 11 px, and every node and label within reach:
// in view when it fits (a big window), else a scroll away (narrower
// windows), never clipped.
func TestWebGraphFirstViewReadable(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, graphConfig), "--http", "127.0.0.1:0")
	w := &webBridge{p: p, base: httpURL(t, p)}
	svcs := map[string]*otlpService{}
	for _, name := range []string{"frontend", "cart", "payment", "postgres", "redis", "recommendation"} {
		svcs[name] = newOTLPService(t, name, "", p.Addr("otlp"), "", false)
	}
	for range 5 {
		checkoutRequest(svcs)
	}
	pollFor(t, func() bool {
		var g apiGraph
		w.apiJSON(t, "/api/v1/analysis/graph?kind=assembly-operation", "", &g)
		return len(g.Graph.Nodes) == 7
	})
	ctx := browser(t)
	for _, vp := range []struct {
		w, h int64
		fits bool
	}{{2600, 1400, true}, {1400, 900, false}, {1200, 800, false}, {900, 700, false}} {
		t.Run(fmt.Sprintf("%dx%d", vp.w, vp.h), func(t *testing.T) {
			act(t, ctx, "size the window", chromedp.EmulateViewport(vp.w, vp.h))
			openView(t, ctx, w, "/analysis?kind=assembly-operation")
			waitJS(t, ctx, "the graph", `document.querySelectorAll('svg.graph g.node').length === 7`)
			shot(t, ctx, fmt.Sprintf("graph-first-view-%dx%d", vp.w, vp.h))
			if bad := eval[string](t, ctx, firstViewProblems); bad != "" {
				t.Errorf("the first view: %s", bad)
			}
			if !strings.Contains(eval[string](t, ctx, `[...document.querySelectorAll('svg.graph g.node title')].map((x) => x.textContent).join('|')`), "postgres.query") {
				t.Error("no node postgres.query")
			}
			scrolled := eval[bool](t, ctx, `(() => { const b = document.querySelector('.graph-box'); return b.scrollWidth > b.clientWidth || b.scrollHeight > b.clientHeight; })()`)
			if vp.fits && scrolled {
				t.Error("the graph fits this window and the first view scrolls")
			}
			checkCSP(t, ctx)
		})
	}
}
