package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// oldBlockTraces are the traces of testdata/v2blocks (a store whose
// blocks are of block format version 2, without a term index): the golden
// traces of trace body version 2 and 40 more with a user id, a statement
// and, every tenth, an exception.
func oldBlockTraces() []*trace.Trace {
	out := goldenTraces(2)
	base := int64(1_700_000_100_000_000_000)
	for i := range 40 {
		t := &trace.Trace{ID: trace.ID{Hi: 0x77, Lo: uint64(i + 1)}}
		root := trace.Span{SpanID: 1, Parent: -1, Operation: "GET /api/orders", Component: "http.server", Host: "node-" + strconv.Itoa(i%2),
			Service: "shop", Start: base + int64(i)*int64(time.Second), End: base + int64(i)*int64(time.Second) + 5_000_000,
			Kind: trace.KindServer, Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1,
			Attributes: []trace.Attr{{Key: "user.id", Value: "user-" + strconv.Itoa(i), Type: trace.TypeString},
				{Key: "http.status_code", Value: map[bool]string{true: "500", false: "200"}[i%10 == 3], Type: trace.TypeInt}}}
		child := trace.Span{SpanID: 2, ParentID: 1, Parent: 0, Depth: 1, Operation: "SELECT orders", Component: "jdbc", Host: root.Host, Service: "shop",
			Start: root.Start + 1000, End: root.Start + 2_000_000, Kind: trace.KindClient, Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1,
			Attributes: []trace.Attr{{Key: "db.statement", Value: "SELECT * FROM orders WHERE id = $1 LIMIT " + strconv.Itoa(i), Type: trace.TypeString}}}
		if i%10 == 3 {
			child.Error = true
			child.StatusMessage = "java.sql.SQLTimeoutException"
			child.Events = []trace.Event{{Name: "exception", Time: child.End, Attributes: []trace.Attr{
				{Key: "exception.message", Value: "canceling statement due to statement timeout " + strconv.Itoa(i), Type: trace.TypeString}}}}
		}
		t.Spans = []trace.Span{root, child}
		out = append(out, t)
	}
	return out
}

// queryCases are searches whose answers the term index must not change:
// attribute pairs (of spans, resources, scopes; Kieker's), texts
// (values, messages, exception events, dictionary strings, across case),
// regexes and EQL.
func queryCases(t *testing.T) map[string]Query {
	eqlOf := func(src string) Query {
		e, err := eql.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		var q Query
		q.SetEQL(e)
		return q
	}
	return map[string]Query{
		"user-5":              {Attrs: []trace.Attr{{Key: "user.id", Value: "user-5"}}},
		"user-5 and 500":      {Attrs: []trace.Attr{{Key: "user.id", Value: "user-13"}, {Key: "http.status_code", Value: "500"}}},
		"user-5 and 200":      {Attrs: []trace.Attr{{Key: "user.id", Value: "user-5"}, {Key: "http.status_code", Value: "500"}}},
		"status 500":          {Attrs: []trace.Attr{{Key: "http.status_code", Value: "500"}}},
		"absent value":        {Attrs: []trace.Attr{{Key: "user.id", Value: "user-99"}}},
		"absent key":          {Attrs: []trace.Attr{{Key: "nope", Value: "user-5"}}},
		"resource":            {Attrs: []trace.Attr{{Key: "deployment.environment", Value: "prod"}}},
		"scope name":          {Attrs: []trace.Attr{{Key: trace.ScopeNameKey, Value: "io.opentelemetry.http"}}},
		"kieker session":      {Attrs: []trace.Attr{{Key: "kieker.sessionId", Value: "sess-1"}}},
		"long value":          {Attrs: []trace.Attr{{Key: "db.query.text", Value: longStatement(6)}}},
		"long value, other":   {Attrs: []trace.Attr{{Key: "db.query.text", Value: longStatement(6) + "x"}}},
		"text in a value":     {Text: "Statement Timeout", Deep: true},
		"text, root only":     {Text: "user-1"},
		"text in a message":   {Text: "sqltimeout", Deep: true},
		"text, non-ASCII":     {Text: "ÜBER", Deep: true},
		"text in the dict":    {Text: "orders", Deep: true},
		"text past 256 bytes": {Text: "TAIL-3", Deep: true},
		"text absent":         {Text: "no such text anywhere", Deep: true},
		"regex":               {Regex: regexp.MustCompile(`LIMIT 1[0-9]$`), Deep: true},
		"regex, dict":         {Regex: regexp.MustCompile(`^SELECT orders`), Deep: true},
		"regex absent":        {Regex: regexp.MustCompile(`LIMIT 99[0-9]`), Deep: true},
		"EQL":                 eqlOf(`http.status_code = 500 and time > 1ms`),
		"EQL, string":         eqlOf(`http.status_code = "500"`),
		"EQL, range":          eqlOf(`http.status_code >= 400 and http.status_code < 600`),
		"EQL, not equal":      eqlOf(`user.id != "user-3" and time > 1ms`),
		"EQL, long value":     deep(eqlOf(`db.query.text >= "SELECT a_column"`)),
		"EQL absent":          eqlOf(`user.id = "user-77"`),
	}
}

func deep(q Query) Query {
	q.Deep = true
	return q
}

// longStatement is a value longer than the term index keeps whole.
func longStatement(i int) string {
	return "SELECT " + strings.Repeat("a_column, ", 30) + "b FROM t WHERE tail-" + strconv.Itoa(i)
}

// termTraces are oldBlockTraces with, every third, a long statement and,
// every fifth, a message with non-ASCII capitals.
func termTraces() []*trace.Trace {
	ts := oldBlockTraces()
	for i, t := range ts[2:] {
		sp := &t.Spans[len(t.Spans)-1]
		if i%3 == 0 {
			sp.Attributes = append(sp.Attributes, trace.Attr{Key: "db.query.text", Value: longStatement(i), Type: trace.TypeString})
		}
		if i%5 == 0 {
			sp.StatusMessage = "Fehler: ÜBERLAUF"
		}
	}
	return ts
}

// ids returns the trace ids of a page, sorted.
func ids(p Page) []string {
	var out []string
	for _, s := range p.Traces {
		out = append(out, s.TraceID)
	}
	slices.Sort(out)
	return out
}

// oracle returns the ids of the traces of ts that q selects, by the
// search's own test of a whole trace (no index, no filter, no page).
func oracle(s *Store, ts []*trace.Trace, q Query) []string {
	f := s.newFilter(&q)
	var out []string
	for _, t := range ts {
		if q.MinDuration > 0 && t.Duration() < int64(q.MinDuration) {
			continue
		}
		if f.spansMatch(t) {
			out = append(out, t.ID.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestTermIndexFindsWhatAScanFinds: every search that the term index
// narrows finds exactly the traces a test of every trace finds, in a
// store of blocks of version 3 (with a term index) and in one of
// version 2 (testdata/v2blocks: written before it, read by its pages).
func TestTermIndexFindsWhatAScanFinds(t *testing.T) {
	dir := t.TempDir()
	s3 := open(t, dir, Options{PageSize: 1 << 10})
	ts := termTraces()
	if _, err := s3.Append(ts); err != nil {
		t.Fatal(err)
	}
	flush(t, s3)
	old := t.TempDir()
	if err := os.CopyFS(old, os.DirFS(filepath.Join("testdata", "v2blocks"))); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, old, Options{})
	// Heads (the traces not yet in a block) with their term index in
	// memory: the writer's, and a reader's beside it (read from the
	// write-ahead file).
	hdir := t.TempDir()
	sh := open(t, hdir, Options{ChunkSize: 2 << 10})
	if _, err := sh.Append(ts); err != nil {
		t.Fatal(err)
	}
	if err := sh.Sync(); err != nil {
		t.Fatal(err)
	}
	sr := open(t, hdir, Options{ReadOnly: true})
	versions := func(s *Store) map[uint32]int {
		out := map[uint32]int{}
		for _, p := range s.partitions() {
			for _, b := range p.blocks {
				bi, err := s.index(context.Background(), b)
				if err != nil {
					t.Fatal(err)
				}
				out[bi.r.Footer.Version]++
			}
		}
		return out
	}
	if v := versions(s3); v[3] != 3 || len(v) != 1 {
		t.Fatalf("the new store's blocks: versions %v", v)
	}
	if v := versions(s2); v[2] != 3 || len(v) != 1 {
		t.Fatalf("testdata/v2blocks: versions %v", v)
	}
	for name, q := range queryCases(t) {
		q.Limit, q.HitBudget, q.TotalBudget = 1000, time.Minute, time.Minute
		for _, c := range []struct {
			name string
			s    *Store
			ts   []*trace.Trace
		}{{"version 3", s3, ts}, {"version 2", s2, oldBlockTraces()}, {"heads", sh, ts}, {"heads, read beside the writer", sr, ts}} {
			p, err := c.s.Search(q)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, c.name, err)
			}
			want := oracle(c.s, c.ts, q)
			if d := cmp.Diff(want, ids(p), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("%s, %s (-scan +search):\n%s", name, c.name, d)
			}
		}
	}
	// The cases find something, and not everything.
	for name, n := range map[string]int{"user-5": 1, "status 500": 4, "text in a value": 4, "text past 256 bytes": 5, "text, non-ASCII": 8, "regex": 10, "long value": 1, "EQL": 4, "EQL, range": 4, "EQL, long value": 14, "absent value": 0} {
		q := queryCases(t)[name]
		q.Limit = 1000
		if got := len(oracle(s3, ts, q)); got != n {
			t.Errorf("%s: %d traces, the case wants %d", name, got, n)
		}
	}
	// Every trace still reads by id in both.
	for _, tr := range oldBlockTraces() {
		if _, err := s2.Get(tr.ID); err != nil {
			t.Errorf("version 2 block: %s: %v", tr.ID, err)
		}
	}
}

// countingBucket counts the ranges read of data objects.
type countingBucket struct {
	objstore.Store
	ranges atomic.Int64
}

func (c *countingBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.ranges.Add(1)
	return c.Store.GetRange(ctx, key, off, n)
}

// TestTermIndexSkipsPages: a search for a value one trace of a block
// holds reads one page of the block's hundreds, and one for a value or a
// text no trace holds reads none.
func TestTermIndexSkipsPages(t *testing.T) {
	dir := t.TempDir()
	local, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	bucket := &countingBucket{Store: local}
	s := open(t, dir, Options{Bucket: bucket, PageSize: 512})
	var ts []*trace.Trace
	for i := range 2000 {
		ts = append(ts, mkTrace(i, "alpha", 3, 1_700_000_000_000_000_000+int64(i)*1e6, 1000, i%100 == 0))
	}
	if _, err := s.Append(ts); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	var pages int
	for _, p := range s.partitions() {
		for _, b := range p.blocks {
			bi, err := s.index(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			pages += len(bi.pages)
		}
	}
	if pages < 100 {
		t.Fatalf("%d pages: too few for the test", pages)
	}
	search := func(q Query) (Page, int64) {
		t.Helper()
		q.Limit, q.HitBudget, q.TotalBudget = 100, time.Minute, time.Minute
		s.pages.dropPrefix("") // every page read again: counted
		before := bucket.ranges.Load()
		p, err := s.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		return p, bucket.ranges.Load() - before
	}
	search(Query{Attrs: []trace.Attr{{Key: "n", Value: "1"}}}) // reads the indexes
	for _, c := range []struct {
		name        string
		q           Query
		hits, reads int
	}{
		{"n=1234", Query{Attrs: []trace.Attr{{Key: "n", Value: "1234"}}}, 1, 1},
		{"n=77777", Query{Attrs: []trace.Attr{{Key: "n", Value: "77777"}}}, 0, 0},
		{"absent text", Query{Text: "no such text", Deep: true}, 0, 0},
		{"text of 1 %", Query{Text: "TIMED OUT", Deep: true}, 20, 20},
	} {
		p, reads := search(c.q)
		if len(p.Traces) != c.hits || reads > int64(c.reads) {
			t.Errorf("%s: %d traces, %d ranges read of %d pages; want %d traces, at most %d ranges", c.name, len(p.Traces), reads, pages, c.hits, c.reads)
		}
	}
	// Pages of 20 through the rows the term index leaves (a seventh of
	// the block: the walk visits only them), newest and oldest first,
	// cursor after cursor: every trace with the pair once, in order.
	for _, oldest := range []bool{false, true} {
		var got []int64
		q := Query{Attrs: []trace.Attr{{Key: "user", Value: "u3"}}, Limit: 20, Oldest: oldest, HitBudget: time.Minute, TotalBudget: time.Minute}
		for range 100 {
			p, err := s.Search(q)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range p.Traces {
				got = append(got, tr.Start)
			}
			if !p.More {
				break
			}
			q.Cursor = p.Cursor
		}
		var want []int64
		for _, tr := range ts {
			if tr.Spans[0].Attributes[1].Value == "u3" {
				want = append(want, tr.Start())
			}
		}
		if !oldest {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("oldest %v: %d traces by pages of 20, want %d (in order)", oldest, len(got), len(want))
		}
	}
}

// TestCheckFindsAWrongTermIndex: a block whose term index misses a trace's
// terms (its checksums right: the writer was wrong) is a problem for
// store check, which names the block and the term.
func TestCheckFindsAWrongTermIndex(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ts := termTraces()[2:12]
	if _, err := s.Append(ts[:5]); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	// A block written as compaction does, but with the terms of all
	// traces but one.
	now := time.Now()
	h := newHeadValue(block.NewID(now), "node-0", "", now)
	w := block.NewWriter(0)
	for i, tr := range ts[5:] {
		body := bytes.Clone(h.enc.encodeTrace(tr))
		row := summarize(tr, h.syms)
		h.note(tr, &row, len(body))
		var terms []block.Term
		if i != 2 {
			terms = appendTerms(nil, tr)
		}
		w.Add(body, row, terms...)
	}
	data, st, err := w.Finish(h.syms.names, h.filter.bloom())
	if err != nil {
		t.Fatal(err)
	}
	m := &block.Meta{Version: block.Version, ID: h.id, Host: h.host, Created: now.UTC(), MinStart: st.MinStart, MaxEnd: st.MaxEnd,
		Traces: st.Traces, Spans: st.Spans, Size: st.Size, FooterCRC: st.FooterCRC}
	h.fillMeta(m)
	if err := s.putBlock(context.Background(), [][]byte{data}, m); err != nil {
		t.Fatal(err)
	}
	s.Close()
	res, err := Check(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], h.id) || !strings.Contains(res.Problems[0], "not in the term index") {
		t.Fatalf("check: %q", res.Problems)
	}
}

// TestHeadTermsBound: a head lists at most maxHeadPairs distinct pairs;
// past it, a pair not listed may be in any row (no answer), while a
// listed pair keeps every row.
func TestHeadTermsBound(t *testing.T) {
	ht := &blockFilter{terms: &headTerms{}}
	for i := range maxHeadPairs {
		ht.put(uint64(i), uint32(i))
	}
	ht.put(0, maxHeadPairs) // a listed pair, a later row
	ht.put(0, maxHeadPairs) // a repeat in that row
	ht.put(1<<40, maxHeadPairs+1)
	n := maxHeadPairs + 2
	if set, ok := ht.rowsOf(1<<40, n); ok || set != nil {
		t.Errorf("a pair past the bound: %v %v", set != nil, ok)
	}
	// A pair no row holds: every pair is in the filter's set, listed or not.
	if set, ok := ht.rowsOf(1<<41, n); !ok || set != nil {
		t.Errorf("a pair never added: %v %v", set != nil, ok)
	}
	set, ok := ht.rowsOf(0, n)
	var rows []int
	for r := range n {
		if set[r/64]&(1<<(r%64)) != 0 {
			rows = append(rows, r)
		}
	}
	if !ok || !slices.Equal(rows, []int{0, maxHeadPairs}) {
		t.Errorf("pair 0: rows %v, %v", rows, ok)
	}
	// Rows at or past n (not in the caller's snapshot) are left out.
	if set, _ := ht.rowsOf(0, 1); len(set) != 1 || set[0] != 1 {
		t.Errorf("pair 0 below row 1: %v", set)
	}
	if !ht.terms.full || ht.terms.n != maxHeadPairs || ht.pairs.len() != maxHeadPairs+1 {
		t.Errorf("full %v, %d pairs listed, %d in the set", ht.terms.full, ht.terms.n, ht.pairs.len())
	}
}
