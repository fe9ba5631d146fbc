package split

import (
	"context"
	"errors"
	"github.com/tracebridge/tracebridge/internal/trace"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// retag returns a copy of the event r with another traceId and orderIndex.
func retag(r record.Record, id int64, oi int32) record.Record {
	c := r.Clone()
	c.Values[1] = iv(id)
	c.Values[2] = iv(int64(oi))
	return c
}

func TestSplitEvents(t *testing.T) {
	const id = 100
	c1 := childID(id, 1)
	c2 := childID(c1, 2)
	var (
		main  = [2]record.Record{before(id, 0, "app.Main", "main"), after(id, 9, "app.Main", "main")}
		find  = [2]record.Record{before(id, 1, "db.Repo", "find"), after(id, 8, "db.Repo", "find")}
		query = [2]record.Record{before(id, 2, "db.Repo", "query"), after(id, 5, "db.Repo", "query")}
		hook  = [2]record.Record{before(id, 3, "app.Hook", "run"), after(id, 4, "app.Hook", "run")}
		check = [2]record.Record{before(id, 6, "db.Repo", "check"), failed(id, 7, "db.Repo", "check")}
	)
	in := []record.Record{
		tm(id, 7, id, -1),
		main[0], find[0], query[0], hook[0], hook[1], query[1], check[0], check[1], find[1], main[1],
	}
	// app → db crosses into a partial trace; db → app (the hook) crosses
	// again, nested.
	want := []record.Record{
		tm(id, 7, id, -1),
		main[0],
		find[0], // leaf in the trace
		tm(c1, 7, id, 1),
		retag(find[0], c1, 0),
		retag(query[0], c1, 1),
		retag(hook[0], c1, 2), // leaf in the first partial trace
		tm(c2, 7, c1, 2),
		retag(hook[0], c2, 0),
		retag(hook[1], c2, 1),
		retag(hook[1], c1, 3),
		retag(query[1], c1, 4),
		retag(check[0], c1, 5),
		retag(check[1], c1, 6),
		retag(find[1], c1, 7),
		retag(find[1], id, 2),
		retag(main[1], id, 3),
	}
	// A partial trace's metadata carries the crossing Before's logging
	// timestamp.
	want[3].LoggingTimestamp, want[7].LoggingTimestamp = 2, 2
	sp := splitRecs(t, mustParse(t, "package:1"), in, nil, Options{})
	if d := diffRecords(want, sp.out); d != "" {
		t.Fatalf("split (-want +got):\n%s", d)
	}
	if len(sp.malformed) > 0 {
		t.Fatalf("reported %v", sp.malformed)
	}
	wantStats := Stats{RecordsIn: 11, RecordsOut: 17, TracesIn: 1, TracesOut: 3, Partial: 2, MaxNesting: 3, MaxDepth: 4}
	if d := cmp.Diff(wantStats, sp.stats); d != "" {
		t.Fatalf("stats (-want +got):\n%s", d)
	}
	mg := mergeRecs(t, sp.out, nil, Options{})
	if d := diffRecords(in, mg.out); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
	wantMerge := Stats{RecordsIn: 17, RecordsOut: 11, TracesIn: 3, TracesOut: 1, Partial: 2, MaxNesting: 3, MaxDepth: 4}
	if d := cmp.Diff(wantMerge, mg.stats); d != "" {
		t.Fatalf("merge stats (-want +got):\n%s", d)
	}

	// One component for all: unchanged.
	same := splitRecs(t, mustParse(t, "regex:.*"), in, nil, Options{})
	if d := diffRecords(in, same.out); d != "" {
		t.Fatalf("split without boundary (-want +got):\n%s", d)
	}
	// "No component" is a component: db alone still cuts app → db.
	only := splitRecs(t, mustParse(t, `regex:db\..*`), in, nil, Options{})
	if only.stats.Partial != 2 {
		t.Fatalf("regex:db: %d partial traces, want 2", only.stats.Partial)
	}
}

func TestSplitApplicationTraceMetadata(t *testing.T) {
	const id = -5
	meta := rec(tATM, 9, iv(id), iv(33), sv("sess"), sv("h1"), iv(id), iv(-1), sv("shop"))
	in := []record.Record{
		meta,
		before(id, 0, "a.X", "m"), before(id, 1, "b.Y", "n"), after(id, 2, "b.Y", "n"), after(id, 3, "a.X", "m"),
	}
	sp := splitRecs(t, mustParse(t, "package:1"), in, nil, Options{})
	child := childID(id, 1)
	want := rec(tATM, 2, iv(child), iv(33), sv("sess"), sv("h1"), iv(id), iv(1), sv("shop"))
	if d := diffRecords([]record.Record{want}, sp.out[3:4]); d != "" {
		t.Fatalf("partial trace metadata (-want +got):\n%s", d)
	}
	mg := mergeRecs(t, sp.out, nil, Options{})
	if d := diffRecords(in, mg.out); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
}

func TestSplitMalformed(t *testing.T) {
	const id = 1
	for _, tc := range []struct {
		name   string
		in     []record.Record
		o      Options
		reason string // what the first report says
		want   []record.Record
	}{
		{
			name: "gap before any crossing: unchanged",
			in: []record.Record{tm(id, 1, id, -1), before(id, 0, "a.A", "m"), before(id, 2, "b.B", "n"),
				after(id, 3, "b.B", "n"), after(id, 4, "a.A", "m")},
			reason: "orderIndex 2 where 1 was expected",
		},
		{
			name: "After without Before: unchanged",
			in: []record.Record{tm(id, 1, id, -1), after(id, 0, "a.A", "m"), before(id, 1, "b.B", "n"),
				after(id, 2, "b.B", "n")},
			reason: "After event (orderIndex 0) without its Before",
		},
		{
			name: "no TraceMetadata: unchanged",
			in: []record.Record{before(id, 0, "a.A", "m"), before(id, 1, "b.B", "n"),
				after(id, 2, "b.B", "n"), after(id, 3, "a.A", "m")},
			reason: "events without an open trace",
		},
		{
			name: "event after the trace ended: unchanged",
			in: []record.Record{tm(id, 1, id, -1), before(id, 0, "a.A", "m"), after(id, 1, "a.A", "m"),
				splitEv(id, 2)},
			reason: "events without an open trace",
		},
		{
			name:   "never closes",
			in:     []record.Record{tm(id, 1, id, -1), before(id, 0, "a.A", "m"), before(id, 1, "a.B", "n")},
			reason: "never closed: 2 calls open at the end of the input",
		},
		{
			name: "too deep: unchanged",
			in: []record.Record{tm(id, 1, id, -1), before(id, 0, "a.A", "m"), before(id, 1, "a.B", "m"),
				before(id, 2, "b.B", "n"), after(id, 3, "b.B", "n"), after(id, 4, "a.B", "m"), after(id, 5, "a.A", "m")},
			o:      Options{MaxDepth: 2},
			reason: "more than 2 nested calls",
		},
		{
			name: "repeated TraceMetadata",
			in: []record.Record{tm(id, 1, id, -1), before(id, 0, "a.A", "m"),
				tm(id, 1, id, -1), before(id, 0, "a.A", "m"), after(id, 1, "a.A", "m")},
			reason: "TraceMetadata repeated while the trace was open",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := splitRecs(t, mustParse(t, "package:1"), tc.in, nil, tc.o)
			if len(sp.malformed) == 0 || sp.malformed[0].TraceID != id || !strings.Contains(sp.malformed[0].Reason, tc.reason) {
				t.Fatalf("reports %v, want trace %d: %q", sp.malformed, id, tc.reason)
			}
			if sp.stats.Malformed != int64(len(sp.malformed)) || sp.stats.MalformedIDs[0] != id {
				t.Fatalf("stats %+v", sp.stats)
			}
			want := tc.want
			if want == nil {
				want = tc.in
			}
			if d := diffRecords(want, sp.out); d != "" {
				t.Fatalf("split (-want +got):\n%s", d)
			}
			mg := mergeRecs(t, sp.out, nil, tc.o)
			if d := diffRecords(tc.in, mg.out); d != "" {
				t.Fatalf("merge (-want +got):\n%s", d)
			}
		})
	}
}

// A trace damaged after it was cut: what was split stays split, the rest
// goes to the trace itself with the shift in effect, and merging restores
// the original.
func TestSplitMalformedAfterCrossing(t *testing.T) {
	const id = 1
	c := childID(id, 1)
	in := []record.Record{
		tm(id, 1, id, -1),
		before(id, 0, "a.A", "m"),
		before(id, 1, "b.B", "n"), before(id, 2, "b.C", "o"), after(id, 3, "b.C", "o"), after(id, 4, "b.B", "n"),
		before(id, 5, "b.B", "n"), // another crossing, opens a second partial trace
		before(id, 9, "b.B", "x"), // gap: from here on unsplit
		after(id, 10, "b.B", "x"),
		after(id, 11, "b.B", "n"),
		after(id, 12, "a.A", "m"),
	}
	c2 := childID(id, 3)
	want := []record.Record{
		tm(id, 1, id, -1),
		in[1],
		in[2], tm(c, 1, id, 1), retag(in[2], c, 0), retag(in[3], c, 1), retag(in[4], c, 2), retag(in[5], c, 3), retag(in[5], id, 2),
		retag(in[6], id, 3), tm(c2, 1, id, 3), retag(in[6], c2, 0),
		retag(in[7], id, 7), retag(in[8], id, 8), retag(in[9], id, 9), retag(in[10], id, 10), // shift 2
	}
	want[3].LoggingTimestamp, want[10].LoggingTimestamp = 2, 2
	sp := splitRecs(t, mustParse(t, "package:1"), in, nil, Options{})
	if d := diffRecords(want, sp.out); d != "" {
		t.Fatalf("split (-want +got):\n%s", d)
	}
	if len(sp.malformed) != 1 || sp.malformed[0].Reason != "orderIndex 9 where 6 was expected" {
		t.Fatalf("reports %v", sp.malformed)
	}
	mg := mergeRecs(t, sp.out, nil, Options{})
	if d := diffRecords(in, mg.out); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
}

func TestSplitEviction(t *testing.T) {
	b := mustParse(t, "package:1")
	// Three traces open at once with room for two: the least recently
	// active (2) is evicted; its later events pass through unchanged.
	in := []record.Record{
		tm(1, 1, 1, -1), before(1, 0, "a.A", "m"),
		tm(2, 2, 2, -1), before(2, 0, "a.A", "m"), before(2, 1, "b.B", "n"),
		before(1, 1, "b.B", "n"),
		tm(3, 3, 3, -1), before(3, 0, "a.A", "m"), after(3, 1, "a.A", "m"),
		after(2, 2, "b.B", "n"), after(2, 3, "a.A", "m"),
		after(1, 2, "b.B", "n"), after(1, 3, "a.A", "m"),
	}
	o := Options{MaxOpenTraces: 2}
	sp := splitRecs(t, b, in, nil, o)
	if sp.stats.Evicted != 1 || len(sp.malformed) != 2 || sp.malformed[0].TraceID != 2 || !strings.Contains(sp.malformed[0].Reason, "evicted") {
		t.Fatalf("stats %+v reports %v", sp.stats, sp.malformed)
	}
	mg := mergeRecs(t, sp.out, nil, o)
	if d := diffRecords(in, mg.out); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
}

func TestSplitOrderIndexWraps(t *testing.T) {
	// Kieker's orderIndex is a Java int: a trace longer than 2^31 events
	// wraps to negative values, which is not a gap.
	const id = 3
	start := int32(math.MaxInt32 - 1)
	in := []record.Record{
		tm(id, 1, id, -1),
		before(id, start, "a.A", "m"),
		before(id, start+1, "b.B", "n"),
		after(id, start+2, "b.B", "n"), // math.MinInt32
		after(id, start+3, "a.A", "m"),
	}
	sp := splitRecs(t, mustParse(t, "package:1"), in, nil, Options{})
	if len(sp.malformed) > 0 || sp.stats.Partial != 1 {
		t.Fatalf("reports %v, stats %+v", sp.malformed, sp.stats)
	}
	mg := mergeRecs(t, sp.out, nil, Options{})
	if d := diffRecords(in, mg.out); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
}

func TestSplitOER(t *testing.T) {
	const id = 77
	// main (app) → find (db) → query (db); main → log (app); written at
	// exit: query, find, log, main.
	in := []record.Record{
		cpu(1),
		oer(id, "db.Repo", 2, 2), // query
		cpu(2),
		oer(id, "db.Repo", 1, 1), // find: crosses
		oer(id, "app.Log", 3, 1), // log
		oer(-1, "app.Untraced", -1, -1),
		oer(id, "app.Main", 0, 0), // main: the trace is complete
		cpu(3),
	}
	c := childID(id, 1)
	patch := func(r record.Record, id int64, eoi, ess int32) record.Record {
		r = r.Clone()
		patchOER(&r, trace.Classify(tOER), id, eoi, ess)
		return r
	}
	meta := rec(tTM, 6, iv(c), iv(-1), sv("sess"), sv("host"), iv(id), iv(1))
	want := []record.Record{
		cpu(1),
		meta,
		patch(in[1], c, 1, 1),
		cpu(2),
		patch(in[3], c, 0, 0),
		patch(in[3], id, 1, 1), // the leaf
		patch(in[4], id, 2, 1),
		in[5],
		in[6],
		cpu(3),
	}
	for _, sizes := range [][]int{nil, {1}, {3}} {
		sp := splitRecs(t, mustParse(t, "package:1"), in, sizes, Options{})
		if d := diffRecords(want, sp.out); d != "" {
			t.Fatalf("split in batches of %v (-want +got):\n%s", sizes, d)
		}
		if sp.stats.Partial != 1 || sp.stats.TracesIn != 1 || len(sp.malformed) > 0 {
			t.Fatalf("stats %+v, reports %v", sp.stats, sp.malformed)
		}
		mg := mergeRecs(t, sp.out, sizes, Options{})
		if d := diffRecords(in, mg.out); d != "" {
			t.Fatalf("merge (-want +got):\n%s", d)
		}
	}
}

func TestSplitOERMalformed(t *testing.T) {
	const id = 5
	for _, tc := range []struct {
		name   string
		in     []record.Record
		o      Options
		reason string
	}{
		{"eoi gap", []record.Record{oer(id, "b.B", 2, 1), oer(id, "a.A", 0, 0)}, Options{}, "eoi 2 of 2 records"},
		{"ess jump", []record.Record{oer(id, "b.B", 1, 2), oer(id, "a.A", 0, 0)}, Options{}, "eoi 1 has ess 2 after ess 0"},
		{"never completes", []record.Record{oer(id, "b.B", 1, 1), cpu(1)}, Options{}, "never completed"},
		{"over the buffer", []record.Record{oer(id, "b.B", 2, 2), oer(id, "b.B", 1, 1), cpu(1), cpu(2), oer(id, "a.A", 0, 0)}, Options{MaxBuffered: 3}, "more than 3 records held back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := splitRecs(t, mustParse(t, "package:1"), tc.in, nil, tc.o)
			if len(sp.malformed) != 1 || sp.malformed[0].TraceID != id || !strings.Contains(sp.malformed[0].Reason, tc.reason) {
				t.Fatalf("reports %v, want %q", sp.malformed, tc.reason)
			}
			if d := diffRecords(tc.in, sp.out); d != "" {
				t.Fatalf("split (-want +got):\n%s", d)
			}
		})
	}
}

// Kieker's own child traces (another thread, a remote call) link to their
// parent with ids of their own: merging leaves them alone.
func TestMergeLeavesKiekerChildrenAlone(t *testing.T) {
	in := []record.Record{
		tm(10, 1, 10, -1), before(10, 0, "a.A", "m"), splitEv(10, 1),
		tm(11, 2, 10, 1), before(11, 0, "a.A", "run"), after(11, 1, "a.A", "run"),
		after(10, 2, "a.A", "m"),
	}
	mg := mergeRecs(t, in, nil, Options{})
	if d := diffRecords(in, mg.out); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
	if mg.stats.Partial != 0 {
		t.Fatalf("stats %+v", mg.stats)
	}
}

func TestFinished(t *testing.T) {
	s := New(mustParse(t, "package:1"), &collector{}, Options{})
	if err := s.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(context.Background(), &record.Batch{}); !errors.Is(err, ErrFinished) {
		t.Fatalf("Consume after Finish: %v", err)
	}
	m := NewMerger(&collector{}, Options{})
	m.Finish(context.Background())
	if err := m.Consume(context.Background(), &record.Batch{}); !errors.Is(err, ErrFinished) {
		t.Fatalf("Merger Consume after Finish: %v", err)
	}
}

// An error from the next consumer is returned.
func TestNextError(t *testing.T) {
	boom := errors.New("disk full")
	s := New(mustParse(t, "package:1"), fail{boom}, Options{})
	var b record.Batch
	r := cpu(1)
	b.AddRecord(&r)
	if err := s.Consume(context.Background(), &b); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
}

type fail struct{ err error }

func (f fail) Consume(context.Context, *record.Batch) error { return f.err }

func TestChildID(t *testing.T) {
	seen := map[int64]bool{}
	for _, p := range []int64{-1, 0, 1, 100, math.MaxInt64, math.MinInt64} {
		for _, o := range []int32{-1, 0, 1, 2, math.MaxInt32} {
			c := childID(p, o)
			if c == p || c == -1 || seen[c] {
				t.Fatalf("childID(%d, %d) = %d", p, o, c)
			}
			seen[c] = true
		}
	}
}

// Records held back behind an incomplete OER trace move on after MaxHold.
func TestSplitOERHold(t *testing.T) {
	now := time.Unix(1000, 0)
	col := &collector{}
	var reports []Malformed
	s := New(mustParse(t, "package:1"), col, Options{MaxHold: time.Second, Now: func() time.Time { return now },
		OnMalformed: func(m Malformed) { reports = append(reports, m) }})
	ctx := context.Background()
	var b record.Batch
	for _, r := range []record.Record{oer(9, "b.B", 1, 1), cpu(1)} {
		b.AddRecord(&r)
	}
	if err := s.Consume(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if len(col.recs) != 0 {
		t.Fatalf("%d records passed before the trace completed", len(col.recs))
	}
	now = now.Add(500 * time.Millisecond)
	s.Flush(ctx)
	if len(col.recs) != 0 {
		t.Fatal("released too early")
	}
	now = now.Add(time.Second)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(col.recs) != 2 || len(reports) != 1 || !strings.Contains(reports[0].Reason, "hold limit") {
		t.Fatalf("after MaxHold: %d records, reports %v", len(col.recs), reports)
	}
}

// TestStatsDoNotWaitForTheNextConsumer: Stats answers while the next
// consumer (a disk) is busy with what Consume handed it.
func TestStatsDoNotWaitForTheNextConsumer(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once bool
	next := pipeline.ConsumerFunc(func(context.Context, *record.Batch) error {
		if !once {
			once = true
			close(entered)
			<-release
		}
		return nil
	})
	s := New(mustParse(t, "package:1"), next, Options{})
	var b record.Batch
	r := tm(1, 7, 1, -1)
	b.AddRecord(&r)
	done := make(chan error)
	go func() { done <- s.Consume(context.Background(), &b) }()
	<-entered
	got := make(chan Stats)
	go func() { got <- s.Stats() }()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("Stats waited for the next consumer")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.RecordsIn != 1 || st.RecordsOut != 1 {
		t.Fatalf("stats after Consume: %+v", st)
	}
}
