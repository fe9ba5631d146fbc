package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// searchDone is true once the search view shows a page of results.
const searchDone = `document.querySelector('.search-results')?.dataset.state === 'done'`

// searchSummary is a trace as the search API answers it.
type searchSummary struct {
	TraceID    string
	Host       string
	Service    string
	Name       string
	Start      int64
	DurationNs int64
	Error      bool
}

// apiSearch answers what the API finds for a query string, in its
// order.
func (w *webBridge) apiSearch(t *testing.T, q string) []searchSummary {
	t.Helper()
	code, b := apiGet(t, "GET", w.base+"/api/v1/traces?"+q, "", "")
	if code != 200 {
		t.Fatalf("search %s: %d %s", q, code, b)
	}
	var res struct{ Traces []searchSummary }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res.Traces
}

func summaryIDs(ts []searchSummary) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.TraceID)
	}
	return out
}

// searchTableIDs answers the trace summaryIDs of the result table's rows, in order.
func searchTableIDs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll('#search-table tbody tr[data-id]')].map(r => r.dataset.id)`)
}

// searchOpen loads the search page at path and waits for its results.
func searchOpen(t *testing.T, ctx context.Context, w *webBridge, path string) {
	t.Helper()
	act(t, ctx, "open "+path, chromedp.Navigate(w.base+path))
	waitJS(t, ctx, "the results of "+path, searchDone)
}

// searchStale marks the shown results so that waiting for new ones cannot see
// them.
func searchStale(t *testing.T, ctx context.Context) {
	t.Helper()
	eval[bool](t, ctx, `(() => { const r = document.querySelector('.search-results'); if (r) r.dataset.state = 'stale'; return true })()`)
}

// searchSubmit runs the form's search and waits for its results.
func searchSubmit(t *testing.T, ctx context.Context) {
	t.Helper()
	searchStale(t, ctx)
	act(t, ctx, "submit", chromedp.Click(css("#f-submit")))
	waitJS(t, ctx, "the results", searchDone)
}

// searchPickHost chooses a host in the form's host picker.
func searchPickHost(t *testing.T, ctx context.Context, host string) {
	t.Helper()
	waitJS(t, ctx, "host "+host+" in the picker", `document.querySelector('#f-host option[value=`+jsString(host)+`]')`)
	eval[bool](t, ctx, `(() => { const s = document.querySelector('#f-host'); s.value = `+jsString(host)+`; s.dispatchEvent(new Event('change')); return true })()`)
	waitJS(t, ctx, "the chip of "+host, `document.querySelector('#f-hosts .chip[data-host=`+jsString(host)+`]')`)
}

// addressQuery answers the page's query parameters.
func addressQuery(t *testing.T, ctx context.Context) url.Values {
	t.Helper()
	v, err := url.ParseQuery(strings.TrimPrefix(eval[string](t, ctx, "location.search"), "?"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameIDSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// scatterPoint is where the scatter plot drew a trace (CSS px in the canvas).
type scatterPoint struct {
	X, Y  float64
	ID    string
	Error bool
}

func scatterPoints(t *testing.T, ctx context.Context) []scatterPoint {
	t.Helper()
	return eval[[]scatterPoint](t, ctx, `document.querySelector('canvas.scatter-plot').tbPoints()`)
}

// scatterOrigin scrolls the plot into view and answers its top left
// corner in the viewport.
func scatterOrigin(t *testing.T, ctx context.Context) (float64, float64) {
	t.Helper()
	r := eval[[]float64](t, ctx, `(() => { const c = document.querySelector('canvas.scatter-plot'); c.scrollIntoView({block: 'center'}); const b = c.getBoundingClientRect(); return [b.left, b.top] })()`)
	return r[0], r[1]
}

// scatterRedInk counts the plot's red pixels: the traces with errors.
func scatterRedInk(t *testing.T, ctx context.Context) int {
	t.Helper()
	return eval[int](t, ctx, `(() => {
		const c = document.querySelector('canvas.scatter-plot');
		const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
		let n = 0;
		for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i+1] < 110 && d[i+2] < 110) n++;
		return n;
	})()`)
}

// TestWebSearch: the search page lists what the store holds, its form
// narrows the search as the API does for the same query, the address
// holds the query (reload, back and forward), errors of the API are
// shown, the scatter plot is drawn from the results and a click on a
// scatterPoint opens that trace, and "More" appends the next page.
func TestWebSearch(t *testing.T) {
	w := startWebBridge(t)
	ctx := browser(t)
	all := w.apiSearch(t, "limit=100")

	t.Run("default", func(t *testing.T) {
		searchOpen(t, ctx, w, "/")
		got := searchTableIDs(t, ctx)
		var want []string
		for _, tr := range w.traces {
			want = append(want, tr.TraceID)
		}
		if !sameIDSet(got, want) || len(got) != len(w.traces) {
			t.Errorf("the table shows %d traces %v, the store holds %d: %v", len(got), got, len(want), want)
		}
		if n := eval[string](t, ctx, `document.querySelector('#search-count').dataset.count`); n != strconv.Itoa(len(w.traces)) {
			t.Errorf("the count says %s, want %d", n, len(w.traces))
		}
		// A row shows its trace: name, host and service, error badge.
		for _, s := range all[:3] {
			row := eval[string](t, ctx, `document.querySelector('#search-table tr[data-id=`+jsString(s.TraceID)+`]').innerText`)
			for _, part := range []string{s.Name, s.Host, s.Service} {
				if !strings.Contains(row, part) {
					t.Errorf("the row of %s is %q, without %q", s.TraceID, row, part)
				}
			}
		}
		// A Kieker trace's row links to its page.
		k := w.find(t, "realclients")
		if href := eval[string](t, ctx, `document.querySelector('#search-table tr[data-id=`+jsString(k.TraceID)+`] a').getAttribute('href')`); href != "/trace/"+k.TraceID {
			t.Errorf("the link of %s goes to %s", k.TraceID, href)
		}
		if ink := canvasInk(t, ctx, "canvas.scatter-plot"); ink < 500 {
			t.Errorf("the scatter plot has %d pixels of ink", ink)
		}
		if red := scatterRedInk(t, ctx); red < 20 {
			t.Errorf("the scatter plot has %d red pixels: the traces with errors are not drawn", red)
		}
		shot(t, ctx, "search")
	})

	// Each way of narrowing the search through the form gives what the
	// API gives for the same query, and the address holds that query.
	filters := []struct {
		name  string
		fill  func(t *testing.T)
		query string
	}{
		{"host", func(t *testing.T) {
			searchPickHost(t, ctx, "frontend-host")
			// The trace names offered are the host's.
			waitJS(t, ctx, "the host's names", `[...document.querySelectorAll('#f-names option')].map(o => o.value).join() === 'GET /cart'`)
		}, "host=frontend-host"},
		{"service", func(t *testing.T) {
			// A drop-down of the services the API lists.
			waitJS(t, ctx, "checkout offered", `document.querySelector('#f-service option[value="checkout"]')`)
			eval[bool](t, ctx, `(() => { const s = document.querySelector('#f-service'); s.value = 'checkout'; s.dispatchEvent(new Event('change')); return true })()`)
		}, "service=checkout"},
		{"name", func(t *testing.T) {
			// Every host's names are offered.
			waitJS(t, ctx, "the names", `[...document.querySelectorAll('#f-names option')].map(o => o.value).includes('public long realclients.java.Bookstore.searchBook(long)')`)
		}, "name=GET+%2Fcart"}, // typed with Enter below
		{"errors", func(t *testing.T) { act(t, ctx, "errors", chromedp.Click(css("#f-errors"))) }, "errors=true"},
		{"minDuration", func(t *testing.T) { act(t, ctx, "min", chromedp.SendKeys(css("#f-min"), "10ms")) }, "minDuration=10ms"},
		{"host and errors", func(t *testing.T) {
			searchPickHost(t, ctx, "realclients-host")
			act(t, ctx, "errors", chromedp.Click(css("#f-errors")))
		}, "host=realclients-host&errors=true"},
		{"attribute", func(t *testing.T) {
			act(t, ctx, "attr", chromedp.Click(css("#f-add-attr")), chromedp.SendKeys(css(".attr-key"), "URI"),
				chromedp.SendKeys(css(".attr-value"), "/shop/cart/572"))
		}, "attr=URI%3D%2Fshop%2Fcart%2F572"},
		{"last hour", func(t *testing.T) {
			eval[bool](t, ctx, `(() => { const s = document.querySelector('#f-range'); s.value = '1h'; s.dispatchEvent(new Event('change')); return true })()`)
		}, "since=1h"},
	}
	for _, f := range filters {
		t.Run("filter "+f.name, func(t *testing.T) {
			searchOpen(t, ctx, w, "/search")
			f.fill(t)
			if f.name == "name" {
				// Enter in a field submits the form.
				searchStale(t, ctx)
				act(t, ctx, "name", chromedp.SendKeys(css("#f-name"), "GET /cart\r"))
				waitJS(t, ctx, "the results", searchDone)
			} else {
				searchSubmit(t, ctx)
			}
			want := summaryIDs(w.apiSearch(t, f.query+"&limit=100"))
			if len(want) == 0 || len(want) >= len(all) {
				t.Fatalf("%s: the API finds %d of %d traces: not a narrowing test", f.query, len(want), len(all))
			}
			if got := searchTableIDs(t, ctx); !slices.Equal(got, want) {
				t.Errorf("%s: the table shows %v, the API answers %v", f.query, got, want)
			}
			wantQ, _ := url.ParseQuery(f.query)
			if got := addressQuery(t, ctx); !sameValues(got, wantQ) {
				t.Errorf("the address holds %v, want %v", got, wantQ)
			}
		})
	}

	t.Run("regex", func(t *testing.T) {
		searchOpen(t, ctx, w, "/search")
		eval[bool](t, ctx, `(() => { const s = document.querySelector('#f-mode'); s.value = 'regex'; s.dispatchEvent(new Event('change')); return true })()`)
		act(t, ctx, "regex", chromedp.SendKeys(css("#f-q"), "Bookstore|SessionImpl\\.get\\("))
		searchSubmit(t, ctx)
		want := summaryIDs(w.apiSearch(t, "q="+url.QueryEscape(`~Bookstore|SessionImpl\.get\(`)+"&limit=100"))
		if len(want) == 0 || len(want) >= len(all) {
			t.Fatalf("the regex finds %d of %d traces", len(want), len(all))
		}
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want) {
			t.Errorf("the table shows %v, the API answers %v", got, want)
		}
		if q := addressQuery(t, ctx).Get("q"); q != `~Bookstore|SessionImpl\.get\(` {
			t.Errorf("the address holds q=%q", q)
		}
		// A reload shows the regex in its mode again.
		searchOpen(t, ctx, w, "/search?q="+url.QueryEscape("~Book"))
		if m := eval[string](t, ctx, `document.querySelector('#f-mode').value + ' ' + document.querySelector('#f-q').value`); m != "regex Book" {
			t.Errorf("the form shows %q for q=~Book", m)
		}
	})

	// The API's 400s are shown in the page, and the field is marked.
	for _, c := range []struct{ name, mode, field, text, want string }{
		{"bad regex", "regex", "#f-q", "(", "missing closing )"},
		{"bad duration", "text", "#f-min", "fast", "minDuration"},
		{"bad EQL", "eql", "#f-q", "time >", "eql"},
	} {
		t.Run(c.name, func(t *testing.T) {
			searchOpen(t, ctx, w, "/search")
			eval[bool](t, ctx, `(() => { const s = document.querySelector('#f-mode'); s.value = `+jsString(c.mode)+`; s.dispatchEvent(new Event('change')); return true })()`)
			act(t, ctx, "type", chromedp.SendKeys(css(c.field), c.text))
			searchStale(t, ctx)
			act(t, ctx, "submit", chromedp.Click(css("#f-submit")))
			waitJS(t, ctx, "the error", `document.querySelector('.search-results')?.dataset.state === 'error'`)
			msg := eval[string](t, ctx, `document.querySelector('.search-results .error').innerText`)
			if !strings.HasPrefix(msg, "400: ") || !strings.Contains(msg, c.want) {
				t.Errorf("the page says %q, want the API's 400 about %q", msg, c.want)
			}
			if !eval[bool](t, ctx, `document.querySelector(`+jsString(c.field)+`).classList.contains('invalid')`) {
				t.Errorf("%s is not marked invalid", c.field)
			}
			if c.name == "bad regex" {
				shot(t, ctx, "search-error")
			}
		})
	}

	t.Run("address", func(t *testing.T) {
		first := "/search?host=zorka-host&errors=true"
		searchOpen(t, ctx, w, first)
		want1 := summaryIDs(w.apiSearch(t, "host=zorka-host&errors=true&limit=100"))
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want1) || len(want1) == 0 {
			t.Fatalf("%s shows %v, the API answers %v", first, got, want1)
		}
		// The form shows the query.
		if f := eval[string](t, ctx, `[...document.querySelectorAll('#f-hosts .chip')].map(c => c.dataset.host).join() + ' ' + document.querySelector('#f-errors').checked`); f != "zorka-host true" {
			t.Errorf("the form shows %q", f)
		}
		searchStale(t, ctx)
		act(t, ctx, "reload", chromedp.Reload())
		waitJS(t, ctx, "results after the reload", searchDone)
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want1) {
			t.Errorf("after a reload the table shows %v, want %v", got, want1)
		}
		// A second search, then back and forward.
		act(t, ctx, "errors off", chromedp.Click(css("#f-errors")))
		searchSubmit(t, ctx)
		want2 := summaryIDs(w.apiSearch(t, "host=zorka-host&limit=100"))
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want2) || len(want2) <= len(want1) {
			t.Fatalf("without errors the table shows %v, the API answers %v", got, want2)
		}
		searchStale(t, ctx)
		eval[bool](t, ctx, `(history.back(), true)`)
		waitJS(t, ctx, "back", `location.search.includes('errors=true') && `+searchDone)
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want1) {
			t.Errorf("after back the table shows %v, want %v", got, want1)
		}
		searchStale(t, ctx)
		eval[bool](t, ctx, `(history.forward(), true)`)
		waitJS(t, ctx, "forward", `!location.search.includes('errors') && `+searchDone)
		if got := searchTableIDs(t, ctx); !slices.Equal(got, want2) {
			t.Errorf("after forward the table shows %v, want %v", got, want2)
		}
	})

	t.Run("scatter", func(t *testing.T) {
		searchOpen(t, ctx, w, "/search")
		pts := scatterPoints(t, ctx)
		byID := map[string]searchSummary{}
		for _, s := range all {
			byID[s.TraceID] = s
		}
		if len(pts) != len(all) {
			t.Fatalf("%d points for %d traces", len(pts), len(all))
		}
		// Longer traces are higher (log scale), later ones further right;
		// errors are the points with errors.
		for _, a := range pts {
			for _, b := range pts {
				sa, sb := byID[a.ID], byID[b.ID]
				if sa.DurationNs > sb.DurationNs && a.Y > b.Y+0.01 {
					t.Fatalf("%s (%d ns) is drawn below %s (%d ns)", a.ID, sa.DurationNs, b.ID, sb.DurationNs)
				}
				if sa.Start > sb.Start && a.X < b.X-0.01 {
					t.Fatalf("%s is drawn left of %s, which started earlier", a.ID, b.ID)
				}
			}
			if a.Error != byID[a.ID].Error {
				t.Errorf("point %s: error %v, the trace's %v", a.ID, a.Error, byID[a.ID].Error)
			}
		}
		p := scatterIsolated(pts)
		if p == nil {
			t.Fatalf("no scatterPoint stands apart from the others: %v", pts)
		}
		x0, y0 := scatterOrigin(t, ctx)
		x, y := x0+p.X, y0+p.Y
		act(t, ctx, "hover", chromedp.MouseEvent(chromedp.MouseMoved, x, y))
		waitJS(t, ctx, "the tooltip", `!document.querySelector('.scatter-tip').hidden`)
		if tip := eval[string](t, ctx, `document.querySelector('.scatter-tip').innerText`); !strings.Contains(tip, byID[p.ID].Name) || !strings.Contains(tip, byID[p.ID].Host) {
			t.Errorf("the tooltip of %s says %q", p.ID, tip)
		}
		act(t, ctx, "click the point", chromedp.MouseClickXY(x, y))
		waitJS(t, ctx, "the trace's page", `location.pathname === `+jsString("/trace/"+p.ID))
	})

	t.Run("brush", func(t *testing.T) {
		searchOpen(t, ctx, w, "/search")
		pts := scatterPoints(t, ctx)
		// Drag from midway between the oldest and the newest scatterPoint to
		// the right end of the plot: the search is then of the newer
		// half of the time axis.
		minX, maxX := math.Inf(1), math.Inf(-1)
		for _, p := range pts {
			minX, maxX = min(minX, p.X), max(maxX, p.X)
		}
		mid := (minX + maxX) / 2
		var want []string
		for _, p := range pts {
			if p.X > mid {
				want = append(want, p.ID)
			}
		}
		width := eval[float64](t, ctx, `document.querySelector('canvas.scatter-plot').getBoundingClientRect().width`)
		x0, y0 := scatterOrigin(t, ctx)
		searchStale(t, ctx)
		act(t, ctx, "drag",
			chromedp.MouseEvent(chromedp.MousePressed, x0+mid, y0+100, chromedp.ButtonLeft, chromedp.ClickCount(1)),
			chromedp.MouseEvent(chromedp.MouseMoved, x0+(mid+width)/2, y0+100, chromedp.ButtonLeft),
			chromedp.MouseEvent(chromedp.MouseMoved, x0+width-16, y0+100, chromedp.ButtonLeft),
			chromedp.MouseEvent(chromedp.MouseReleased, x0+width-16, y0+100, chromedp.ButtonLeft, chromedp.ClickCount(1)))
		waitJS(t, ctx, "the zoomed search", `location.search.includes('until=') && `+searchDone)
		q := addressQuery(t, ctx)
		if got := searchTableIDs(t, ctx); !sameIDSet(got, want) {
			t.Errorf("the range %s…%s shows %v, the points right of the middle are %v", q.Get("since"), q.Get("until"), got, want)
		}
		if got, api := searchTableIDs(t, ctx), summaryIDs(w.apiSearch(t, "since="+url.QueryEscape(q.Get("since"))+"&until="+url.QueryEscape(q.Get("until"))+"&limit=100")); !slices.Equal(got, api) {
			t.Errorf("the table shows %v, the API %v", got, api)
		}
		if r := eval[string](t, ctx, `document.querySelector('#f-range').value`); r != "custom" {
			t.Errorf("the time range shows %q", r)
		}
	})

	t.Run("more", func(t *testing.T) {
		searchOpen(t, ctx, w, "/search?limit=5")
		if got, want := searchTableIDs(t, ctx), summaryIDs(w.apiSearch(t, "limit=5")); !slices.Equal(got, want) {
			t.Fatalf("the first page shows %v, want %v", got, want)
		}
		for page := 2; page <= 3; page++ {
			searchStale(t, ctx)
			act(t, ctx, "more", chromedp.Click(css("#search-more")))
			waitJS(t, ctx, "the next page", searchDone)
			want := summaryIDs(w.apiSearch(t, fmt.Sprintf("limit=%d", 5*page)))
			if got := searchTableIDs(t, ctx); !slices.Equal(got, want) {
				t.Errorf("after %d pages the table shows %v, want %v", page, got, want)
			}
			if n := len(scatterPoints(t, ctx)); n != 5*page {
				t.Errorf("after %d pages the plot has %d points", page, n)
			}
		}
		if s := eval[string](t, ctx, "location.search"); s != "?limit=5" {
			t.Errorf("paging changed the address to %s", s)
		}
	})

	t.Run("sort and scale", func(t *testing.T) {
		searchOpen(t, ctx, w, "/search")
		act(t, ctx, "sort", chromedp.Click(css(`#search-table th[data-key="duration"]`)))
		got := searchTableIDs(t, ctx)
		want := slices.Clone(all)
		slices.SortStableFunc(want, func(a, b searchSummary) int { return int(b.DurationNs - a.DurationNs) })
		if got[0] != want[0].TraceID || got[len(got)-1] != want[len(want)-1].TraceID {
			t.Errorf("sorted by duration the table starts with %s and ends with %s, want %s … %s", got[0], got[len(got)-1], want[0].TraceID, want[len(want)-1].TraceID)
		}
		act(t, ctx, "linear", chromedp.Click(css("#scatter-log")))
		if q := addressQuery(t, ctx); q.Get("sort") != "-duration" || q.Get("scale") != "lin" {
			t.Errorf("the address holds %v", q)
		}
		if ink := canvasInk(t, ctx, "canvas.scatter-plot"); ink < 500 {
			t.Errorf("the linear plot has %d pixels of ink", ink)
		}
		// Both survive a reload.
		searchOpen(t, ctx, w, "/search?sort=-duration&scale=lin")
		if got := searchTableIDs(t, ctx); got[0] != want[0].TraceID || eval[bool](t, ctx, `document.querySelector('#scatter-log').checked`) {
			t.Errorf("after a reload the order or the scale is lost")
		}
		if b := eval[string](t, ctx, `document.getElementById('banner').hidden ? '' : document.getElementById('banner').innerText`); b != "" {
			t.Errorf("the page shows an error banner: %s", b)
		}
	})
}

// scatterIsolated answers a scatterPoint with no other within 12 px, or nil.
func scatterIsolated(pts []scatterPoint) *scatterPoint {
	for i, p := range pts {
		near := false
		for j, q := range pts {
			if i != j && math.Hypot(p.X-q.X, p.Y-q.Y) < 12 {
				near = true
				break
			}
		}
		if !near {
			return &pts[i]
		}
	}
	return nil
}

func sameValues(a, b url.Values) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestWebSearchMany: with thousands of results the table renders only
// the rows in view (scrolling shows the others) and the plot has a
// scatterPoint for every trace.
func TestWebSearchMany(t *testing.T) {
	w := startWebBridge(t)
	const n = 3000
	bulk := newOTLPService(t, "bulk", "", w.p.Addr("otlp"), "", true)
	now := time.Now()
	for i := range n {
		start := now.Add(-time.Duration(i) * 700 * time.Millisecond)
		_, sp := bulk.tr.Start(context.Background(), fmt.Sprintf("GET /item/%d", i%50), oteltrace.WithTimestamp(start))
		sp.End(oteltrace.WithTimestamp(start.Add(time.Duration(100+i%997) * time.Microsecond)))
	}
	if err := bulk.export(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := len(w.traces) + n
	pollFor(t, func() bool { return len(w.apiSearch(t, "limit=10000")) >= total })
	want := summaryIDs(w.apiSearch(t, "limit=10000"))

	ctx := browser(t)
	start := time.Now()
	searchOpen(t, ctx, w, "/search?limit=10000")
	t.Logf("%d traces shown in %v", total, time.Since(start))
	if rows := eval[string](t, ctx, `document.querySelector('#search-table').dataset.rows`); rows != strconv.Itoa(total) {
		t.Errorf("the table holds %s rows, want %d", rows, total)
	}
	inDOM := searchTableIDs(t, ctx)
	if len(inDOM) == 0 || len(inDOM) > 200 {
		t.Errorf("%d rows are in the page: the table is not rendered in windows", len(inDOM))
	}
	if !slices.Equal(inDOM, want[:len(inDOM)]) {
		t.Errorf("the first rows are %v, want %v", inDOM[:5], want[:5])
	}
	if pts := len(scatterPoints(t, ctx)); pts != total {
		t.Errorf("the plot has %d points for %d traces", pts, total)
	}
	// Scrolled to the end, the last traces are there.
	eval[bool](t, ctx, `(() => { const s = document.querySelector('.results-scroll'); s.scrollTop = s.scrollHeight; return true })()`)
	waitJS(t, ctx, "the last row", `document.querySelector('#search-table tr[data-id=`+jsString(want[len(want)-1])+`]')`)
	// In the middle, the rows at the scroll position.
	eval[bool](t, ctx, `(() => { const s = document.querySelector('.results-scroll'); s.scrollTop = s.scrollHeight / 2; return true })()`)
	waitJS(t, ctx, "the middle rows", `document.querySelector('#search-table tr[data-id=`+jsString(want[len(want)/2])+`]')`)
	shot(t, ctx, "search-many")

	// A search its budget cuts says so. Whether 1 ms cuts it depends on
	// the machine: the page is checked against the answer it got.
	eval[bool](t, ctx, `(() => {
		const f = window.fetch;
		window.fetch = async (u, o) => {
			const r = await f(u, o);
			if (String(u).startsWith('/api/v1/traces')) window.lastPage = await r.clone().json();
			return r;
		};
		return true;
	})()`)
	for i := range 10 {
		searchStale(t, ctx)
		eval[bool](t, ctx, `(window.lastPage = null, history.pushState(null, '', '/search?deep=true&budget=1ms&limit=10000&q=~zz`+strconv.Itoa(i)+`'), dispatchEvent(new Event('tb-navigate')), true)`)
		waitJS(t, ctx, "the budgeted search", searchDone+` && window.lastPage`)
		var page struct {
			More, Partial bool
			Cursor        string
			Scanned       int
		}
		b := eval[string](t, ctx, `JSON.stringify(window.lastPage)`)
		if err := json.Unmarshal([]byte(b), &page); err != nil {
			t.Fatal(err)
		}
		shown := eval[bool](t, ctx, `!!document.querySelector('#search-partial')`)
		if shown != page.Partial {
			t.Fatalf("the answer's partial is %v, the page shows the notice: %v", page.Partial, shown)
		}
		if s := eval[string](t, ctx, `document.querySelector('#search-scanned').dataset.scanned`); s != strconv.Itoa(page.Scanned) {
			t.Errorf("the page says %s entries scanned, the answer %d", s, page.Scanned)
		}
		if more := eval[bool](t, ctx, `!document.querySelector('#search-more').closest('.more-row').hidden`); more != (page.More && page.Cursor != "") {
			t.Errorf("more %v, cursor %q: the page offers More: %v", page.More, page.Cursor, more)
		}
		if !page.Partial {
			continue
		}
		shot(t, ctx, "search-partial")
		searchStale(t, ctx)
		act(t, ctx, "a longer budget", chromedp.Click(css("#search-longer")))
		waitJS(t, ctx, "the search with a longer budget", searchDone)
		if q := addressQuery(t, ctx); q.Get("budget") != "30s" || q.Get("q") != "~zz"+strconv.Itoa(i) {
			t.Errorf("a longer budget searches %v", q)
		}
		return
	}
	t.Log("1 ms was enough for every search: the partial notice is not tested")
}

// pollFor polls f for 20 s.
func pollFor(t *testing.T, f func() bool) {
	t.Helper()
	for range 200 {
		if f() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// hostInfo is a host as GET /api/v1/hosts answers it.
type hostInfo struct {
	Name, Group, Addr, Comment string
	Secret, Enabled            bool
	MaxSize, MaxAgeNs          int64
}

// apiHost answers a host, or false when the API has none of that name.
func (w *webBridge) apiHost(t *testing.T, name string) (hostInfo, bool) {
	t.Helper()
	code, b := apiGet(t, "GET", w.base+"/api/v1/hosts/"+url.PathEscape(name), "", "")
	if code == 404 {
		return hostInfo{}, false
	}
	var h hostInfo
	if code != 200 || json.Unmarshal(b, &h) != nil {
		t.Fatalf("host %s: %d %s", name, code, b)
	}
	return h, true
}

// hostRow is the selector of a host's row in the hosts table.
func hostRow(name string) string { return `#hosts-table tr[data-host="` + name + `"]` }

// TestWebHosts: the hosts page lists the store's hosts by group; without
// a token a write shows the API's 401 and changes nothing; with one, a
// host is added through the form (the API's validation errors shown
// beside it), edited with only the changed field sent, disabled and
// deleted, each checked through the API; a host's row links to its
// search, and the list refreshes itself.
func TestWebHosts(t *testing.T) {
	w := startWebBridge(t)
	// Groups as an operator would set them.
	for host, group := range map[string]string{"frontend-host": "shop", "checkout-host": "shop", "inventory-host": "shop", "realclients-host": "kieker"} {
		if code, b := apiGet(t, "PATCH", w.base+"/api/v1/hosts/"+host, `{"group":"`+group+`"}`, w.token); code != 200 {
			t.Fatalf("group of %s: %d %s", host, code, b)
		}
	}
	ctx := browser(t)
	act(t, ctx, "open", chromedp.Navigate(w.base+"/hosts"))
	waitJS(t, ctx, "the hosts", `document.querySelector('`+hostRow("zorka-host")+`')`)
	code, b := apiGet(t, "GET", w.base+"/api/v1/hosts", "", "")
	var list struct{ Hosts []hostInfo }
	if code != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("hosts: %d %s", code, b)
	}
	var want []string
	for _, h := range list.Hosts {
		want = append(want, h.Name)
	}
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('#hosts-table tr[data-host]')].map(r => r.dataset.host)`)
	if !sameIDSet(got, want) {
		t.Errorf("the table lists %v, the API %v", got, want)
	}
	if row := eval[string](t, ctx, `document.querySelector('`+hostRow("zorka-host")+`').innerText`); !strings.Contains(row, "127.0.0.1") || !strings.Contains(row, "ago") {
		t.Errorf("zorka-host's row (an agent connected from 127.0.0.1) is %q", row)
	}
	// The hosts whose spans are below another host's root span (the
	// frontend's) are contact and store their share too.
	for _, host := range []string{"frontend-host", "checkout-host", "inventory-host"} {
		contact := eval[string](t, ctx, `document.querySelector('`+hostRow(host)+` .h-contact').innerText`)
		size := eval[string](t, ctx, `document.querySelector('`+hostRow(host)+` .h-size').innerText`)
		if !strings.Contains(contact, "ago") || size == "0 B" || size == "" {
			t.Errorf("%s's last contact is %q, its size %q", host, contact, size)
		}
	}
	// The page recovers from a hidden form: the messages go where the
	// write was asked for.
	formError := `document.querySelector('#host-add .form-error').innerText`
	fillAdd := func(name, maxSize string) {
		eval[bool](t, ctx, `(() => {
			const f = document.querySelector('#host-add');
			f.hidden = false;
			for (const [k, v] of Object.entries({name: `+jsString(name)+`, addr: '10.0.0.7', secret: 's3cret', group: 'edge',
				comment: 'added by the browser test', maxSize: `+jsString(maxSize)+`, maxAge: '7d'})) f.querySelector('.hf-' + k).value = v;
			return true
		})()`)
	}

	// Each group has a header row above its hosts.
	groups := eval[string](t, ctx, `[...document.querySelectorAll('#hosts-table tbody tr')].map(r => r.classList.contains('group-row') ? '|' + r.dataset.group + ':' : r.dataset.host + ',').join('')`)
	if want := "|kieker:realclients-host,|shop:checkout-host,frontend-host,inventory-host,|:zorka-host,"; groups != want {
		t.Errorf("the table's groups are %s, want %s", groups, want)
	}

	t.Run("no token", func(t *testing.T) {
		act(t, ctx, "show the form", chromedp.Click(css("#hosts-add-toggle")), chromedp.WaitVisible(css("#host-add .hf-name")))
		fillAdd("web-host", "2GiB")
		act(t, ctx, "add", chromedp.Click(css("#host-add button[type=submit]")))
		waitJS(t, ctx, "the 401", formError)
		if msg := eval[string](t, ctx, formError); !strings.HasPrefix(msg, "401") || !strings.Contains(msg, "Token") {
			t.Errorf("adding without a token says %q", msg)
		}
		if _, ok := w.apiHost(t, "web-host"); ok {
			t.Errorf("the host was added without a token")
		}
		// A toggle is refused too, and flips back.
		act(t, ctx, "disable", chromedp.Click(css(hostRow("zorka-host")+" input.h-enabled")))
		waitJS(t, ctx, "the toggle's 401", `document.querySelector('#hosts-message .error')`)
		if msg := eval[string](t, ctx, `document.querySelector('#hosts-message').innerText`); !strings.Contains(msg, "401") || !strings.Contains(msg, "token") {
			t.Errorf("disabling without a token says %q", msg)
		}
		waitJS(t, ctx, "the toggle flipped back", `document.querySelector('`+hostRow("zorka-host")+` input.h-enabled').checked`)
		if h, _ := w.apiHost(t, "zorka-host"); !h.Enabled {
			t.Errorf("zorka-host was disabled without a token")
		}
	})

	w.login(t, ctx)
	if eval[bool](t, ctx, `!document.querySelector('#hosts-token-hint').hidden`) {
		t.Errorf("with a token the page still asks for one")
	}
	t.Run("add", func(t *testing.T) {
		// The API's validation message is shown beside the form.
		fillAdd("web-host", "lots")
		act(t, ctx, "add a bad one", chromedp.Click(css("#host-add button[type=submit]")))
		waitJS(t, ctx, "the 400", formError+`.startsWith('400')`)
		if msg := eval[string](t, ctx, formError); !strings.Contains(msg, "maxSize") {
			t.Errorf("a bad size says %q", msg)
		}
		fillAdd("web-host", "2GiB")
		act(t, ctx, "add", chromedp.Click(css("#host-add button[type=submit]")))
		waitJS(t, ctx, "the new row", `document.querySelector('`+hostRow("web-host")+`')`)
		h, ok := w.apiHost(t, "web-host")
		if want := (hostInfo{Name: "web-host", Group: "edge", Addr: "10.0.0.7", Comment: "added by the browser test", Secret: true, Enabled: true,
			MaxSize: 2 << 30, MaxAgeNs: int64(7 * 24 * time.Hour)}); !ok || h != want {
			t.Errorf("the API has %+v, want %+v", h, want)
		}
		// It is listed under its group.
		if g := eval[string](t, ctx, `(() => { let r = document.querySelector('`+hostRow("web-host")+`'); while (r && !r.classList.contains('group-row')) r = r.previousElementSibling; return r ? r.dataset.group : '' })()`); g != "edge" {
			t.Errorf("web-host is under the group %q", g)
		}
		if row := eval[string](t, ctx, `document.querySelector('`+hostRow("web-host")+`').innerText`); !strings.Contains(row, "2.0 GiB") || !strings.Contains(row, "7d") {
			t.Errorf("the new row is %q", row)
		}
		shot(t, ctx, "hosts")
	})

	t.Run("edit", func(t *testing.T) {
		// Record the bodies the page sends.
		eval[bool](t, ctx, `(() => { window.sent = []; const f = window.fetch; window.fetch = (u, o) => { if (o && o.body) window.sent.push(o.method + ' ' + u + ' ' + o.body); return f(u, o) }; return true })()`)
		act(t, ctx, "edit", chromedp.Click(css(hostRow("web-host")+` button[data-act="edit"]`)), chromedp.WaitVisible(css("#host-edit .hf-group")))
		if v := eval[string](t, ctx, `['addr', 'group', 'maxSize', 'maxAge'].map(k => document.querySelector('#host-edit .hf-' + k).value).join(' ')`); v != "10.0.0.7 edge 2GiB 7d" {
			t.Errorf("the edit form shows %q", v)
		}
		eval[bool](t, ctx, `(document.querySelector('#host-edit .hf-group').value = '', true)`)
		act(t, ctx, "group", chromedp.SendKeys(css("#host-edit .hf-group"), "core"))
		shot(t, ctx, "hosts-edit")
		act(t, ctx, "save", chromedp.Click(css("#host-edit button[type=submit]")))
		waitJS(t, ctx, "the dialog to close", `!document.querySelector('#host-edit').open`)
		if h, _ := w.apiHost(t, "web-host"); h.Group != "core" || h.Addr != "10.0.0.7" || !h.Secret || h.MaxSize != 2<<30 || h.Comment != "added by the browser test" {
			t.Errorf("after the edit the API has %+v", h)
		}
		if sent := eval[[]string](t, ctx, `window.sent`); len(sent) != 1 || sent[0] != `PATCH /api/v1/hosts/web-host {"group":"core"}` {
			t.Errorf("the edit sent %q, want only the group", sent)
		}
		waitJS(t, ctx, "the row under core", `document.querySelector('`+hostRow("web-host")+` .h-group').innerText === 'core'`)
	})

	t.Run("disable", func(t *testing.T) {
		act(t, ctx, "disable", chromedp.Click(css(hostRow("web-host")+" input.h-enabled")))
		waitJS(t, ctx, "the disabled row", `document.querySelector('`+hostRow("web-host")+`.disabled')`)
		if h, _ := w.apiHost(t, "web-host"); h.Enabled {
			t.Errorf("the API says web-host is enabled")
		}
	})

	t.Run("refresh", func(t *testing.T) {
		// A host added elsewhere shows up without a reload.
		code, b := apiGet(t, "POST", w.base+"/api/v1/hosts", `{"name":"api-host","group":"core"}`, w.token)
		if code != 201 {
			t.Fatalf("adding api-host: %d %s", code, b)
		}
		waitJS(t, ctx, "api-host", `document.querySelector('`+hostRow("api-host")+`')`)
	})

	t.Run("delete", func(t *testing.T) {
		act(t, ctx, "delete", chromedp.Click(css(hostRow("web-host")+` button[data-act="delete"]`)), chromedp.WaitVisible(css("#host-delete-yes")))
		// Cancel keeps it.
		act(t, ctx, "cancel", chromedp.Click(css("#host-delete-no")))
		if _, ok := w.apiHost(t, "web-host"); !ok {
			t.Fatalf("cancelling deleted the host")
		}
		act(t, ctx, "delete", chromedp.Click(css(hostRow("web-host")+` button[data-act="delete"]`)), chromedp.WaitVisible(css("#host-delete-yes")),
			chromedp.Click(css("#host-delete-yes")))
		waitJS(t, ctx, "the row to go", `!document.querySelector('`+hostRow("web-host")+`')`)
		if msg := eval[string](t, ctx, `document.querySelector('#hosts-message').innerText`); msg != "Host web-host deleted." {
			t.Errorf("after the deletion the page says %q", msg)
		}
		if _, ok := w.apiHost(t, "web-host"); ok {
			t.Errorf("the API still has web-host")
		}
	})

	t.Run("group filter", func(t *testing.T) {
		eval[bool](t, ctx, `(() => { const s = document.querySelector('#hosts-group'); s.value = 'core'; s.dispatchEvent(new Event('change')); return true })()`)
		if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#hosts-table tr[data-host]')].map(r => r.dataset.host)`); !slices.Equal(got, []string{"api-host"}) {
			t.Errorf("the group core lists %v", got)
		}
		if s := eval[string](t, ctx, "location.search"); s != "?group=core" {
			t.Errorf("the address is %s", s)
		}
	})

	t.Run("search link", func(t *testing.T) {
		// Leaving the page stops its refreshing: count the requests for
		// the host list, seen while the page is open (its refresh every
		// 5 s), after the search page has loaded for longer than that
		// (on the page's own clock: a tick a second).
		eval[bool](t, ctx, `(() => {
			window.hostCalls = 0;
			const f = window.fetch;
			window.fetch = (u, o) => { if (String(u).startsWith('/api/v1/hosts')) window.hostCalls++; return f(u, o) };
			return true;
		})()`)
		waitJS(t, ctx, "a refresh of the hosts page", `window.hostCalls > 0`)
		act(t, ctx, "search", chromedp.Click(css(`#nav a[data-view="search"]`)))
		waitJS(t, ctx, "the search", searchDone+` && document.querySelector('#f-host option[value="zorka-host"]')`)
		before := eval[int](t, ctx, `(() => { window.ticks = 0; window.tickTimer = setInterval(() => window.ticks++, 1000); return window.hostCalls; })()`)
		waitJS(t, ctx, "six seconds on the search page", `window.ticks >= 6`)
		if after := eval[int](t, ctx, `(() => { clearInterval(window.tickTimer); return window.hostCalls; })()`); after != before {
			t.Errorf("%d requests for the hosts after leaving the page", after-before)
		}

		act(t, ctx, "open", chromedp.Navigate(w.base+"/hosts"))
		waitJS(t, ctx, "the hosts", `document.querySelector('`+hostRow("frontend-host")+`')`)
		act(t, ctx, "link", chromedp.Click(css(hostRow("frontend-host")+" td.h-name a")))
		waitJS(t, ctx, "the search", `location.pathname === '/search' && `+searchDone)
		if q := eval[string](t, ctx, "location.search"); q != "?host=frontend-host" {
			t.Errorf("the link goes to %s", q)
		}
		if got, want := searchTableIDs(t, ctx), summaryIDs(w.apiSearch(t, "host=frontend-host&limit=100")); !slices.Equal(got, want) {
			t.Errorf("the host's search shows %v, want %v", got, want)
		}
	})
}
