package store

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// mkTrace builds a trace of n spans on host (a root and n-1 children);
// the root's attributes carry the trace number.
func mkTrace(i int, host string, n int, start, dur int64, errSpan bool) *trace.Trace {
	t := &trace.Trace{ID: trace.ID{Hi: 7, Lo: uint64(i + 1)}}
	t.Spans = append(t.Spans, trace.Span{SpanID: 1, Parent: -1, Operation: "GET /item/" + strconv.Itoa(i%5), Component: "web.Handler",
		Host: host, Service: "web-" + host, Start: start, End: start + dur, Source: trace.FromSpan,
		Attributes: []trace.Attr{{Key: "n", Value: strconv.Itoa(i), Type: trace.TypeInt}, {Key: "user", Value: "u" + strconv.Itoa(i%7), Type: trace.TypeString}},
		OrderIndex: -1, EOI: -1, ESS: -1})
	for j := 1; j < n; j++ {
		s := trace.Span{SpanID: trace.SpanID(j + 1), ParentID: 1, Parent: 0, Depth: 1, Operation: "SELECT * FROM t" + strconv.Itoa(j),
			Component: "db.Client", Host: "db", Service: "db", Start: start + int64(j), End: start + int64(j) + 10,
			Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1}
		if errSpan && j == n-1 {
			s.Error = true
			s.StatusMessage = "java.sql.SQLTimeoutException"
			s.Events = []trace.Event{{Name: "exception", Time: s.End, Attributes: []trace.Attr{{Key: "exception.message", Value: "query timed out after 10ms", Type: trace.TypeString}}}}
		}
		t.Spans = append(t.Spans, s)
	}
	return t
}

func open(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestAppendGetSearchReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{ChunkSize: 4 << 10, HeadSize: 24 << 10})
	var all []*trace.Trace
	for i := range 300 {
		host := []string{"alpha", "beta", "gamma"}[i%3]
		all = append(all, mkTrace(i, host, 1+i%4, int64(1_000_000+i*1000), int64(100+i), i%10 == 0))
	}
	if _, err := s.Append(all); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 17, 299} {
		got, err := s.Get(all[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(all[i], got, cmpopts.IgnoreUnexported(trace.Span{})); d != "" {
			t.Fatalf("trace %d (-want +got):\n%s", i, d)
		}
	}
	if _, err := s.Get(trace.ID{Lo: 999999}); err != ErrNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	check := func(name string, q Query, want func(i int, tr *trace.Trace) bool) {
		t.Helper()
		var expect []string
		for i := len(all) - 1; i >= 0; i-- {
			if want(i, all[i]) {
				expect = append(expect, all[i].ID.String())
			}
		}
		var got []string
		q.Limit = 7
		for {
			p, err := s.Search(q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, sum := range p.Traces {
				got = append(got, sum.TraceID)
			}
			if !p.More {
				break
			}
			q.Cursor = p.Cursor
		}
		if d := cmp.Diff(expect, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
	check("all", Query{}, func(int, *trace.Trace) bool { return true })
	check("host beta", Query{Hosts: []string{"beta"}}, func(i int, _ *trace.Trace) bool { return i%3 == 1 })
	check("host db", Query{Hosts: []string{"db"}}, func(i int, _ *trace.Trace) bool { return 1+i%4 > 1 })
	check("hosts alpha, db", Query{Hosts: []string{"alpha", "db"}}, func(i int, _ *trace.Trace) bool { return i%3 == 0 || 1+i%4 > 1 })
	check("since/until", Query{Since: 1_000_000 + 50*1000, Until: 1_000_000 + 60*1000}, func(i int, _ *trace.Trace) bool { return i >= 50 && i <= 60 })
	check("min duration", Query{MinDuration: 350}, func(i int, tr *trace.Trace) bool { return tr.Duration() >= 350 })
	check("max duration", Query{MaxDuration: 150}, func(i int, tr *trace.Trace) bool { return tr.Duration() <= 150 })
	check("errors", Query{Errors: true}, func(i int, tr *trace.Trace) bool { return tr.Errors() > 0 })
	check("name", Query{Name: "get /ITEM/3"}, func(i int, _ *trace.Trace) bool { return i%5 == 3 })
	check("service", Query{Service: "db"}, func(i int, _ *trace.Trace) bool { return 1+i%4 > 1 })
	check("attr", Query{Attrs: []trace.Attr{{Key: "user", Value: "u3"}}}, func(i int, _ *trace.Trace) bool { return i%7 == 3 })
	check("text root", Query{Text: "item/4"}, func(i int, _ *trace.Trace) bool { return i%5 == 4 })
	check("text deep", Query{Text: "TIMED OUT", Deep: true}, func(i int, tr *trace.Trace) bool { return tr.Errors() > 0 })
	check("text root only misses deep", Query{Text: "timed out"}, func(int, *trace.Trace) bool { return false })
	check("regex deep", Query{Regex: regexp.MustCompile(`FROM t[3]$`), Deep: true}, func(i int, _ *trace.Trace) bool { return 1+i%4 >= 4 })
	check("service and text", Query{Service: "web-alpha", Text: "item/2"}, func(i int, _ *trace.Trace) bool { return i%3 == 0 && i%5 == 2 })
	check("match", Query{Match: func(t *trace.Trace, _ bool) bool { return t.Spans[0].Attributes[0].Value == "42" }}, func(i int, _ *trace.Trace) bool { return i == 42 })
	// Oldest first.
	p, err := s.Search(Query{Oldest: true, Limit: 3})
	if err != nil || len(p.Traces) != 3 || p.Traces[0].TraceID != all[0].ID.String() || !p.More {
		t.Fatalf("oldest first: %+v %v", p, err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, Options{})
	if n, err := s2.Count(); err != nil || n != len(all) {
		t.Fatalf("after reopen: %d traces, %v", n, err)
	}
	got, err := s2.Get(all[123].ID)
	if err != nil || got.Spans[0].Attributes[0].Value != "123" {
		t.Fatalf("after reopen: %v %v", got, err)
	}
	want := 0
	for _, tr := range all {
		if tr.Duration() >= 350 {
			want++
		}
	}
	if p, err := s2.Search(Query{MinDuration: 350, Limit: 1000}); err != nil || len(p.Traces) != want {
		t.Fatalf("min duration after reopen: %d traces, want %d, %v", len(p.Traces), want, err)
	}
	// Appending after a reopen goes on with the same symbols.
	if _, err := s2.Append([]*trace.Trace{mkTrace(1000, "alpha", 3, 9_000_000, 5, false)}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Sync(); err != nil {
		t.Fatal(err)
	}
	if tr, err := s2.Get(trace.ID{Hi: 7, Lo: 1001}); err != nil || tr.Spans[1].Operation != "SELECT * FROM t1" {
		t.Fatalf("%v %v", tr, err)
	}
}

// TestKiekerPositionsAsAttributes: a Kieker call's positions, which JSON
// shows as attributes (kieker.sessionId, kieker.traceId, …), are found by
// attribute filters and grouped by pivots like recorded attributes.
func TestKiekerPositionsAsAttributes(t *testing.T) {
	s := open(t, t.TempDir(), Options{ChunkSize: 1 << 10, HeadSize: 4 << 10})
	var all []*trace.Trace
	for i := range 60 {
		tr := &trace.Trace{ID: trace.ID{Lo: uint64(1000 + i)}}
		for j := range 3 {
			sp := trace.Span{SpanID: trace.SpanID(j + 1), Parent: int32(j - 1), Operation: "void shop.Cart.add" + strconv.Itoa(j) + "()",
				Component: "shop.Cart", Host: "jvm-1", Thread: "1", Start: int64(i*1000 + j), End: int64(i*1000 + 100 - j),
				Source: trace.FromEvents, OrderIndex: int32(j), EOI: -1, ESS: -1, KiekerTrace: int64(1000 + i), Session: "s" + strconv.Itoa(i%4)}
			if j > 0 {
				sp.ParentID = trace.SpanID(j)
				sp.Depth = int32(j)
			}
			tr.Spans = append(tr.Spans, sp)
		}
		all = append(all, tr)
	}
	if _, err := s.Append(all); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	p, err := s.Search(Query{Attrs: []trace.Attr{{Key: "kieker.sessionId", Value: "s2"}}, Limit: 100})
	if err != nil || len(p.Traces) != 15 {
		t.Fatalf("kieker.sessionId=s2: %d traces, %v", len(p.Traces), err)
	}
	p, err = s.Search(Query{Attrs: []trace.Attr{{Key: "kieker.traceId", Value: "1042"}}, Limit: 100})
	if err != nil || len(p.Traces) != 1 || p.Traces[0].ID != all[42].ID {
		t.Fatalf("kieker.traceId=1042: %+v, %v", p.Traces, err)
	}
	rows, _, err := s.Pivot(Query{}, "kieker.sessionId")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Value+":"+strconv.Itoa(r.Calls))
	}
	slices.Sort(got)
	if d := cmp.Diff([]string{"s0:15", "s1:15", "s2:15", "s3:15"}, got); d != "" {
		t.Fatalf("pivot (-want +got):\n%s", d)
	}
}

// TestBudgetCutPagesResume: a block scan that the time budget cuts after
// every block (blocks of four hosts overlap in time) still pages through
// every match exactly once and in order, newest or oldest first, and every
// cut page has a cursor.
func TestBudgetCutPagesResume(t *testing.T) {
	s := open(t, t.TempDir(), Options{ChunkSize: 512, HeadSize: 2 << 10})
	var traces []*trace.Trace
	for i := range 400 {
		host := "h" + strconv.Itoa(i%4)
		// Hosts drift apart in time so that their blocks overlap.
		start := int64(1e12 + i*1000 + (i%4)*37000)
		traces = append(traces, mkTrace(i, host, 3, start, int64(100+i%50), i%9 == 0))
	}
	if _, err := s.Append(traces); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// A text search reads the traces' bytes, a host's search the rows.
	searches := []struct {
		name string
		q    Query
		want int
	}{
		{"text", Query{Text: "select * from t2", Deep: true}, 400},
		{"host", Query{Hosts: []string{"h1"}}, 100},
	}
	for _, c := range searches {
		for _, oldest := range []bool{false, true} {
			budgetCutPages(t, s, c.name, c.q, oldest, c.want)
		}
	}
}

func budgetCutPages(t *testing.T, s *Store, name string, q Query, oldest bool, want int) {
	t.Helper()
	q.Oldest = oldest
	{
		q := q
		q.Limit = 1000
		full, err := s.Search(q)
		if err != nil || full.Partial || len(full.Traces) != want {
			t.Fatalf("%s oldest=%v: the whole search: %d traces, partial %v, %v", name, oldest, len(full.Traces), full.Partial, err)
		}
		for _, limit := range []int{7, 1000} {
			var got []Summary
			cursor := ""
			scanned := 0
			for pages := 0; ; pages++ {
				q := q
				q.Limit, q.Cursor, q.HitBudget, q.TotalBudget = limit, cursor, time.Nanosecond, time.Nanosecond
				p, err := s.Search(q)
				scanned += p.Scanned
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Traces...)
				if !p.More {
					break
				}
				if p.Cursor == "" {
					t.Fatalf("%s oldest=%v limit=%d: page %d says more but has no cursor", name, oldest, limit, pages)
				}
				if pages > 2000 {
					t.Fatalf("%s oldest=%v limit=%d: no end after %d pages", name, oldest, limit, pages)
				}
				cursor = p.Cursor
			}
			ids := func(ss []Summary) []string {
				var out []string
				for _, x := range ss {
					out = append(out, x.TraceID)
				}
				return out
			}
			if diff := cmp.Diff(ids(full.Traces), ids(got)); diff != "" {
				t.Errorf("%s oldest=%v limit=%d: paging with a cut budget differs from the whole search (-whole +paged):\n%s", name, oldest, limit, diff)
			}
			// Pages skip the blocks earlier pages read. With a budget
			// that cuts every page after one block, a page reads that
			// block and again the ones it overlaps (four hosts' heads
			// and blocks of about a dozen traces): about fifteen times
			// the whole search, not the quadratic thirty times and more
			// of reading every earlier block again.
			if scanned > 20*full.Scanned {
				t.Errorf("%s oldest=%v limit=%d: %d traces read over the pages, the whole search reads %d", name, oldest, limit, scanned, full.Scanned)
			}
		}
	}
}
