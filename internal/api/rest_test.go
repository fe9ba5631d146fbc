package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// mixed returns the shop's traces plus Kieker-like traces of other
// hosts, with root attributes to pivot on.
func mixed(base time.Time) []*trace.Trace {
	out := shop(40, base)
	for i := range 30 {
		at := base.Add(time.Duration(100+i) * time.Millisecond)
		host := []string{"alpha", "beta"}[i%2]
		var spans []trace.Span
		d := time.Duration(1+i%5) * time.Millisecond
		root := trace.Span{SpanID: trace.SpanID(1000 + i), Host: host, Operation: "public void shop.Cart.checkout()", Component: "shop.Cart",
			Start: at.UnixNano(), End: at.Add(d).UnixNano(), Source: trace.FromEvents, KiekerTrace: int64(i + 1), Thread: "7",
			Attributes: []trace.Attr{sattr("customer", []string{"gold", "silver", "bronze"}[i%3])}}
		spans = append(spans, root)
		for j := range i % 4 {
			spans = append(spans, trace.Span{SpanID: trace.SpanID(100_000 + i*10 + j), ParentID: root.SpanID, Host: host,
				Operation: "private int shop.Dao.load(int)", Component: "shop.Dao", Start: at.Add(time.Duration(j+1) * 100 * time.Microsecond).UnixNano(),
				End: at.Add(time.Duration(j+1)*100*time.Microsecond + 50*time.Microsecond).UnixNano(), Error: i%7 == 0 && j == 0,
				Source: trace.FromEvents, KiekerTrace: int64(i + 1), OrderIndex: int32(j + 1), Thread: "7"})
		}
		out = append(out, build(trace.KiekerID(int64(i+1)), spans))
	}
	return out
}

func ids(page store.Page) []string {
	var out []string
	for _, t := range page.Traces {
		out = append(out, t.TraceID)
	}
	return out
}

// TestSearchFilters: every filter of the store's query (docs/QUERY.md)
// reaches the store as the CLI's flags do: the API's pages equal the
// store's answers to the same query.
func TestSearchFilters(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	e := newEnv(t, nil, mixed(base)...)
	ex, _ := eql.Parse("time > 2ms")
	for _, c := range []struct {
		params url.Values
		q      store.Query
	}{
		{url.Values{}, store.Query{}},
		{url.Values{"host": {"alpha"}}, store.Query{Hosts: []string{"alpha"}}},
		{url.Values{"host": {"alpha", "beta"}}, store.Query{Hosts: []string{"alpha", "beta"}}},
		{url.Values{"since": {base.Add(110 * time.Millisecond).Format(time.RFC3339Nano)}}, store.Query{Since: base.Add(110 * time.Millisecond).UnixNano()}},
		{url.Values{"until": {base.Add(110 * time.Millisecond).Format(time.RFC3339Nano)}}, store.Query{Until: base.Add(110 * time.Millisecond).UnixNano()}},
		{url.Values{"minDuration": {"3ms"}}, store.Query{MinDuration: 3 * time.Millisecond}},
		{url.Values{"maxDuration": {"2ms"}}, store.Query{MaxDuration: 2 * time.Millisecond}},
		{url.Values{"errors": {""}}, store.Query{Errors: true}},
		{url.Values{"errors": {"true"}, "host": {"alpha"}}, store.Query{Errors: true, Hosts: []string{"alpha"}}},
		{url.Values{"name": {"GET /API/ORDERS/{id}"}}, store.Query{Name: "GET /API/ORDERS/{id}"}},
		{url.Values{"service": {"svc-3"}}, store.Query{Service: "svc-3"}},
		{url.Values{"attr": {"customer=gold"}}, store.Query{Attrs: []trace.Attr{{Key: "customer", Value: "gold"}}}},
		{url.Values{"q": {"cart"}}, store.Query{Text: "cart"}},
		{url.Values{"q": {"dao"}, "deep": {"true"}}, store.Query{Text: "dao", Deep: true}},
		{url.Values{"eql": {"time > 2ms"}}, store.Query{Match: ex.MatchTrace}},
		{url.Values{"oldest": {"1"}, "limit": {"5"}}, store.Query{Oldest: true, Limit: 5}},
	} {
		var got SearchResult
		e.get("/api/v1/traces?"+c.params.Encode(), &got)
		if c.q.Limit == 0 {
			c.q.Limit = 20
		}
		want, err := e.st.Search(c.q)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, s := range got.Traces {
			gotIDs = append(gotIDs, s.TraceID)
		}
		if !slices.Equal(gotIDs, ids(want)) || got.More != want.More {
			t.Errorf("%v: %v (more %v), store says %v (more %v)", c.params, gotIDs, got.More, ids(want), want.More)
		}
		if len(gotIDs) == 0 && c.params.Get("maxDuration") == "" && c.params.Get("eql") == "" {
			t.Errorf("%v: nothing found; the test data should match", c.params)
		}
	}
	// ~REGEX.
	var got SearchResult
	e.get("/api/v1/traces?"+url.Values{"q": {`~^GET /api/orders/\{id\}$`}, "limit": {"100"}}.Encode(), &got)
	if len(got.Traces) != 40 {
		t.Errorf("~REGEX: %d traces, want 40", len(got.Traces))
	}
	// Summaries carry the root span's attributes with their types.
	e.get("/api/v1/traces?name=GET+/api/orders/%7Bid%7D&limit=1", &got)
	if a := got.Traces[0].Attributes; string(a["http.status_code"]) != "200" || string(a["http.route"]) != `"/api/orders/{id}"` {
		t.Errorf("attributes %s", a)
	}
	// And its service, for the UI's table.
	if s := got.Traces[0].Service; !strings.HasPrefix(s, "svc-") {
		t.Errorf("service %q, want the root span's", s)
	}
}

// TestSearchPaging: "more" paging with cursors walks every trace once.
func TestSearchPaging(t *testing.T) {
	traces := mixed(time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		q := url.Values{"limit": {"7"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var got SearchResult
		e.get("/api/v1/traces?"+q.Encode(), &got)
		for _, s := range got.Traces {
			if seen[s.TraceID] {
				t.Fatalf("trace %s twice", s.TraceID)
			}
			seen[s.TraceID] = true
		}
		if !got.More {
			break
		}
		cursor = got.Cursor
		if page > 20 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != len(traces) {
		t.Errorf("%d traces paged, want %d", len(seen), len(traces))
	}
	code, b, _ := e.do("GET", "/api/v1/traces?cursor=nonsense", "")
	if code != http.StatusBadRequest || !strings.Contains(string(b), "cursor") {
		t.Errorf("bad cursor: %d %s", code, b)
	}
}

// TestBadParameters: every parameter is checked; the answer is a 400
// naming the parameter and what is wanted.
func TestBadParameters(t *testing.T) {
	e := newEnv(t, nil, mixed(time.Now().Add(-time.Hour))...)
	id := trace.KiekerID(1).String()
	for _, c := range []struct{ path, mention string }{
		{"/api/v1/traces?limit=0", "limit"},
		{"/api/v1/traces?limit=100001", "limit"},
		{"/api/v1/traces?limit=ten", "limit"},
		{"/api/v1/traces?since=yesterday", "since"},
		{"/api/v1/traces?since=1h&until=2h", "since: after until"},
		{"/api/v1/traces?minDuration=-1s", "minDuration"},
		{"/api/v1/traces?minDuration=2s&maxDuration=1s", "above maxDuration"},
		{"/api/v1/traces?errors=maybe", "errors"},
		{"/api/v1/traces?attr=novalue", "KEY=VALUE"},
		{"/api/v1/traces?q=~(unclosed", "~REGEX"},
		{"/api/v1/traces?q=~" + url.QueryEscape(strings.Repeat("(a|b)", 1000)), "regular expression"},
		{"/api/v1/traces?q=~" + url.QueryEscape("(x{1000}){1000}"), "~REGEX"},
		{"/api/v1/traces?eql=" + url.QueryEscape("time >"), "eql"},
		{"/api/v1/traces?budget=5m", "budget"},
		{"/api/v1/traces?limit=1&limit=2", "at most once"},
		{"/api/v1/traces?colour=red", `unknown parameter "colour"`},
		{"/api/v1/traces/not-an-id", "trace id"},
		{"/api/v1/traces/" + id + "?format=xml", "format"},
		{"/api/v1/traces/" + id + "/view?maxSpans=0", "maxSpans"},
		{"/api/v1/traces/" + id + "/view?root=999", "root"},
		{"/api/v1/traces/" + id + "/view?reveal=x", "reveal"},
		{"/api/v1/traces/" + id + "/find", "q"},
		{"/api/v1/traces/" + id + "/find?q=x&fields=colours", "fields"},
		{"/api/v1/traces/" + id + "/spans/x", "index"},
		{"/api/v1/compare?a=1", "b"},
		{"/api/v1/pivot", "key"},
		{"/api/v1/analysis/graph?kind=nonsense", "kind"},
		{"/api/v1/analysis/graph?maxTraces=0", "maxTraces"},
		{"/api/v1/profiles/flame", "host"},
	} {
		code, b, _ := e.do("GET", c.path, "")
		var eb errorBody
		json.Unmarshal(b, &eb)
		if code != http.StatusBadRequest || !strings.Contains(eb.Error, c.mention) {
			t.Errorf("GET %s: %d %s; want 400 mentioning %q", c.path, code, b, c.mention)
		}
	}
	for _, path := range []string{"/api/v1/traces/12345678", "/api/v1/traces/0123456789abcdef0123456789abcdef/view", "/api/v1/compare?a=1&b=999999"} {
		if code, b, _ := e.do("GET", path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s; want 404", path, code, b)
		}
	}
}

// TestTrace: a trace by id in full (the JSON of `traces --json`, the
// text tree), a span's details, in-trace search, the ranking.
func TestTrace(t *testing.T) {
	traces := mixed(time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	tr := traces[9] // an error trace of the shop
	id := tr.ID.String()
	if got := e.get("/api/v1/traces/"+id, nil); !bytes.Equal(got, append(trace.AppendJSON(nil, tr), '\n')) {
		t.Errorf("trace JSON:\n%s\nwant:\n%s", got, trace.AppendJSON(nil, tr))
	}
	var text bytes.Buffer
	trace.WriteText(&text, tr)
	if got := e.get("/api/v1/traces/"+id+"?format=text", nil); string(got) != text.String() {
		t.Errorf("text:\n%s\nwant:\n%s", got, text.String())
	}
	// Kieker's decimal traceIds work too.
	e.get("/api/v1/traces/"+traces[45].ID.String(), nil)

	i := slices.IndexFunc(tr.Spans, func(s trace.Span) bool { return s.Operation == "SELECT orders" })
	var d SpanDetail
	e.get(fmt.Sprintf("/api/v1/traces/%s/spans/%d", id, i), &d)
	if d.Index != i || d.Operation != "SELECT orders" || !d.Error || d.Status != "error" || d.StatusMessage != "deadlock detected" ||
		len(d.Events) != 1 || d.Events[0].Name != "exception" || d.Parent != int(tr.Spans[i].Parent) || len(d.Attributes) != 2 || d.Kieker != nil {
		t.Errorf("span detail %+v", d)
	}
	if code, _, _ := e.do("GET", fmt.Sprintf("/api/v1/traces/%s/spans/%d", id, len(tr.Spans)), ""); code != http.StatusNotFound {
		t.Errorf("span beyond the trace: %d", code)
	}
	var ks SpanDetail
	e.get("/api/v1/traces/"+traces[45].ID.String()+"/spans/0", &ks)
	if ks.Kieker == nil || ks.Kieker.TraceID != 6 || ks.Source != "kieker-events" {
		t.Errorf("Kieker span %+v", ks)
	}

	var found FindResult
	e.get("/api/v1/traces/"+id+"/find?q=svc-3", &found)
	want := trace.Find(tr, "svc-3", nil, trace.AllFields, false)
	if found.Count != len(want) || len(found.Hits) != len(want) || found.Hits[0].Index != want[0] {
		t.Errorf("find svc-3: %+v, want %v", found, want)
	}
	e.get("/api/v1/traces/"+id+"/find?q=~(?i)^get+svc&fields=methods&limit=2", &found)
	if found.Count != 4 || len(found.Hits) != 2 {
		t.Errorf("find ~^get svc: %+v", found)
	}
	e.get("/api/v1/traces/"+id+"/find?q=DEADLOCK&ignoreCase&fields=exceptions", &found)
	if found.Count != 1 || found.Hits[0].Index != i {
		t.Errorf("find deadlock: %+v", found)
	}

	var rank Ranking
	e.get("/api/v1/traces/"+id+"/rank", &rank)
	if !slices.Equal(rank.Rows, trace.Rank(tr)) {
		t.Errorf("rank %+v", rank.Rows)
	}
}

// randomTrace makes a deep, wide trace of n spans.
func randomTrace(rng *rand.Rand, n int) *trace.Trace {
	spans := make([]trace.Span, n)
	base := time.Now().Add(-time.Hour).UnixNano()
	for i := range n {
		s := &spans[i]
		s.SpanID = trace.SpanID(i + 1)
		s.Operation = fmt.Sprintf("op%d", rng.IntN(50))
		s.Source = trace.FromSpan
		if i == 0 {
			s.Start, s.End = base, base+int64(n)*1000
			continue
		}
		p := rng.IntN(i)
		if rng.IntN(4) == 0 {
			p = i - 1 // long chains
		}
		s.ParentID = trace.SpanID(p + 1)
		ps := &spans[p]
		s.Start = ps.Start + rng.Int64N(max(ps.End-ps.Start, 1))
		s.End = s.Start + rng.Int64N(max(ps.End-s.Start, 1))
		s.Error = rng.IntN(20) == 0
	}
	return build(trace.ID{Hi: 1, Lo: rng.Uint64()}, spans)
}

// TestViewPruning: a view shows at most maxSpans spans (plus those
// revealed), never a span without its parent, the longest first; what
// it leaves out is counted exactly, per span and in total.
func TestViewPruning(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 10, 500, 5000} {
		tr := randomTrace(rng, n)
		tree := analysis.NewTree(tr)
		for _, o := range []analysis.ViewOptions{
			{MaxSpans: 1, Root: -1}, {MaxSpans: 10, Root: -1}, {MaxSpans: n, Root: -1}, {MaxSpans: 50, Root: -1, MinDuration: int64(n) * 10},
			{MaxSpans: 20, Root: n / 2}, {MaxSpans: 5, Root: -1, Reveal: []int{n - 1, n / 3}},
		} {
			v := tree.View(o)
			check := func(cond bool, format string, args ...any) {
				if !cond {
					t.Fatalf("n=%d %+v: "+format, append([]any{n, o}, args...)...)
				}
			}
			shown := map[int]bool{}
			for _, s := range v.Spans {
				shown[s.Index] = true
			}
			check(v.Shown == len(v.Spans) && v.Shown <= o.MaxSpans+len(o.Reveal)*n, "shown %d", v.Shown)
			lo, hi := 0, n
			if o.Root >= 0 {
				lo, hi = o.Root, o.Root+tree.Size(o.Root)
			}
			check(v.Shown+v.Pruned == hi-lo, "shown %d + pruned %d != %d", v.Shown, v.Pruned, hi-lo)
			for _, r := range o.Reveal {
				for i := r; i >= 0; i = tree.Parent(i) {
					check(shown[i], "revealed %d: ancestor %d not shown", r, i)
				}
			}
			errs := 0
			for _, s := range v.Spans {
				if s.Error {
					errs++
				}
				if s.Index != o.Root && tree.Parent(s.Index) >= 0 {
					check(shown[s.Parent], "span %d shown without its parent %d", s.Index, s.Parent)
				}
				// Pruned counts what of the subtree is not shown.
				hidden, hiddenErr := 0, 0
				for j := s.Index + 1; j < s.Index+tree.Size(s.Index); j++ {
					if !shown[j] {
						hidden++
						if tr.Spans[j].Error {
							hiddenErr++
						}
					}
				}
				check(s.Pruned == hidden && s.PrunedErrors == hiddenErr, "span %d: pruned %d/%d, want %d/%d", s.Index, s.Pruned, s.PrunedErrors, hidden, hiddenErr)
				check(s.Descendants == tree.Size(s.Index)-1, "descendants")
			}
			totalErr := 0
			for j := lo; j < hi; j++ {
				if tr.Spans[j].Error {
					totalErr++
				}
			}
			check(v.PrunedErrors == totalErr-errs, "pruned errors %d, want %d", v.PrunedErrors, totalErr-errs)
			// The longest first: a span not shown whose parent is shown
			// is no longer than the shortest shown span that was chosen
			// (roots and revealed spans aside).
			if len(o.Reveal) == 0 && o.MinDuration == 0 && v.Pruned > 0 {
				shortest := int64(1 << 62)
				for _, s := range v.Spans {
					if s.Index != o.Root && s.Parent >= 0 {
						shortest = min(shortest, s.DurationNs)
					}
				}
				for j := lo; j < hi; j++ {
					if p := tree.Parent(j); !shown[j] && p >= 0 && shown[p] {
						check(tr.Spans[j].Duration() <= shortest, "span %d (%d ns) left out, %d ns shown", j, tr.Spans[j].Duration(), shortest)
					}
				}
			}
			if o.MinDuration > 0 {
				for _, s := range v.Spans {
					check(s.Parent < 0 || s.DurationNs >= o.MinDuration, "span %d shorter than minDuration", s.Index)
				}
			}
		}
	}
}

// hugeTrace makes a trace of n spans straight in tree order: each span
// is a child of a span on the path to the one before.
func hugeTrace(rng *rand.Rand, n int) *trace.Trace {
	t := &trace.Trace{ID: trace.ID{Hi: 2, Lo: 2}, Spans: make([]trace.Span, n)}
	base := time.Now().Add(-time.Hour).UnixNano()
	path := []int{}
	for i := range n {
		s := &t.Spans[i]
		s.SpanID, s.Operation, s.Source, s.Parent = trace.SpanID(i+1), fmt.Sprintf("op%d", rng.IntN(50)), trace.FromSpan, -1
		if i > 0 {
			path = path[:1+rng.IntN(len(path))]
			p := &t.Spans[path[len(path)-1]]
			s.Parent, s.ParentID, s.Depth = int32(path[len(path)-1]), p.SpanID, p.Depth+1
			s.Start = p.Start + rng.Int64N(max(p.End-p.Start, 1))
			s.End = s.Start + rng.Int64N(max(p.End-s.Start, 1))
		} else {
			s.Start, s.End = base, base+int64(n)*1000
		}
		path = append(path, i)
	}
	return t
}

// TestHugeTraceView: a trace of a million spans is summarised fast.
func TestHugeTraceView(t *testing.T) {
	if testing.Short() {
		t.Skip("a million spans")
	}
	tr := hugeTrace(rand.New(rand.NewPCG(3, 4)), 1_000_000)
	v := analysis.NewTree(tr).View(analysis.ViewOptions{MaxSpans: 10_000, Root: -1})
	if v.Shown != 10_000 || v.Pruned != 990_000 {
		t.Fatalf("shown %d, pruned %d", v.Shown, v.Pruned)
	}
	for _, s := range v.Spans {
		if s.OffsetNs != s.Start-v.Start {
			t.Fatalf("span %d: offset %d, start %d, the trace's %d", s.Index, s.OffsetNs, s.Start, v.Start)
		}
	}
	b, _ := json.Marshal(v)
	t.Logf("a view of 1M spans: %d KB", len(b)>>10)
}

// BenchmarkHugeTraceView: the view of a million-span trace the trace
// page opens with (10,000 spans shown).
func BenchmarkHugeTraceView(b *testing.B) {
	tr := hugeTrace(rand.New(rand.NewPCG(3, 4)), 1_000_000)
	b.ResetTimer()
	for b.Loop() {
		analysis.NewTree(tr).View(analysis.ViewOptions{MaxSpans: 10_000, Root: -1})
	}
}

// TestViewEndpoint: the view over HTTP, with root, reveal and attributes.
func TestViewEndpoint(t *testing.T) {
	traces := shop(10, time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	tr := traces[9]
	id := tr.ID.String()
	var v TraceView
	e.get("/api/v1/traces/"+id+"/view?maxSpans=3", &v)
	if v.Shown != 3 || v.SpanCount != len(tr.Spans) || v.Pruned != len(tr.Spans)-3 || v.ErrorCount != 1 || v.Root != -1 ||
		!slices.Equal(v.Services, []string{"svc-0", "svc-1", "svc-2", "svc-3", "svc-4"}) {
		t.Errorf("view %+v", v)
	}
	// The root's longest child comes first: svc-1's call (5ms).
	if v.Spans[1].Operation != "GET svc-1" || v.Spans[2].Operation != "GET /svc-1/op2" {
		t.Errorf("spans %+v", v.Spans)
	}
	db := slices.IndexFunc(tr.Spans, func(s trace.Span) bool { return s.Operation == "SELECT orders" })
	e.get(fmt.Sprintf("/api/v1/traces/%s/view?maxSpans=1&reveal=%d&attributes", id, db), &v)
	if v.Spans[len(v.Spans)-1].Index != db || v.Spans[len(v.Spans)-1].Attributes["db.system"] == nil || v.PrunedErrors != 0 {
		t.Errorf("revealed %+v", v.Spans)
	}
	e.get(fmt.Sprintf("/api/v1/traces/%s/view?root=%d", id, v.Spans[2].Index), &v)
	if v.Spans[0].Index != v.Root || v.Shown+v.Pruned != v.Spans[0].Descendants+1 {
		t.Errorf("subtree %+v", v)
	}
}

// TestViewSlowestAndErrors: a view names the span with the most self
// time and the spans in error of its scope even when it does not show
// them, so the UI can jump to them with reveal.
func TestViewSlowestAndErrors(t *testing.T) {
	traces := shop(10, time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	tr := traces[9]
	tree := analysis.NewTree(tr)
	want, most := -1, int64(-1)
	for i := range tr.Spans {
		if self := tree.Self(i); self > most {
			want, most = i, self
		}
	}
	db := slices.IndexFunc(tr.Spans, func(s trace.Span) bool { return s.Error })
	var v TraceView
	e.get("/api/v1/traces/"+tr.ID.String()+"/view?maxSpans=1", &v)
	if v.Slowest != want || !slices.Equal(v.ErrorSpans, []int{db}) || v.Shown != 1 {
		t.Errorf("slowest %d (want %d), errors %v (want [%d]), shown %d", v.Slowest, want, v.ErrorSpans, db, v.Shown)
	}
	// Inside a subtree without the error: none, and its own slowest.
	pub := slices.IndexFunc(tr.Spans, func(s trace.Span) bool { return s.Operation == "jobs publish" })
	e.get(fmt.Sprintf("/api/v1/traces/%s/view?root=%d", tr.ID, pub), &v)
	if len(v.ErrorSpans) != 0 || v.ErrorSpans == nil || v.Slowest < pub || v.Slowest > pub+1 {
		t.Errorf("subtree: slowest %d, errors %v", v.Slowest, v.ErrorSpans)
	}
	// Process is in the view when the span has one.
	tr.Spans[0].Process = "4711@svc-0"
	if got := analysis.NewTree(tr).View(analysis.ViewOptions{MaxSpans: 1, Root: -1}).Spans[0].Process; got != "4711@svc-0" {
		t.Errorf("process %q", got)
	}
}

// TestFlameAndCriticalPath: a trace's flame graph weighs call paths by
// time (a frame's value is its calls' time, its self time what its
// children leave); the critical path covers the root's duration exactly
// with the spans the end waited for.
func TestFlameAndCriticalPath(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	ms := time.Millisecond
	// root 0–10ms: a 1–4ms, b 2–9ms (b waits on c 3–8ms), d 9.5–9.8ms.
	spans := []trace.Span{
		span(1, 0, "svc", "root", trace.KindServer, base, 10*ms),
		span(2, 1, "svc", "a", 0, base.Add(ms), 3*ms),
		span(3, 1, "svc", "b", 0, base.Add(2*ms), 7*ms),
		span(4, 3, "svc", "c", 0, base.Add(3*ms), 5*ms),
		span(5, 1, "svc", "d", 0, base.Add(9500*time.Microsecond), 300*time.Microsecond),
		span(6, 1, "svc", "a", 0, base.Add(9900*time.Microsecond), 50*time.Microsecond),
	}
	tr := build(trace.ID{Lo: 77}, spans)
	e := newEnv(t, nil, tr)
	var f Flame
	e.get("/api/v1/traces/77/flame", &f)
	root := f.Root.Children[0]
	if f.Unit != "ns" || f.Root.Value != int64(10*ms) || root.Name != "root" || root.Calls != 1 || len(root.Children) != 3 {
		t.Fatalf("flame %+v", f.Root)
	}
	a := root.Children[0]
	if a.Name != "a" || a.Calls != 2 || a.Value != int64(3*ms+50*time.Microsecond) {
		t.Errorf("frame a %+v", a)
	}
	// a and b overlap: the children take more than the root's time,
	// which leaves it no self time.
	if root.Self != 0 || root.Children[1].Self != int64(2*ms) {
		t.Errorf("self times %d, %d", root.Self, root.Children[1].Self)
	}
	folded := string(e.get("/api/v1/traces/77/flame?format=folded", nil))
	if !strings.Contains(folded, "root;b;c 5000000\n") || !strings.Contains(folded, "root;b 2000000\n") {
		t.Errorf("folded:\n%s", folded)
	}
	if svg := e.get("/api/v1/traces/77/flame?format=svg", nil); !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("root")) {
		t.Errorf("svg %.200s", svg)
	}

	var cp CriticalPath
	e.get("/api/v1/traces/77/critical-path", &cp)
	var total int64
	var path []string
	for i, s := range cp.Segments {
		total += s.End - s.Start
		if i > 0 && s.Start != cp.Segments[i-1].End {
			t.Errorf("segment %d starts at %d, the last ended at %d", i, s.Start, cp.Segments[i-1].End)
		}
		if len(path) == 0 || path[len(path)-1] != s.Operation {
			path = append(path, s.Operation)
		}
	}
	// root until b starts (a overlaps b and ends before b does, so a is
	// not waited for), b, c, b, root, d, root, a(9.9ms), root.
	want := []string{"root", "b", "c", "b", "root", "d", "root", "a", "root"}
	if total != int64(10*ms) || !slices.Equal(path, want) || cp.DurationNs != int64(10*ms) {
		t.Errorf("critical path %v, %d ns; want %v, 10ms", path, total, want)
	}
	if cp.Spans[0].Operation != "c" || cp.Spans[0].OnPathNs != int64(5*ms) || cp.Spans[0].Share != 0.5 {
		t.Errorf("on the path %+v", cp.Spans[0])
	}
}

// TestCompare: the call trees of two traces merged by path.
func TestCompare(t *testing.T) {
	traces := shop(10, time.Now().Add(-time.Hour))
	// A copy of trace 0 without its svc-4 call, with one more database
	// call.
	b := *traces[0]
	b.ID = trace.ID{Lo: 4242}
	var spans []trace.Span
	var dbSpan trace.Span
	for _, s := range traces[0].Spans {
		if strings.Contains(s.Operation, "svc-4") {
			continue
		}
		if s.Operation == "SELECT orders" {
			dbSpan = s
		}
		spans = append(spans, s)
	}
	extra := dbSpan
	extra.SpanID = 999
	spans = append(spans, extra)
	e := newEnv(t, nil, traces[0], build(b.ID, spans))
	var c Comparison
	e.get("/api/v1/compare?a="+traces[0].ID.String()+"&b=4242", &c)
	status := map[string]string{}
	for _, n := range c.Nodes {
		status[n.Operation] = n.Status
		if n.Parent >= 0 && c.Nodes[n.Parent].Depth != n.Depth-1 {
			t.Errorf("node %s: parent at depth %d", n.Operation, c.Nodes[n.Parent].Depth)
		}
	}
	if status["GET svc-4"] != "removed" || status["GET /svc-4/op1"] != "removed" || status["SELECT orders"] != "changed" ||
		status["GET svc-2"] != "same" || c.Counts["removed"] != 2 || c.Counts["changed"] != 1 || c.Counts["added"] != 0 {
		t.Errorf("statuses %v, counts %v", status, c.Counts)
	}
	if c.SideA.Spans != len(traces[0].Spans) || c.SideB.Spans != len(spans) {
		t.Errorf("sides %+v %+v", c.SideA, c.SideB)
	}
}

// TestPivotAndNames: statistics by a root attribute; the names and
// services seen.
func TestPivotAndNames(t *testing.T) {
	traces := mixed(time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	var p PivotResult
	e.get("/api/v1/pivot?key=customer&host=alpha", &p)
	want, _, _ := e.st.Pivot(store.Query{Hosts: []string{"alpha"}}, "customer")
	if !slices.Equal(p.Rows, want) || len(p.Rows) != 3 || p.Key != "customer" {
		t.Errorf("pivot %+v, want %+v", p.Rows, want)
	}
	var n Names
	e.get("/api/v1/names", &n)
	if !slices.Equal(n.Names, []string{"GET /api/orders/{id}", "public void shop.Cart.checkout()"}) || !n.Complete ||
		!slices.Equal(n.Services, []string{"alpha", "beta", "svc-0", "svc-1", "svc-2", "svc-3", "svc-4"}) {
		t.Errorf("names %+v", n)
	}
	e.get("/api/v1/names?host=alpha", &n)
	if !slices.Equal(n.Names, []string{"public void shop.Cart.checkout()"}) {
		t.Errorf("names of alpha %+v", n.Names)
	}
}

// TestAnalysis: the dependency graphs and operation statistics of the
// selected traces are internal/analysis's over the same traces.
func TestAnalysis(t *testing.T) {
	traces := mixed(time.Now().Add(-time.Hour))
	e := newEnv(t, nil, traces...)
	a := analysis.New(analysis.Options{})
	for _, tr := range traces {
		if slices.Contains(tr.Hosts(), "alpha") {
			a.Add(tr)
		}
	}
	for _, kind := range []string{"container", "assembly-component", "deployment-operation", "aggregated-assembly-call-tree"} {
		var got struct {
			Graph   json.RawMessage
			Summary AnalysisSummary
		}
		e.get("/api/v1/analysis/graph?host=alpha&kind="+kind, &got)
		k, _ := analysis.ParseKind(kind)
		g, _ := a.Graph(k)
		if k.Dependency() {
			g = g.WithoutSelfLoops()
		}
		want, _ := json.Marshal(g)
		if !jsonEqual(t, got.Graph, want) || got.Summary.Traces != 15 || got.Summary.Partial || got.Summary.Limited {
			t.Errorf("%s: %s\nwant %s\nsummary %+v", kind, got.Graph, want, got.Summary)
		}
	}
	var ops OperationsResult
	e.get("/api/v1/analysis/operations?host=alpha", &ops)
	wantOps := a.Operations()
	if len(ops.Operations) != len(wantOps) || ops.Operations[0].TotalNs != wantOps[0].Total || ops.Operations[0].Count != wantOps[0].Count {
		t.Errorf("operations %+v, want %+v", ops.Operations, wantOps)
	}
	// maxTraces bounds what is read.
	e.get("/api/v1/analysis/operations?maxTraces=5", &ops)
	if ops.Summary.Traces != 5 || !ops.Summary.Limited {
		t.Errorf("maxTraces=5: %+v", ops.Summary)
	}
	if dot := e.get("/api/v1/analysis/graph?kind=container&format=dot", nil); !bytes.HasPrefix(dot, []byte("digraph")) {
		t.Errorf("dot %.100s", dot)
	}
}

// TestHugeTraceOverHTTP: a trace of 200,000 spans (the assembler's part
// size) opens as a view from the store, and the view is small (its time
// is logged, not asserted: BenchmarkHugeTraceView measures speed).
func TestHugeTraceOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 spans")
	}
	tr := hugeTrace(rand.New(rand.NewPCG(5, 6)), 200_000)
	e := newEnv(t, nil, tr)
	start := time.Now()
	whole := e.get("/api/v1/traces/"+tr.ID.String(), nil)
	wholeTook := time.Since(start)
	start = time.Now()
	var v TraceView
	b := e.get("/api/v1/traces/"+tr.ID.String()+"/view?maxSpans=2000", &v)
	viewTook := time.Since(start)
	t.Logf("200,000 spans: the whole trace %d KB in %v, a view of 2000 spans %d KB in %v", len(whole)>>10, wholeTook, len(b)>>10, viewTook)
	if v.Shown != 2000 || v.SpanCount != 200_000 || len(b) > len(whole)/20 {
		t.Errorf("view: %d shown of %d, %d bytes", v.Shown, v.SpanCount, len(b))
	}
}
