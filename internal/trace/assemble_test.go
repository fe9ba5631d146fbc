package trace

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

var cat = Types()

func typ(name string) *record.Type {
	t := cat.Lookup(name)
	if t == nil {
		panic(name)
	}
	return t
}

func iv(v int64) record.Value  { return record.IntValue(v) }
func sv(s string) record.Value { return record.StringValue(s) }

func rec(t *record.Type, vals ...record.Value) record.Record {
	return record.Record{Type: t, LoggingTimestamp: record.NoTimestamp, Values: vals}
}

// tm is a TraceMetadata: traceId, threadId, sessionId, hostname,
// parentTraceId, parentOrderId.
func tm(id, thread int64, host string, parent int64, porder int32) record.Record {
	return rec(typ(record.TraceMetadata), iv(id), iv(thread), sv("sess"), sv(host), iv(parent), iv(int64(porder)))
}

func before(id int64, oi int32, ts int64, op string) record.Record {
	return rec(typ(record.BeforeOperationEvent), iv(ts), iv(id), iv(int64(oi)), sv(op), sv(class(op)))
}

func after(id int64, oi int32, ts int64, op string) record.Record {
	return rec(typ(record.AfterOperationEvent), iv(ts), iv(id), iv(int64(oi)), sv(op), sv(class(op)))
}

func failed(id int64, oi int32, ts int64, op, cause string) record.Record {
	return rec(typ(record.AfterOperationFailedEvent), iv(ts), iv(id), iv(int64(oi)), sv(op), sv(class(op)), sv(cause))
}

func split(id int64, oi int32, ts int64) record.Record {
	return rec(typ(record.SplitEvent), iv(ts), iv(id), iv(int64(oi)))
}

func oerRec(op string, id int64, tin, tout int64, host string, eoi, ess int32) record.Record {
	return rec(typ(record.OperationExecutionRecord), sv(op), sv("sess"), iv(id), iv(tin), iv(tout), sv(host), iv(int64(eoi)), iv(int64(ess)))
}

func class(op string) string { return componentOf(op) }

// assemble runs recs through an assembler and returns the traces.
func assemble(t *testing.T, recs []record.Record, o Options) []*Trace {
	t.Helper()
	var out []*Trace
	o.Emit = func(tr *Trace) { out = append(out, tr) }
	if o.Clock == WallClock && o.Now == nil {
		o.Clock = RecordClock
	}
	a := NewAssembler(o)
	var b record.Batch
	for i := range recs {
		b.AddRecord(&recs[i])
	}
	a.AddBatch(&b)
	a.Flush()
	return out
}

// shape renders a trace as indented operations, for comparisons.
func shape(tr *Trace) string {
	var b strings.Builder
	for _, s := range tr.Spans {
		fmt.Fprintf(&b, "%s%s [%d,%d]", strings.Repeat("  ", int(s.Depth)), s.Operation, s.Start, s.End)
		if s.Error {
			b.WriteString(" error")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestEventTraceWithThreadHop(t *testing.T) {
	const root, child = 100, 200
	recs := []record.Record{
		tm(root, 1, "h1", root, -1),
		before(root, 0, 10, "void a.Main.main()"),
		before(root, 1, 20, "void a.Pool.submit()"),
		split(root, 2, 25),
		after(root, 3, 30, "void a.Pool.submit()"),
		before(root, 4, 40, "int a.Db.query()"),
		failed(root, 5, 50, "int a.Db.query()", "java.sql.SQLException"),
		after(root, 6, 90, "void a.Main.main()"),
		tm(child, 2, "h1", root, 2),
		before(child, 0, 26, "void a.Task.run()"),
		before(child, 1, 27, "void a.Task.step()"),
		after(child, 2, 28, "void a.Task.step()"),
		after(child, 3, 35, "void a.Task.run()"),
	}
	want := `void a.Main.main() [10,90]
  void a.Pool.submit() [20,30]
    void a.Task.run() [26,35]
      void a.Task.step() [27,28]
  int a.Db.query() [40,50] error
`
	for seed := range 20 {
		shuffled := slices.Clone(recs)
		if seed > 0 {
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		}
		trs := assemble(t, shuffled, Options{})
		if len(trs) != 1 {
			t.Fatalf("seed %d: %d traces", seed, len(trs))
		}
		tr := trs[0]
		if got := shape(tr); got != want || len(tr.Broken) != 0 {
			t.Fatalf("seed %d: got\n%s\nbroken %v", seed, got, tr.Broken)
		}
		if tr.ID != KiekerID(root) || tr.Spans[2].Thread != "2" || tr.Spans[0].Host != "h1" || tr.Spans[4].StatusMessage != "java.sql.SQLException" {
			t.Fatalf("seed %d: %+v", seed, tr.Spans)
		}
	}
}

func TestOERTraceAcrossHosts(t *testing.T) {
	const id = 7
	// A trace of OperationExecutionRecords as Kieker writes them: each at
	// its return, callees first; hosts differ (a remote call).
	recs := []record.Record{
		oerRec("void b.Svc.find()", id, 3, 4, "db", 2, 2),
		oerRec("void a.Web.get()", id, 2, 5, "web", 1, 1),
		oerRec("void a.Web.log()", id, 6, 7, "web", 3, 1),
		oerRec("void a.Main.main()", id, 1, 8, "web", 0, 0),
		oerRec("void untraced()", -1, 1, 2, "web", -1, -1),
	}
	want := `void a.Main.main() [1,8]
  void a.Web.get() [2,5]
    void b.Svc.find() [3,4]
  void a.Web.log() [6,7]
`
	var st Stats
	o := Options{}
	trs := assemble(t, recs, o)
	if len(trs) != 1 || shape(trs[0]) != want || len(trs[0].Broken) != 0 {
		t.Fatalf("%d traces: %s %v", len(trs), shape(trs[0]), trs[0].Broken)
	}
	if hs := trs[0].Hosts(); !slices.Equal(hs, []string{"web", "db"}) {
		t.Fatalf("hosts %v", hs)
	}
	a := NewAssembler(Options{Clock: RecordClock})
	var b record.Batch
	b.AddRecord(&recs[4])
	a.AddBatch(&b)
	st = a.Stats()
	if st.Untraced != 1 || st.Records != 0 {
		t.Fatalf("%+v", st)
	}
}

func spanRec(b *record.Batch, id ID, sid, parent SpanID, name, svc string, start, end int64) {
	AppendSpan(b, id, &Span{SpanID: sid, ParentID: parent, Operation: name, Service: svc, Host: svc, Start: start, End: end, Kind: KindServer})
}

func TestSpansAcrossServicesInAnyOrder(t *testing.T) {
	id := ID{Hi: 0xabc, Lo: 0xdef}
	var b record.Batch
	spanRec(&b, id, 3, 2, "SELECT", "db", 30, 40)
	spanRec(&b, id, 2, 1, "GET /items", "api", 20, 50)
	spanRec(&b, id, 1, 0, "GET /", "web", 10, 60)
	recs := slices.Clone(b.Records)
	trs := assemble(t, recs, Options{})
	want := "GET / [10,60]\n  GET /items [20,50]\n    SELECT [30,40]\n"
	if len(trs) != 1 || shape(trs[0]) != want || len(trs[0].Broken) != 0 || trs[0].ID != id {
		t.Fatalf("%v", trs)
	}
}

func TestBrokenTracesAreStillAssembled(t *testing.T) {
	id := ID{Hi: 1, Lo: 2}
	var b record.Batch
	spanRec(&b, id, 5, 9, "orphan", "s", 1, 2)     // parent missing
	spanRec(&b, id, 6, 6, "self", "s", 1, 2)       // its own parent
	spanRec(&b, id, 7, 8, "cycle-a", "s", 1, 2)    // 7 → 8 → 7
	spanRec(&b, id, 8, 7, "cycle-b", "s", 1, 2)    //
	spanRec(&b, id, 10, 0, "backwards", "s", 9, 3) // negative duration
	trs := assemble(t, slices.Clone(b.Records), Options{})
	if len(trs) != 1 || len(trs[0].Spans) != 5 {
		t.Fatalf("%v", trs)
	}
	got := strings.Join(trs[0].Broken, "\n")
	for _, want := range []string{"parent 0000000000000009 missing", "is its own parent", "is its own ancestor", "ends 6 ns before it starts"} {
		if !strings.Contains(got, want) {
			t.Errorf("broken lacks %q:\n%s", want, got)
		}
	}

	// Kieker: an unclosed call and a reused order index.
	recs := []record.Record{
		tm(1, 1, "h", 1, -1),
		before(1, 0, 10, "void a.A.main()"),
		before(1, 1, 20, "void a.A.x()"),
		before(1, 1, 21, "void a.A.y()"),
		after(1, 2, 30, "void a.A.y()"),
	}
	trs = assemble(t, recs, Options{})
	got = strings.Join(trs[0].Broken, "\n")
	for _, want := range []string{"orderIndex 1 of trace 1 used twice", "never returned"} {
		if !strings.Contains(got, want) {
			t.Errorf("broken lacks %q:\n%s", want, got)
		}
	}
}

func TestWindowAndLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	var out []*Trace
	a := NewAssembler(Options{Now: func() time.Time { return now }, Window: 2 * time.Second, MaxOpenTraces: 2, MaxSpans: 3,
		Emit: func(tr *Trace) { out = append(out, tr) }})
	var b record.Batch
	spanRec(&b, ID{Lo: 1}, 1, 0, "a", "s", 1, 2)
	a.AddBatch(&b)
	now = now.Add(time.Second)
	a.Tick()
	if len(out) != 0 {
		t.Fatal("emitted before the window")
	}
	now = now.Add(1500 * time.Millisecond)
	a.Tick()
	if len(out) != 1 {
		t.Fatal("not emitted after the window")
	}
	// Three traces open with a limit of two: the oldest goes early.
	b.Reset()
	for i := range 3 {
		spanRec(&b, ID{Lo: uint64(10 + i)}, 1, 0, "a", "s", 1, 2)
	}
	a.AddBatch(&b)
	if a.Stats().Evicted != 1 || len(out) != 2 || out[1].ID.Lo != 10 {
		t.Fatalf("evicted %d, out %d", a.Stats().Evicted, len(out))
	}
	// A trace over MaxSpans goes in parts.
	b.Reset()
	for i := range 7 {
		spanRec(&b, ID{Lo: 99}, SpanID(i+1), 0, "p", "s", 1, 2)
	}
	out = nil
	a.AddBatch(&b)
	a.Flush()
	parts := 0
	for _, tr := range out {
		if tr.ID.Lo == 99 {
			parts++
			if tr.Part == 0 || len(tr.Broken) == 0 {
				t.Fatalf("part %d, broken %v", tr.Part, tr.Broken)
			}
		}
	}
	if parts != 3 {
		t.Fatalf("%d parts, want 3", parts)
	}
}

func call(id int64, oi int32, ts int64, op, callee string) record.Record {
	return rec(typ(record.CallOperationEvent), iv(ts), iv(id), iv(int64(oi)), sv(op), sv(class(op)), sv(callee), sv(class(callee)))
}

// TestTopLevelCallEventsAreCalls: calls into uninstrumented code become
// calls of their own, nested as Kieker's assumed executions nest.
func TestTopLevelCallEventsAreCalls(t *testing.T) {
	recs := []record.Record{
		tm(7, 1, "h", 7, -1),
		call(7, 0, 100, "public static void a.Main.main(java.lang.String[])", "public void a.A.m2(a.C)"),
		call(7, 1, 101, "public void a.A.m2(a.C)", "public void a.C.n2()"),
	}
	trs := assemble(t, recs, Options{})
	if len(trs) != 1 || len(trs[0].Spans) != 2 || trs[0].Spans[1].Parent != 0 || trs[0].Spans[0].Operation != "public void a.A.m2(a.C)" {
		t.Fatalf("%v", trs)
	}
}

// TestReturnFromOtherClassIsBroken: a return must match the open call's
// operation and class.
func TestReturnFromOtherClassIsBroken(t *testing.T) {
	a := after(1, 1, 20, "public void a.A.x()")
	a.Values[4] = sv("a.A$Proxy")
	trs := assemble(t, []record.Record{tm(1, 1, "h", 1, -1), before(1, 0, 10, "public void a.A.x()"), a}, Options{})
	if len(trs) != 1 || len(trs[0].Broken) == 0 {
		t.Fatalf("%v", trs)
	}
}

// TestOpenCallsWaitLonger: a trace whose call has not returned is not
// emitted after the plain window.
func TestOpenCallsWaitLonger(t *testing.T) {
	var out []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Window: 10, Emit: func(tr *Trace) { out = append(out, tr) }})
	add := func(r record.Record) {
		var b record.Batch
		b.AddRecord(&r)
		a.AddBatch(&b)
		a.Tick()
	}
	add(tm(1, 1, "h", 1, -1))
	add(before(1, 0, 100, "void a.A.long()"))
	add(tm(2, 1, "h", 2, -1))
	add(before(2, 0, 150, "void a.B.short()"))
	add(after(2, 1, 160, "void a.B.short()"))
	add(before(3, 0, 200, "void a.C.other()")) // the clock moves on
	if len(out) != 1 || out[0].ID != KiekerID(2) {
		t.Fatalf("emitted %v", out)
	}
	add(after(1, 1, 250, "void a.A.long()"))
	a.Flush()
	for _, tr := range out {
		if tr.ID == KiekerID(1) && (len(tr.Spans) != 1 || len(tr.Broken) != 0) {
			t.Fatalf("long call: %v %v", tr.Spans, tr.Broken)
		}
	}
}

// TestSplitWithNoOpenCall: a thread started while the parent trace has no
// call open belongs to the same trace, its calls roots of it.
func TestSplitWithNoOpenCall(t *testing.T) {
	recs := []record.Record{
		tm(1, 1, "h", 1, -1),
		split(1, 0, 5),
		before(1, 1, 10, "void a.A.later()"),
		after(1, 2, 20, "void a.A.later()"),
		tm(2, 2, "h", 1, 0),
		before(2, 0, 6, "void a.B.run()"),
		after(2, 1, 9, "void a.B.run()"),
	}
	trs := assemble(t, recs, Options{})
	if len(trs) != 1 || len(trs[0].Spans) != 2 || len(trs[0].Broken) != 0 || trs[0].Spans[0].Parent != -1 || trs[0].Spans[1].Parent != -1 {
		t.Fatalf("%v %v", trs, trs[0].Broken)
	}
}

// TestLeanSpans: with Lean, spans keep their shape but not their
// attributes, events and links.
func TestLeanSpans(t *testing.T) {
	id := ID{Hi: 3, Lo: 4}
	var b record.Batch
	AppendSpan(&b, id, &Span{SpanID: 1, Operation: "GET /", Service: "web", Host: "h", Start: 1, End: 9, Status: StatusError,
		Attributes: []Attr{{Key: "http.route", Value: "/", Type: TypeString}},
		Events:     []Event{{Name: "exception", Time: 5}}, Links: []Link{{TraceID: ID{Lo: 7}, SpanID: 8}}})
	for _, lean := range []bool{false, true} {
		trs := assemble(t, slices.Clone(b.Records), Options{Lean: lean})
		if len(trs) != 1 || len(trs[0].Spans) != 1 {
			t.Fatalf("lean %v: %v", lean, trs)
		}
		s := trs[0].Spans[0]
		if s.Operation != "GET /" || s.Service != "web" || s.Host != "h" || s.Start != 1 || s.End != 9 || !s.Error {
			t.Fatalf("lean %v: %+v", lean, s)
		}
		if kept := len(s.Attributes) + len(s.Events) + len(s.Links); lean && kept != 0 || !lean && kept != 3 {
			t.Fatalf("lean %v: %d attributes, events and links", lean, kept)
		}
	}
}

// TestParentTraceNeverArrived: a thread trace whose TraceMetadata names a
// parentTraceId that never arrives (by the end of the input, or within the
// window) is assembled as far as it goes and marked broken with the
// reason, whatever the order of its records, through grandchildren too;
// with the parent there it is sound.
func TestParentTraceNeverArrived(t *testing.T) {
	const parent, child, grandchild = 100, 200, 300
	recs := []record.Record{
		tm(child, 2, "h1", parent, 2),
		before(child, 0, 26, "void a.Task.run()"),
		split(child, 1, 27),
		after(child, 2, 35, "void a.Task.run()"),
		tm(grandchild, 3, "h1", child, 1),
		before(grandchild, 0, 28, "void a.Sub.run()"),
		after(grandchild, 1, 29, "void a.Sub.run()"),
	}
	const reason = "parent trace 100 never arrived"
	for seed := range 20 {
		shuffled := slices.Clone(recs)
		if seed > 0 {
			r := rand.New(rand.NewPCG(uint64(seed), 9))
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		}
		trs := assemble(t, shuffled, Options{})
		if len(trs) != 1 || len(trs[0].Spans) != 2 {
			t.Fatalf("seed %d: %d traces %v", seed, len(trs), trs)
		}
		if !slices.Equal(trs[0].Broken, []string{reason}) {
			t.Fatalf("seed %d: broken %q, want %q", seed, trs[0].Broken, reason)
		}
	}

	// Within the window: the trace ends Window after its last record,
	// broken, though the parent might still come later.
	now := time.Unix(1000, 0)
	var out []*Trace
	a := NewAssembler(Options{Now: func() time.Time { return now }, Window: 2 * time.Second, Emit: func(tr *Trace) { out = append(out, tr) }})
	var b record.Batch
	for i := range recs[:4] {
		b.AddRecord(&recs[i])
	}
	a.AddBatch(&b)
	now = now.Add(3 * time.Second)
	a.Tick()
	if len(out) != 1 || !slices.Equal(out[0].Broken, []string{reason}) {
		t.Fatalf("after the window: %d traces, broken %q", len(out), out[0].Broken)
	}

	// The parent's metadata alone, or its events alone, is the parent
	// arriving.
	for _, p := range [][]record.Record{
		{tm(parent, 1, "h1", parent, -1)},
		{before(parent, 0, 10, "void a.Main.main()"), before(parent, 1, 20, "void a.Pool.submit()"), after(parent, 2, 30, "void a.Pool.submit()"), after(parent, 3, 40, "void a.Main.main()")},
	} {
		trs := assemble(t, append(slices.Clone(recs), p...), Options{})
		if len(trs) != 1 || slices.Contains(trs[0].Broken, reason) {
			t.Fatalf("with the parent: %d traces, broken %q", len(trs), trs[0].Broken)
		}
	}
}

// TestMetadataAwaitsEvents: a Kieker trace whose TraceMetadata came and
// no event yet has begun: it waits OpenWindow, not Window, for its events
// (a cluster's publisher held them up during a JetStream leader election
// for longer than Window), and is then one trace with the metadata's
// host, not an empty one and a broken one without metadata.
func TestMetadataAwaitsEvents(t *testing.T) {
	now := time.Unix(1000, 0)
	var out []*Trace
	a := NewAssembler(Options{Now: func() time.Time { return now }, Window: 2 * time.Second, Emit: func(tr *Trace) { out = append(out, tr) }})
	add := func(recs ...record.Record) {
		var b record.Batch
		for i := range recs {
			b.AddRecord(&recs[i])
		}
		a.AddBatch(&b)
	}
	add(tm(7, 1, "h1", 7, -1))
	now = now.Add(10 * time.Second)
	a.Tick()
	if len(out) != 0 {
		t.Fatalf("the metadata alone, 10 s (5 windows) later: %d traces emitted", len(out))
	}
	add(before(7, 0, 10, "void a.Main.main()"), after(7, 1, 20, "void a.Main.main()"))
	now = now.Add(3 * time.Second)
	a.Tick()
	if len(out) != 1 || len(out[0].Spans) != 1 || len(out[0].Broken) != 0 || out[0].Spans[0].Host != "h1" {
		t.Fatalf("after the events: %d traces %+v", len(out), out)
	}

	// A child thread's metadata joins a trace whose After came twice (a
	// message read again): the repeated After does not hide the child
	// waiting for its events.
	out = out[:0]
	add(tm(9, 1, "h1", 9, -1), before(9, 0, 10, "void a.Main.main()"), after(9, 1, 20, "void a.Main.main()"), after(9, 1, 20, "void a.Main.main()"))
	add(tm(10, 2, "h1", 9, 0))
	now = now.Add(10 * time.Second)
	a.Tick()
	if len(out) != 0 {
		t.Fatalf("a child's metadata alone, 10 s later, in a trace with a repeated After: %d traces emitted", len(out))
	}
	add(before(10, 0, 12, "void a.Task.run()"), after(10, 1, 18, "void a.Task.run()"))
	now = now.Add(3 * time.Second)
	a.Tick()
	if len(out) != 1 || len(out[0].Spans) != 2 || out[0].ID != KiekerID(9) {
		t.Fatalf("after the child's events: %d traces %+v, want one of 2 spans", len(out), out)
	}

	// Metadata whose events never come ends OpenWindow after it.
	out = out[:0]
	add(tm(8, 1, "h1", 8, -1))
	now = now.Add(59 * time.Second) // (OpenWindow: 30 windows)
	a.Tick()
	if len(out) != 0 {
		t.Fatalf("the metadata alone, within OpenWindow: %d traces emitted", len(out))
	}
	now = now.Add(2 * time.Second)
	a.Tick()
	if _, open := a.OldestOpen(); open {
		t.Fatal("the metadata alone, after OpenWindow: still open")
	}
}
