package store

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/hostdb"
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
	s := open(t, dir, Options{BlockSize: 4 << 10})
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
	// The duration buckets with entries are read back from the index.
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

// TestRecoversUnindexedBlocksAndTornTail: blocks written but not indexed
// (a crash between the segment's sync and the index's) are indexed when
// the store opens again; a torn block at the end is cut off and reported.
func TestRecoversUnindexedBlocksAndTornTail(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{BlockSize: 1})
	if _, err := s.Append([]*trace.Trace{mkTrace(1, "h", 2, 10, 5, false)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// A second block reaches the segment, not the index: the batch is
	// dropped as a kill would drop it.
	s.wmu.Lock()
	s.Append2(t, mkTrace(2, "h", 3, 20, 5, true))
	p := s.byName["h"]
	p.seg.Sync()
	s.batch.Close()
	s.batch = nil
	s.closed = true
	p.seg.Close()
	s.closeFiles()
	s.db.Close()
	s.wmu.Unlock()
	seg := filepath.Join(dir, "hosts", strconv.Itoa(int(p.id)), segName(p.segNo))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("TBK1\x00\x00\x01\x00garbage of a torn block"))
	f.Close()

	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := s2.Recovery()
	if rec.Traces != 1 || len(rec.Truncated) != 1 {
		t.Fatalf("recovery %+v", rec)
	}
	for _, i := range []int{1, 2} {
		if _, err := s2.Get(trace.ID{Hi: 7, Lo: uint64(i + 1)}); err != nil {
			t.Fatalf("trace %d: %v", i, err)
		}
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if res, err := Check(dir); err != nil || len(res.Problems) != 0 || res.Traces != 2 {
		t.Fatalf("check after recovery: %+v %v", res, err)
	}
}

// Append2 appends one trace and writes its block without syncing (test
// helper; the writer lock is held).
func (s *Store) Append2(t *testing.T, tr *trace.Trace) {
	t.Helper()
	if s.batch == nil {
		s.batch = s.db.NewBatch()
	}
	p, err := s.partitionFor(partitionOf(tr))
	if err != nil {
		t.Fatal(err)
	}
	p.smu.Lock()
	body := p.enc.encodeTrace(tr)
	ref, hosts := summarize(tr, p)
	p.smu.Unlock()
	p.pending = append(p.pending, slices.Clone(body))
	p.refs = append(p.refs, pendingRef{ref: ref, hosts: hosts})
	p.minStart, p.maxEnd = ref.Start, ref.Start+ref.Duration
	if err := s.writeBlock(p); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionDropsOldestSegments(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, t.TempDir(), Options{BlockSize: 1, SegmentSize: 1, Now: func() time.Time { return now }, Hosts: tableOf(hosts)})
	for i := range 10 {
		start := now.Add(time.Duration(i-10) * time.Hour).UnixNano()
		if _, err := s.Append([]*trace.Trace{mkTrace(i, "h", 2, start, 1000, false)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := hosts.Update("h", func(h *hostdb.Host) error { h.MaxAge = 3*time.Hour + time.Minute; return nil }); err != nil {
		t.Fatal(err)
	}
	n, err := s.Retain()
	if err != nil {
		t.Fatal(err)
	}
	count, _ := s.Count()
	if n != 7 || count != 3 {
		t.Fatalf("dropped %d segments, %d traces left", n, count)
	}
	p, _ := s.Search(Query{Oldest: true})
	if len(p.Traces) != 3 || p.Traces[0].TraceID != (trace.ID{Hi: 7, Lo: 8}).String() {
		t.Fatalf("left: %+v", p.Traces)
	}
	// A global size bound drops the oldest of what is left.
	s.opt.MaxSize = s.HostSize("h") - 1
	if n, err := s.Retain(); err != nil || n < 1 {
		t.Fatalf("size retention: %d %v", n, err)
	}
	if _, err := s.Get(trace.ID{Hi: 7, Lo: 8}); err != ErrNotFound {
		t.Fatalf("oldest still there: %v", err)
	}
}

// TestRebuildFromSegments: with the index gone, rebuild makes it again
// from the segments alone (hosts from their name files).
func TestRebuildFromSegments(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{BlockSize: 2 << 10})
	var all []*trace.Trace
	for i := range 100 {
		all = append(all, mkTrace(i, []string{"a", "b"}[i%2], 3, int64(1e9+i), 50, i%9 == 0))
	}
	if _, err := s.Append(all); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	res, err := Rebuild(dir)
	if err != nil || len(res.Problems) != 0 || res.Traces != 100 || res.Hosts != 3 {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	s2 := open(t, dir, Options{})
	for _, i := range []int{0, 55, 99} {
		got, err := s2.Get(all[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(all[i], got, cmpopts.IgnoreUnexported(trace.Span{})); d != "" {
			t.Fatalf("trace %d after rebuild (-want +got):\n%s", i, d)
		}
	}
	p, err := s2.Search(Query{Hosts: []string{"b"}, Limit: 1000})
	if err != nil || len(p.Traces) != 50 {
		t.Fatalf("host b after rebuild: %d %v", len(p.Traces), err)
	}
	// A flipped byte is found by check and the rest stays readable.
	s2.Close()
	seg := filepath.Join(dir, "hosts", "1", segName(1))
	b, _ := os.ReadFile(seg)
	b[len(b)/2] ^= 0xff
	os.WriteFile(seg, b, 0o644)
	res, err = Check(dir)
	if err != nil || len(res.Problems) == 0 {
		t.Fatalf("check of a flipped byte: %+v %v", res, err)
	}
	s3 := open(t, dir, Options{})
	if _, err := s3.Get(all[1].ID); err != nil { // host b's segment is intact
		t.Fatal(err)
	}
}

// TestKiekerPositionsAsAttributes: a Kieker call's positions, which JSON
// shows as attributes (kieker.sessionId, kieker.traceId, …), are found by
// attribute filters and grouped by pivots like recorded attributes.
func TestKiekerPositionsAsAttributes(t *testing.T) {
	s := open(t, t.TempDir(), Options{BlockSize: 1 << 10})
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
	s := open(t, t.TempDir(), Options{BlockSize: 2 << 10})
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
	// Two plans: a text search reads blocks, a host's search its time
	// index.
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
			// block and again the ones it overlaps (four hosts' blocks
			// of about ten traces): about ten times the whole search,
			// not the quadratic forty times of reading every earlier
			// block again.
			if scanned > 15*full.Scanned {
				t.Errorf("%s oldest=%v limit=%d: %d traces read over the pages, the whole search reads %d", name, oldest, limit, scanned, full.Scanned)
			}
		}
	}
}

// TestTracesAreContact: a host's last contact is the last time traces of
// it were stored, whatever their source (at most once a second).
func TestTracesAreContact(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, t.TempDir(), Options{Now: func() time.Time { return now }, Hosts: tableOf(hosts)})
	if _, err := hosts.Add(hostdb.Host{Name: "shop-1"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append([]*trace.Trace{mkTrace(1, "shop-1", 2, now.UnixNano(), 100, false)}); err != nil {
		t.Fatal(err)
	}
	h, err := hosts.Host("shop-1")
	if err != nil || !h.LastContact.Equal(now) {
		t.Fatalf("after a trace: last contact %v (%v)", h.LastContact, err)
	}
	now = now.Add(500 * time.Millisecond)
	s.Append([]*trace.Trace{mkTrace(2, "shop-1", 2, now.UnixNano(), 100, false)})
	if h, _ := hosts.Host("shop-1"); !h.LastContact.Equal(now.Add(-500 * time.Millisecond)) {
		t.Errorf("within a second: %v", h.LastContact)
	}
	now = now.Add(time.Second)
	s.Append([]*trace.Trace{mkTrace(3, "shop-1", 2, now.UnixNano(), 100, false)})
	if h, _ := hosts.Host("shop-1"); !h.LastContact.Equal(now) {
		t.Errorf("a second later: %v, want %v", h.LastContact, now)
	}
}

// TestEveryHostOfATraceIsContact: every host with spans in a stored trace,
// not only the root span's, gets contact and a share of the stored bytes.
func TestEveryHostOfATraceIsContact(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, t.TempDir(), Options{Now: func() time.Time { return now }, Hosts: tableOf(hosts)})
	chain := []string{"frontend-host", "cart-host", "payment-host", "postgres-host"}
	var ts []*trace.Trace
	for i := range 3 {
		tr := &trace.Trace{ID: trace.ID{Hi: 9, Lo: uint64(i + 1)}}
		start := now.UnixNano()
		// A chain frontend → cart → payment → postgres, deeper in each
		// trace; the last trace has a second span on cart-host.
		for j, h := range chain[:2+i] {
			tr.Spans = append(tr.Spans, trace.Span{SpanID: trace.SpanID(j + 1), ParentID: trace.SpanID(j), Parent: int32(j - 1), Depth: int32(j),
				Operation: "op" + strconv.Itoa(j), Host: h, Service: strings.TrimSuffix(h, "-host"), Start: start + int64(j), End: start + 100 - int64(j),
				Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1})
		}
		if i == 2 {
			tr.Spans = append(tr.Spans, trace.Span{SpanID: 9, ParentID: 2, Parent: 1, Depth: 2, Operation: "cache", Host: "cart-host", Service: "cart",
				Start: start + 5, End: start + 20, Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1})
		}
		ts = append(ts, tr)
	}
	if _, err := s.Append(ts); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		for _, name := range tr.Hosts() {
			h, err := hosts.Host(name)
			if err != nil {
				t.Fatalf("host %s of trace %v: %v", name, tr.ID, err)
			}
			if !h.LastContact.Equal(now) {
				t.Errorf("host %s of trace %v: last contact %v, want %v", name, tr.ID, h.LastContact, now)
			}
			if n := s.HostSize(name); n <= 0 {
				t.Errorf("host %s of trace %v: size %d, want its share of the stored bytes", name, tr.ID, n)
			}
		}
	}
	// Shares survive a reopen.
	dir := s.Dir()
	before := s.HostSize("payment-host")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{Now: func() time.Time { return now }})
	if n := s.HostSize("payment-host"); n != before {
		t.Errorf("payment-host after a reopen: size %d, want %d", n, before)
	}
}
