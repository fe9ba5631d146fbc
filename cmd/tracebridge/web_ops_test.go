package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// apiJSON gets an API path (a token may be "") and decodes its JSON.
func (w *webBridge) apiJSON(t *testing.T, path, token string, v any) {
	t.Helper()
	code, b := apiGet(t, "GET", w.base+path, "", token)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// openView loads the page at another view, installs watchers (CSP
// violations into window.cspViolations, every WebSocket the page opens
// into window.sockets), then lets the router show path: what the view
// does from its first moment is watched.
func openView(t *testing.T, ctx context.Context, w *webBridge, path string) {
	t.Helper()
	act(t, ctx, "open the page", chromedp.Navigate(w.base+"/compare"), chromedp.WaitVisible(css(`#nav a.active`)))
	eval[bool](t, ctx, `(() => {
		window.cspViolations = [];
		document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.sourceFile + ':' + e.lineNumber));
		window.sockets = [];
		const WS = window.WebSocket;
		window.WebSocket = class extends WS { constructor(...a) { super(...a); window.sockets.push(this); } };
		history.pushState(null, '', `+jsString(path)+`);
		window.dispatchEvent(new Event('tb-navigate'));
		return true;
	})()`)
}

// checkCSP fails the test if the page broke its content security policy
// (an inline style or script) since openView.
func checkCSP(t *testing.T, ctx context.Context) {
	t.Helper()
	if v := eval[[]string](t, ctx, `window.cspViolations || ['the watcher is gone (a reload?)']`); len(v) > 0 {
		t.Errorf("content security policy violations: %v", v)
	}
	if b := eval[string](t, ctx, `document.getElementById('banner').hidden ? '' : document.getElementById('banner').textContent`); b != "" {
		t.Errorf("the page's banner says %q", b)
	}
}

type apiGraph struct {
	Graph struct {
		Nodes []struct {
			ID        string  `json:"id"`
			Container *string `json:"container"`
			Component *string `json:"component"`
			Operation *string `json:"operation"`
		} `json:"nodes"`
		Edges []struct {
			From  string `json:"from"`
			To    string `json:"to"`
			Calls int64  `json:"calls"`
		} `json:"edges"`
	} `json:"graph"`
}

// domGraph is the graph the page drew: each node's id and the first line
// of its tooltip (the full name), each edge as "from>to=calls".
type domGraph struct {
	Nodes map[string]string
	Edges []string
}

func readDOMGraph(t *testing.T, ctx context.Context) domGraph {
	t.Helper()
	return eval[domGraph](t, ctx, `(() => {
		const nodes = {};
		for (const g of document.querySelectorAll('svg.graph g.node')) nodes[g.dataset.id] = g.querySelector('title').textContent.split('\n')[0];
		const edges = [...document.querySelectorAll('svg.graph g.edge')].map((g) => g.dataset.from + '>' + g.dataset.to + '=' + g.dataset.calls).sort();
		return {nodes, edges};
	})()`)
}

// checkGraph compares the drawn graph with the API's: every node drawn
// with its name, every edge with its calls.
func checkGraph(t *testing.T, ctx context.Context, w *webBridge, kind, query string) domGraph {
	t.Helper()
	var g apiGraph
	w.apiJSON(t, "/api/v1/analysis/graph?kind="+kind+query, "", &g)
	dom := readDOMGraph(t, ctx)
	if len(dom.Nodes) != len(g.Graph.Nodes) {
		t.Errorf("%s: %d nodes drawn, the API has %d", kind, len(dom.Nodes), len(g.Graph.Nodes))
	}
	for _, n := range g.Graph.Nodes {
		want := "'Entry'"
		switch {
		case n.Operation != nil:
			want = *n.Operation
		case n.Component != nil:
			want = *n.Component
		case n.Container != nil:
			want = *n.Container
		}
		if got, ok := dom.Nodes[n.ID]; !ok || !strings.HasPrefix(got, want) {
			t.Errorf("%s: node %s is drawn as %q, want %q", kind, n.ID, got, want)
		}
	}
	var want []string
	for _, e := range g.Graph.Edges {
		want = append(want, fmt.Sprintf("%s>%s=%d", e.From, e.To, e.Calls))
	}
	sort.Strings(want)
	if !slices.Equal(dom.Edges, want) {
		t.Errorf("%s: edges drawn %v, the API's %v", kind, dom.Edges, want)
	}
	return dom
}

func containerNames(d domGraph) []string {
	var out []string
	for _, n := range d.Nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestWebOpsAnalysisGraph: the analyses page draws the dependency graph
// of the stored traces (the OpenTelemetry services, the Kieker and zorka
// hosts) with the API's nodes and call counts; a click selects a node and
// lists its calls; the kind and the filters go into the address and
// change the graph.
func TestWebOpsAnalysisGraph(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	openView(t, ctx, w, "/analysis?kind=container")
	act(t, ctx, "open the container graph", chromedp.WaitVisible(css(`svg.graph g.node[data-id="n1"]`)))
	dom := checkGraph(t, ctx, w, "container", "")
	names := containerNames(dom)
	for _, s := range []string{"frontend", "checkout", "inventory", "realclients-host", "zorka-host"} {
		if !slices.Contains(names, s) {
			t.Errorf("no node %s in the container graph: %v", s, names)
		}
	}
	// The edge frontend → checkout is labelled with its calls (8: one
	// per request) and their response times.
	label := eval[string](t, ctx, `(() => {
		const ids = {};
		for (const g of document.querySelectorAll('svg.graph g.node')) ids[g.querySelector('title').textContent.split('\n')[0]] = g.dataset.id;
		const e = document.querySelector('svg.graph g.edge[data-from="' + ids.frontend + '"][data-to="' + ids.checkout + '"]');
		const i = [...document.querySelectorAll('svg.graph g.edge')].indexOf(e);
		return document.querySelector('svg.graph .edge-label[data-edge="' + i + '"]').textContent;
	})()`)
	if !strings.HasPrefix(label, "8×") || !strings.Contains(label, "max") {
		t.Errorf("the label of frontend → checkout is %q", label)
	}

	// A click on checkout: its calls in (from frontend) and out (to
	// inventory) are listed, the rest fades.
	id := eval[string](t, ctx, `[...document.querySelectorAll('svg.graph g.node')].find((g) => g.querySelector('title').textContent.startsWith('checkout')).dataset.id`)
	act(t, ctx, "select checkout", chromedp.Click(css(`svg.graph g.node[data-id="`+id+`"] rect`)))
	waitJS(t, ctx, "the details of checkout", `document.querySelector('.graph-side h3') && document.querySelector('.graph-side h3').textContent === 'checkout'`)
	side := eval[string](t, ctx, `document.querySelector('.graph-side').innerText`)
	if !strings.Contains(side, "Called by") || !strings.Contains(side, "frontend") || !strings.Contains(side, "inventory") {
		t.Errorf("the details of checkout: %q", side)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('svg.graph.focus g.edge.hl').length`); n != 2 {
		t.Errorf("%d edges of checkout highlighted, want 2", n)
	}
	if u := eval[string](t, ctx, "location.search"); !strings.Contains(u, "sel="+id) {
		t.Errorf("the selection is not in the address: %s", u)
	}

	// The operation graph: the Kieker operations and the OTel spans.
	act(t, ctx, "choose the operation graph",
		chromedp.SetValue(css(`.graph-tools select`), "assembly-operation"),
		chromedp.WaitVisible(css(`.graph-box[data-kind="assembly-operation"] svg.graph g.node`)))
	dom = checkGraph(t, ctx, w, "assembly-operation", "")
	ops := containerNames(dom)
	for _, s := range []string{"public long realclients.java.Bookstore.searchBook(long)", "GET /cart"} {
		if !slices.Contains(ops, s) {
			t.Errorf("no operation %s in the graph: %v", s, ops)
		}
	}
	if u := eval[string](t, ctx, "location.search"); !strings.Contains(u, "kind=assembly-operation") {
		t.Errorf("the kind is not in the address: %s", u)
	}
	// No two nodes overlap; every edge leaves its caller's column.
	if bad := eval[string](t, ctx, `(() => {
		const boxes = [...document.querySelectorAll('svg.graph g.node rect')].map((r) => r.getBoundingClientRect());
		for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
			const a = boxes[i], b = boxes[j];
			if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) return 'nodes ' + i + ' and ' + j + ' overlap';
		}
		return '';
	})()`); bad != "" {
		t.Error(bad)
	}
	// The first view is readable: never below 0.6 of the size (then the
	// Entry is at the left, the rest a pan away); no edge label overlaps
	// another or a node.
	if k := eval[float64](t, ctx, `+document.querySelector('svg.graph .viewport').getAttribute('transform').match(/scale\(([\d.]+)\)/)[1]`); k < 0.6 {
		t.Errorf("the first view's scale is %v", k)
	}
	if bad := eval[string](t, ctx, `(() => {
		const labels = [...document.querySelectorAll('svg.graph .edge-label rect')].map((r) => r.getBoundingClientRect());
		const nodes = [...document.querySelectorAll('svg.graph g.node rect')].map((r) => r.getBoundingClientRect());
		const over = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
		for (let i = 0; i < labels.length; i++) {
			for (let j = i + 1; j < labels.length; j++) if (over(labels[i], labels[j])) return 'labels ' + i + ' and ' + j + ' overlap';
			for (let j = 0; j < nodes.length; j++) if (over(labels[i], nodes[j])) return 'label ' + i + ' overlaps node ' + j;
		}
		return labels.length ? '' : 'no edge labels';
	})()`); bad != "" {
		t.Error(bad)
	}
	// The picture: GET /cart selected, its calls lit.
	cart := eval[string](t, ctx, `[...document.querySelectorAll('svg.graph g.node')].find((g) => g.querySelector('title').textContent.startsWith('GET /cart')).dataset.id`)
	act(t, ctx, "select GET /cart", chromedp.Click(css(`svg.graph g.node[data-id="`+cart+`"] rect`)))
	waitJS(t, ctx, "the details of GET /cart", `document.querySelector('.graph-side h3')?.textContent === 'GET /cart'`)
	shot(t, ctx, "analysis-graph")

	// The wheel zooms, a drag pans.
	before := eval[string](t, ctx, `document.querySelector('svg.graph .viewport').getAttribute('transform')`)
	act(t, ctx, "zoom", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.querySelector('svg.graph').dispatchEvent(new WheelEvent('wheel', {deltaY: -300, clientX: 400, clientY: 400, bubbles: true, cancelable: true}))`)(ctx, tg)
		return err
	}))
	zoomed := eval[string](t, ctx, `document.querySelector('svg.graph .viewport').getAttribute('transform')`)
	if zoomed == before || !strings.Contains(zoomed, "scale(") {
		t.Errorf("the wheel did not zoom: %s, then %s", before, zoomed)
	}
	// A drag moves the drawing, or scrolls the box when the drawing is
	// bigger than the box (a readable first view of a big graph).
	where := `document.querySelector('svg.graph .viewport').getAttribute('transform') + ' ' + document.querySelector('.graph-box').scrollLeft + ',' + document.querySelector('.graph-box').scrollTop`
	before = eval[string](t, ctx, where)
	eval[bool](t, ctx, `(() => {
		const svg = document.querySelector('svg.graph');
		const ev = (type, x, y) => svg.dispatchEvent(new PointerEvent(type, {clientX: x, clientY: y, button: 0, pointerId: 1, bubbles: true}));
		ev('pointerdown', 400, 700); ev('pointermove', 360, 660); ev('pointermove', 300, 600); ev('pointerup', 300, 600);
		return true;
	})()`)
	if panned := eval[string](t, ctx, where); panned == before {
		t.Errorf("a drag did not pan: %s", panned)
	}

	// Filters: the traces of service frontend only.
	act(t, ctx, "filter by service",
		chromedp.SetValue(css(`.filters input[name="service"]`), "frontend"),
		chromedp.Click(css(`.filters button[type="submit"]`)))
	waitJS(t, ctx, "the filtered graph", `location.search.includes('service=frontend') && document.querySelectorAll('svg.graph g.node').length > 1 && ![...document.querySelectorAll('svg.graph g.node title')].some((x) => x.textContent.startsWith('public long'))`)
	checkGraph(t, ctx, w, "assembly-operation", "&service=frontend")

	checkCSP(t, ctx)

	// A reload of the address shows the same view.
	act(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(css(`svg.graph g.node[data-id="n1"]`)))
	if v := eval[string](t, ctx, `document.querySelector('.filters input[name="service"]').value + ' ' + document.querySelector('.graph-tools select').value`); v != "frontend assembly-operation" {
		t.Errorf("after a reload the filters are %q", v)
	}
	checkGraph(t, ctx, w, "assembly-operation", "&service=frontend")
	w.p.Stop()
}

// TestWebOpsAnalysisTables: the operations' response times (sortable,
// the sort in the address), the pivot by a root attribute and the JFR
// flame graph's message when the bridge keeps no profiles.
func TestWebOpsAnalysisTables(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	var ops struct {
		Operations []struct {
			Operation string
			Count     int64
			TotalNs   int64
		}
	}
	w.apiJSON(t, "/api/v1/analysis/operations", "", &ops)
	openView(t, ctx, w, "/analysis?tab=operations")
	act(t, ctx, "open the operations", chromedp.WaitVisible(css(`.vtable tbody tr td`)))
	if n := eval[int](t, ctx, `+document.querySelector('.vtable-box').dataset.rows`); n != len(ops.Operations) {
		t.Errorf("%d operations in the table, the API has %d", n, len(ops.Operations))
	}
	first := eval[string](t, ctx, `document.querySelector('.vtable tbody tr td:nth-child(2) span').title`)
	if first != ops.Operations[0].Operation {
		t.Errorf("the first row (most total time) is %q, the API's %q", first, ops.Operations[0].Operation)
	}
	// Every column in view at 1400 px (the long names are cut, not the
	// figures): Total, the order, and Self are the last two.
	if cut := eval[[]string](t, ctx, `(() => { const box = document.querySelector('.vtable-box'), r = box.getBoundingClientRect();
		return [...box.querySelectorAll('th')].filter((th) => th.getBoundingClientRect().right > r.right + 1).map((th) => th.textContent); })()`); len(cut) > 0 {
		t.Errorf("columns cut off at the right: %q", cut)
	}
	// Sorted by count, most first.
	act(t, ctx, "sort by count", chromedp.Click(css(`.vtable th[data-key="count"]`)))
	waitJS(t, ctx, "the sort in the address", `location.search.includes('sort=count') && location.search.includes('desc=1')`)
	maxCount := int64(0)
	for _, o := range ops.Operations {
		maxCount = max(maxCount, o.Count)
	}
	if got := eval[string](t, ctx, `document.querySelector('.vtable tbody tr td:nth-child(3)').textContent`); got != fmt.Sprint(maxCount) {
		t.Errorf("the first count after sorting is %s, want %d", got, maxCount)
	}
	// The text filter.
	act(t, ctx, "filter", chromedp.SendKeys(css(`input[type="search"]`), "searchBook"))
	waitJS(t, ctx, "one operation", `document.querySelector('.vtable-box').dataset.rows === '1'`)

	// Pivot by the root span's attribute "request" (the OTel requests
	// 0 to 7), with the API's rows.
	var pv struct {
		Rows []struct {
			Value string
			Calls int
		}
	}
	w.apiJSON(t, "/api/v1/pivot?key=request", "", &pv)
	act(t, ctx, "pivot",
		chromedp.Click(css(`.tabs button[data-tab="pivot"]`)),
		chromedp.SendKeys(css(`input[name="key"]`), "request"),
		chromedp.Click(css(`.an-body button[type="submit"]`)),
		chromedp.WaitVisible(css(`.vtable tbody tr td`)))
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('.vtable tbody tr:not(.spacer)')].map((tr) => tr.children[0].textContent + '=' + tr.children[1].textContent).sort()`)
	var want []string
	for _, r := range pv.Rows {
		v := r.Value
		if v == "" {
			v = "(none)"
		}
		want = append(want, fmt.Sprintf("%s=%d", v, r.Calls))
	}
	sort.Strings(want)
	if !slices.Equal(got, want) || len(want) < 9 {
		t.Errorf("pivot rows %v, the API's %v", got, want)
	}
	if u := eval[string](t, ctx, "location.search"); !strings.Contains(u, "tab=pivot") || !strings.Contains(u, "key=request") {
		t.Errorf("the pivot is not in the address: %s", u)
	}

	// The flame graph of the profile tab (flame.js's, as the trace
	// page's), given a flame of the same shape (a trace's): drawn, a
	// hover names a frame in the tooltip, a click zooms (the path above
	// says into what).
	tr := w.find(t, "frontend")
	eval[bool](t, ctx, `(async () => {
		const m = await import('/ui/js/flame.js');
		const f = await (await fetch('/api/v1/traces/`+tr.TraceID+`/flame')).json();
		const div = document.createElement('div');
		div.id = 'flame-check';
		document.querySelector('.an-body').append(div);
		const fg = new m.Flame({root: f.root, unit: f.unit});
		div.append(fg.el);
		fg.draw();
		return true;
	})()`)
	if n := canvasInk(t, ctx, "#flame-check canvas"); n < 1000 {
		t.Errorf("the flame graph has %d pixels of ink", n)
	}
	act(t, ctx, "hover a frame", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { const c = document.querySelector('#flame-check canvas'), r = c.getBoundingClientRect();
			c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 20, clientY: r.bottom - 46, bubbles: true}));
			c.dispatchEvent(new MouseEvent('click', {clientX: r.left + 20, clientY: r.bottom - 46, bubbles: true})); return true; })()`)(ctx, tg)
		return err
	}))
	if tip := eval[string](t, ctx, `document.querySelector('#flame-check .tl-tip').textContent`); !strings.HasPrefix(tip, "checkout.Pay — ") {
		t.Errorf("hovering the third frame says %q", tip)
	}
	waitJS(t, ctx, "the zoomed path", `document.querySelector('#flame-check .flame-crumbs').textContent.endsWith('GET /cart › checkout.Pay')`)

	// The JFR profile: this bridge keeps none, and the page says what the
	// API says.
	code, b := apiGet(t, "GET", w.base+"/api/v1/profiles/flame?host=frontend-host", "", "")
	var e struct{ Error string }
	json.Unmarshal(b, &e)
	if code == 200 || e.Error == "" {
		t.Fatalf("profiles without a JFR receiver: %d %s", code, b)
	}
	act(t, ctx, "profile",
		chromedp.Click(css(`.tabs button[data-tab="profile"]`)),
		chromedp.SendKeys(css(`input[name="phost"]`), "frontend-host"),
		chromedp.Click(css(`.an-body button[type="submit"]`)),
		chromedp.WaitVisible(css(`.profile-out .error`)))
	if msg := eval[string](t, ctx, `document.querySelector('.profile-out .error').textContent`); !strings.Contains(msg, e.Error) {
		t.Errorf("the profile tab says %q, the API %q", msg, e.Error)
	}
	checkCSP(t, ctx)
	w.p.Stop()
}

const beforeEvent = "kieker.common.record.flow.trace.operation.BeforeOperationEvent"

// TestWebOpsLive: the live page follows the stream over the WebSocket:
// a Kieker log replayed while it is open shows as its records per type
// on host realclients-host, each counted once (counts, a drawn sparkline,
// the latest events), OpenTelemetry spans per service host;
// pausing freezes the list while counting goes on; the type filter goes
// into the address and reconnects with it.
func TestWebOpsLive(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	// The page's sockets are kept in window.sockets.
	openView(t, ctx, w, "/live")
	act(t, ctx, "open the live page", chromedp.WaitVisible(css(`.live-status[data-state="live"]`)))
	if u := eval[string](t, ctx, `window.sockets.length === 1 && window.sockets[0].url`); u != strings.Replace(w.base, "http://", "ws://", 1)+"/api/live" {
		t.Errorf("the live page connected to %q", u)
	}
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	ok(t, "replay", log, "--to", "kieker-tcp://"+w.p.Addr("kieker"))
	front := newOTLPService(t, "frontend", "", w.p.Addr("otlp"), "", false)
	checkout := newOTLPService(t, "checkout", "", w.p.Addr("otlp"), "", false)
	inventory := newOTLPService(t, "inventory", "", w.p.Addr("otlp"), "", false)
	for i := range 4 {
		shopRequest(front, checkout, inventory, i)
	}
	// The page counts every record of the log once, by type, on the
	// log's host.
	want := fullCounts(t, ok(t, "cat", log, "--json").stdout)
	befores := want[beforeEvent]
	if befores == 0 {
		t.Fatalf("no BeforeOperationEvent in %s: %v", log, want)
	}
	sel := `.live-rates tbody tr[data-type=` + jsString(beforeEvent) + `]`
	counted := `Object.fromEntries([...document.querySelectorAll('.live-rates tbody tr[data-host="realclients-host"]')].map((tr) => [tr.dataset.type, +tr.dataset.total]))`
	wantJSON, _ := json.Marshal(want)
	if !evalUntil(t, ctx, `(() => { const got = `+counted+`, want = `+string(wantJSON)+`;
		return Object.keys(got).length === Object.keys(want).length && Object.entries(want).every(([k, n]) => got[k] === n); })()`) {
		t.Errorf("the page counted %v for realclients-host, the log holds %v", eval[map[string]int64](t, ctx, counted), want)
	}
	// Spans of the three services, each on its host.
	waitJS(t, ctx, "spans per host", `['frontend-host', 'checkout-host', 'inventory-host'].every((h) => document.querySelector('.live-rates tbody tr[data-host="' + h + '"]'))`)
	waitJS(t, ctx, "the latest events", `document.querySelector('.live-events li[data-type=`+jsString(beforeEvent)+`]')`)
	if txt := eval[string](t, ctx, `document.querySelector('.live-events li[data-type=`+jsString(beforeEvent)+`]').textContent`); !strings.Contains(txt, "operationSignature=") {
		t.Errorf("a BeforeOperationEvent in the list: %q", txt)
	}
	waitJS(t, ctx, "the sparkline", `(() => { const c = document.querySelector(`+jsString(sel+` canvas`)+`); const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; for (let i = 3; i < d.length; i += 4) if (d[i]) return true; return false; })()`)
	if n := canvasInk(t, ctx, sel+" canvas"); n < 20 {
		t.Errorf("the sparkline has %d pixels of ink", n)
	}

	// Paused: the list stays, the counts go on. The list is counted once
	// paused: counted before, a repaint (every 250 ms) between the count
	// and the pause would add the events received until then.
	act(t, ctx, "pause", chromedp.Click(css(`button.pause`)))
	waitJS(t, ctx, "paused", `document.querySelector('button.pause').textContent === 'Resume'`)
	items := eval[int](t, ctx, `document.querySelectorAll('.live-events li').length`)
	ok(t, "replay", log, "--to", "kieker-tcp://"+w.p.Addr("kieker"))
	waitJS(t, ctx, "twice the log's BeforeOperationEvents", fmt.Sprintf(`(+document.querySelector(%s).dataset.total) === %d`, jsString(sel), 2*befores))
	// The list's repaint (every 250 ms) has seen every record of the
	// replay: it says it holds them back.
	records := 0
	for _, n := range want {
		records += int(n)
	}
	waitJS(t, ctx, "the paused note on the replay's records", fmt.Sprintf(`(() => { const m = document.querySelector('.live-split').innerText.match(/paused: ([\d,]+) events not shown/); return m && +m[1].replaceAll(',', '') >= %d; })()`, records))
	if n := eval[int](t, ctx, `document.querySelectorAll('.live-events li').length`); n != items {
		t.Errorf("paused, the list went from %d to %d events", items, n)
	}
	if note := eval[string](t, ctx, `document.querySelector('.live-split').innerText`); !strings.Contains(note, "events not shown") {
		t.Errorf("paused, the page does not say what it holds back: %.300s", note)
	}
	act(t, ctx, "resume", chromedp.Click(css(`button.pause`)))

	// A replay at 150 records a second: the rates per second show it
	// while it runs.
	paced := exec.Command(bridgetest.Binary(t), "replay", log, "--to", "kieker-tcp://"+w.p.Addr("kieker"), "--rate", "150")
	if err := paced.Start(); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "a rate", `+document.querySelector(`+jsString(sel)+`).dataset.rate > 0`)
	time.Sleep(1500 * time.Millisecond)
	shot(t, ctx, "live")
	if err := paced.Wait(); err != nil {
		t.Fatalf("replay --rate: %v", err)
	}
	waitJS(t, ctx, "three times the log's BeforeOperationEvents", fmt.Sprintf(`(+document.querySelector(%s).dataset.total) === %d`, jsString(sel), 3*befores))

	// The type filter: in the address, the socket reopened with it. Apply
	// opens the new socket on a timer and the status says live of the old
	// one until then: the wait is for a new socket's metadata (the
	// replays below would go to no one before it).
	sockets := eval[int](t, ctx, `window.sockets.length`)
	act(t, ctx, "filter",
		chromedp.SetValue(css(`.live-filter select[name="type"]`), beforeEvent),
		chromedp.Click(css(`.live-filter button[type="submit"]`)))
	waitJS(t, ctx, "the filtered socket live", fmt.Sprintf(`window.sockets.length > %d && document.querySelector('.live-status').dataset.state === 'live'`, sockets))
	if u := eval[string](t, ctx, "decodeURIComponent(location.search)"); !strings.Contains(u, "type="+beforeEvent) {
		t.Errorf("the filter is not in the address: %s", u)
	}
	// Spans first (the SDK exports each as it ends), then the log: when
	// the log's records are counted and a second later its rate is
	// back to 0, the spans have had their time to show, were they not
	// filtered out.
	for i := range 4 {
		shopRequest(front, checkout, inventory, i)
	}
	ok(t, "replay", log, "--to", "kieker-tcp://"+w.p.Addr("kieker"))
	waitJS(t, ctx, "the BeforeOperationEvents after the filter", fmt.Sprintf(`(() => { const tr = document.querySelector(%s); return tr && +tr.dataset.total === %d && tr.dataset.rate === '0'; })()`, jsString(sel), befores))
	if types := eval[[]string](t, ctx, `[...new Set([...document.querySelectorAll('.live-rates tbody tr')].map((tr) => tr.dataset.type))]`); !slices.Equal(types, []string{beforeEvent}) {
		t.Errorf("with the filter the page counts %v", types)
	}
	if u := eval[string](t, ctx, `window.sockets.at(-1).url`); !strings.HasSuffix(u, "/api/live?type="+beforeEvent) {
		t.Errorf("after the filter the page connected to %q", u)
	}
	if n := eval[int](t, ctx, `window.sockets.filter((s) => s.readyState === WebSocket.OPEN).length`); n != 1 {
		t.Errorf("%d sockets open after the filter, want 1", n)
	}

	// A socket that closes is reopened (with the filter), and the counts
	// go on.
	n := eval[int](t, ctx, `window.sockets.length`)
	eval[bool](t, ctx, `(() => { window.sockets.at(-1).close(); return true; })()`)
	waitJS(t, ctx, "a new socket", fmt.Sprintf(`window.sockets.length === %d && window.sockets.at(-1).readyState === WebSocket.OPEN && document.querySelector('.live-status').dataset.state === 'live'`, n+1))
	if u := eval[string](t, ctx, `window.sockets.at(-1).url`); !strings.HasSuffix(u, "/api/live?type="+beforeEvent) {
		t.Errorf("the page reconnected to %q", u)
	}
	ok(t, "replay", log, "--to", "kieker-tcp://"+w.p.Addr("kieker"))
	waitJS(t, ctx, "counts after the reconnection", fmt.Sprintf(`(+document.querySelector(%s)?.dataset.total) === %d`, jsString(sel), 2*befores))

	// Leaving the page closes its socket.
	act(t, ctx, "leave", chromedp.Click(css(`#nav a[data-view="compare"]`)))
	waitJS(t, ctx, "the socket closed", `window.sockets.every((s) => s.readyState >= WebSocket.CLOSING)`)
	checkCSP(t, ctx)
	w.p.Stop()
}

// consoleRow answers a receiver's state as the console shows it.
func consoleState(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	return eval[string](t, ctx, `(document.querySelector('.console-receivers tr[data-name=`+jsString(name)+`]') || {dataset: {}}).dataset.state || ''`)
}

type apiReceiver struct {
	Name, Type, Where, State string
}

func (w *webBridge) receiver(t *testing.T, name string) apiReceiver {
	t.Helper()
	var rs struct{ Receivers []apiReceiver }
	w.apiJSON(t, "/api/v1/receivers", "", &rs)
	for _, r := range rs.Receivers {
		if r.Name == name {
			return r
		}
	}
	return apiReceiver{}
}

// TestWebOpsConsole: with the token, the console stops the kieker
// receiver (the API says stopped, its port refuses connections) and
// starts it again; adds a receiver from the form built from the
// component types (and shows the API's validation error for a bad one);
// edits the kdb receiver's mapping (the API reads it back); and
// downloads the effective YAML, which lists the receivers.
func TestWebOpsConsole(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	openView(t, ctx, w, "/console")
	act(t, ctx, "open the console", chromedp.WaitVisible(css(`.console-receivers tr[data-name="kieker"]`)))
	var st struct{ Version string }
	w.apiJSON(t, "/api/v1/status", "", &st)
	if v := eval[string](t, ctx, `document.querySelector('.console-status').dataset.version`); v != st.Version {
		t.Errorf("the console shows version %q, the API %q", v, st.Version)
	}
	for _, name := range []string{"kieker", "zico", "otlp", "kdb"} {
		if s := consoleState(t, ctx, name); s != "running" {
			t.Errorf("receiver %s: %q", name, s)
		}
	}
	if sinks := eval[[]string](t, ctx, `[...document.querySelectorAll('.console-sinks tbody tr')].map((tr) => tr.dataset.name)`); !slices.Equal(sinks, []string{"kieker-log", "store", "stream"}) {
		t.Errorf("sinks: %v", sinks)
	}
	// Without a token a stop is refused, and the page says why.
	clickNow(t, ctx, "stop without a token", `.console-receivers tr[data-name="kieker"] button.stop`)
	waitJS(t, ctx, "the refusal", `document.querySelector('.panel .error') && document.querySelector('.panel .error').textContent.includes('401')`)

	w.login(t, ctx)
	addr := w.p.Addr("kieker")
	clickNow(t, ctx, "stop kieker", `.console-receivers tr[data-name="kieker"] button.stop`)
	waitJS(t, ctx, "kieker stopped", `document.querySelector('.console-receivers tr[data-name="kieker"]').dataset.state === 'stopped'`)
	if r := w.receiver(t, "kieker"); r.State != "stopped" {
		t.Errorf("after Stop the API says %+v", r)
	}
	if where := eval[string](t, ctx, `document.querySelector('.console-receivers tr[data-name="kieker"] td:nth-child(3)').textContent`); where != "was listening on "+addr {
		t.Errorf("the stopped receiver is %q", where)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the stopped receiver's port %s still accepts connections", addr)
	}
	clickNow(t, ctx, "start kieker", `.console-receivers tr[data-name="kieker"] button.start`)
	waitJS(t, ctx, "kieker running", `document.querySelector('.console-receivers tr[data-name="kieker"]').dataset.state === 'running'`)
	if r := w.receiver(t, "kieker"); r.State != "running" {
		t.Errorf("after Start the API says %+v", r)
	}

	// Add a receiver: a bad address first (the factory's error), then a
	// good one.
	act(t, ctx, "a bad receiver",
		chromedp.SetValue(css(`.add-receiver select[name="type"]`), "kieker-tcp"),
		chromedp.WaitVisible(css(`.add-receiver input[name="listen"]`)),
		chromedp.SendKeys(css(`.add-receiver input[name="name"]`), "added"),
		chromedp.SendKeys(css(`.add-receiver input[name="listen"]`), "no-port-here"),
		chromedp.Click(css(`.add-receiver button[type="submit"]`)),
		chromedp.WaitVisible(css(`.add-receiver .error`)))
	msg := eval[string](t, ctx, `document.querySelector('.add-receiver .error').textContent`)
	code, b := apiGet(t, "POST", w.base+"/api/v1/receivers", `{"type":"kieker-tcp","name":"added","config":{"listen":"no-port-here"}}`, w.token)
	var apiErr struct{ Error string }
	json.Unmarshal(b, &apiErr)
	if code < 400 || apiErr.Error == "" || !strings.Contains(msg, apiErr.Error) {
		t.Errorf("the form says %q; the API %d %s", msg, code, b)
	}
	act(t, ctx, "a good receiver",
		chromedp.SetValue(css(`.add-receiver input[name="listen"]`), "127.0.0.1:0"),
		chromedp.Click(css(`.add-receiver button[type="submit"]`)),
		chromedp.WaitVisible(css(`.add-receiver .notice.ok`)))
	waitJS(t, ctx, "the added receiver listed", `document.querySelector('.console-receivers tr[data-name="added"]')?.dataset.state === 'running'`)
	if r := w.receiver(t, "added"); r.State != "running" || r.Type != "kieker-tcp" {
		t.Errorf("the added receiver: %+v", r)
	}
	eval[bool](t, ctx, `(() => { window.scrollTo(0, 0); return true; })()`)
	shot(t, ctx, "console")

	// The kdb receiver's mapping: id 42 becomes CPUUtilizationRecord,
	// id 2 goes.
	clickNow(t, ctx, "open the mapping", `.console-receivers tr[data-name="kdb"] button.mapping`)
	act(t, ctx, "the mapping editor", chromedp.WaitVisible(css(`.mapping-editor .map-type`)))
	if u := eval[string](t, ctx, "location.search"); u != "?mapping=kdb" {
		t.Errorf("the editor is not in the address: %s", u)
	}
	eval[bool](t, ctx, `(() => { for (const tr of document.querySelectorAll('.mapping-table tbody tr')) if (tr.querySelector('.map-id').value === '2') tr.querySelector('button.remove').click(); return true; })()`)
	act(t, ctx, "add a row", chromedp.Click(css(`.mapping-editor button.add-row`)))
	eval[bool](t, ctx, `(() => { const trs = document.querySelectorAll('.mapping-table tbody tr'); const tr = trs[trs.length - 1]; tr.querySelector('.map-id').value = '42'; return true; })()`)
	act(t, ctx, "type the record type",
		chromedp.SendKeys(css(`.mapping-table tbody tr:last-child .map-type`), "kieker.common.record.system.CPUUtilizationRecord"),
		chromedp.Click(css(`.mapping-editor button[type="submit"]`)),
		chromedp.WaitVisible(css(`.mapping-editor .notice.ok`)))
	var m struct {
		Entries []struct {
			ID   int
			Type string
		}
	}
	w.apiJSON(t, "/api/v1/receivers/kdb/mapping", "", &m)
	got := map[int]string{}
	for _, e := range m.Entries {
		got[e.ID] = e.Type
	}
	if got[42] != "kieker.common.record.system.CPUUtilizationRecord" || got[2] != "" || got[1] == "" {
		t.Errorf("the saved mapping: %v", got)
	}
	// The row follows on the refresh after the save (a refresh under way
	// during the restart may paint it stopped first).
	if !evalUntil(t, ctx, `document.querySelector('.console-receivers tr[data-name="kdb"]')?.dataset.state === 'running'`) {
		t.Errorf("kdb after a save with restart: %q", consoleState(t, ctx, "kdb"))
	}
	// A type the catalogue does not know: the API's error.
	act(t, ctx, "a bad type",
		chromedp.SetValue(css(`.mapping-table tbody tr:last-child .map-type`), "no.such.Record"),
		chromedp.Click(css(`.mapping-editor button[type="submit"]`)),
		chromedp.WaitVisible(css(`.mapping-editor .error`)))

	// The effective configuration, fetched with the token.
	act(t, ctx, "download the YAML",
		chromedp.Click(css(`button.download-config`)),
		chromedp.WaitVisible(css(`pre.config-yaml`)))
	yaml := eval[string](t, ctx, `document.querySelector('pre.config-yaml').textContent`)
	for _, s := range []string{"receivers:", "kieker-tcp", "name: added", "tcp-server", "mapping:"} {
		if !strings.Contains(yaml, s) {
			t.Errorf("the downloaded YAML lacks %q:\n%s", s, yaml)
		}
	}
	checkCSP(t, ctx)
	w.p.Stop()
}
