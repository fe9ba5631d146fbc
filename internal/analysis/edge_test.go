package analysis

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// recs builds records of Kieker's built-in types.
type recs struct {
	t *testing.T
	b record.Batch
}

func (r *recs) add(name string, kv ...any) {
	r.t.Helper()
	typ := record.Builtin().Lookup(name)
	if typ == nil {
		r.t.Fatalf("no type %s", name)
	}
	rec := r.b.Add(typ, record.NoTimestamp)
	for i := 0; i < len(kv); i += 2 {
		f := typ.FieldIndex(kv[i].(string))
		if f < 0 {
			r.t.Fatalf("%s has no field %s", name, kv[i])
		}
		switch v := kv[i+1].(type) {
		case int:
			rec.Values[f] = record.IntValue(int64(v))
		case int64:
			rec.Values[f] = record.IntValue(v)
		case string:
			rec.Values[f] = record.StringValue(v)
		}
	}
}

func (r *recs) meta(id int64, host string) { r.child(id, id, -1, host) }

func (r *recs) child(id, parent int64, porder int, host string) {
	r.add(record.TraceMetadata, "traceId", id, "threadId", 1, "sessionId", "<no-session-id>", "hostname", host,
		"parentTraceId", parent, "parentOrderId", porder)
}

// ev adds a Before (b), After (a) or AfterFailed (f) event; the timestamp
// is 1000 × orderIndex + traceId.
func (r *recs) ev(kind byte, id int64, order int, op, class string) {
	name := map[byte]string{'b': record.BeforeOperationEvent, 'a': record.AfterOperationEvent, 'f': record.AfterOperationFailedEvent}[kind]
	r.add(name, "timestamp", int64(1000*order)+id, "traceId", id, "orderIndex", order, "operationSignature", op, "classSignature", class)
}

func (r *recs) oer(id int64, eoi, ess int, tin, tout int64, op, host string) {
	r.add(record.OperationExecutionRecord, "operationSignature", op, "sessionId", "<no-session-id>", "traceId", id,
		"tin", tin, "tout", tout, "hostname", host, "eoi", eoi, "ess", ess)
}

// run assembles and analyses the records, and returns them raw for the
// oracle too.
func (r *recs) run(o Options) (*Analyzer, *trace.Assembler, []raw) {
	an := New(o)
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: an.Add})
	a.AddBatch(&r.b)
	a.Flush()
	var rs []raw
	for i := range r.b.Records {
		rs = append(rs, rawOf(&r.b.Records[i]))
	}
	return an, a, rs
}

const (
	opX = "public void a.A.x()"
	opY = "private int a.B.y(int, long)"
)

// TestBrokenEventTraces: Kieker drops thread traces without TraceMetadata,
// with gaps or duplicates in orderIndex, with calls that never return or
// return out of order, and everything after a thread trace's first root
// call; failed calls are valid.
func TestBrokenEventTraces(t *testing.T) {
	r := &recs{t: t}
	// 1: valid.
	r.meta(1, "h")
	r.ev('b', 1, 0, opX, "a.A")
	r.ev('b', 1, 1, opY, "a.B")
	r.ev('a', 1, 2, opY, "a.B")
	r.ev('a', 1, 3, opX, "a.A")
	// 2: x never returns.
	r.meta(2, "h")
	r.ev('b', 2, 0, opX, "a.A")
	r.ev('b', 2, 1, opY, "a.B")
	r.ev('a', 2, 2, opY, "a.B")
	// 3: returns out of order.
	r.meta(3, "h")
	r.ev('b', 3, 0, opX, "a.A")
	r.ev('b', 3, 1, opY, "a.B")
	r.ev('a', 3, 2, opX, "a.A")
	r.ev('a', 3, 3, opY, "a.B")
	// 4: orderIndex 1 missing.
	r.meta(4, "h")
	r.ev('b', 4, 0, opX, "a.A")
	r.ev('a', 4, 2, opX, "a.A")
	// 5: no TraceMetadata.
	r.ev('b', 5, 0, opX, "a.A")
	r.ev('a', 5, 1, opX, "a.A")
	// 6: two root calls: Kieker keeps the first.
	r.meta(6, "h")
	r.ev('b', 6, 0, opX, "a.A")
	r.ev('a', 6, 1, opX, "a.A")
	r.ev('b', 6, 2, opY, "a.B")
	r.ev('a', 6, 3, opY, "a.B")
	// 7: orderIndex 1 twice, with other content (an identical copy is
	// a duplicate, dropped by the assembler).
	r.meta(7, "h")
	r.ev('b', 7, 0, opX, "a.A")
	r.ev('b', 7, 1, opY, "a.B")
	r.ev('b', 7, 1, opX, "a.A")
	r.ev('a', 7, 2, opY, "a.B")
	r.ev('a', 7, 3, opX, "a.A")
	// 8: a failed call (valid), the class signature differs from the
	// signature's class (Kieker names the component by the former).
	r.meta(8, "h2")
	r.ev('b', 8, 0, opX, "a.A$Proxy")
	r.ev('f', 8, 1, opX, "a.A$Proxy")
	an, _, rs := r.run(Options{})
	compareWithOracle(t, an, rs)
	o := runOracle(rs)
	s := an.Summary()
	if s.Messages != 3 || s.Invalid != int64(o.invalid) || o.invalid != 6 {
		t.Errorf("analysed %d, dropped %d (%v); Kieker analyses 3 and drops %d", s.Messages, s.Invalid, s.InvalidList, o.invalid)
	}
	dropped := map[string]bool{}
	for _, v := range s.InvalidList {
		dropped[v.ID] = true
	}
	if d := cmp.Diff(map[string]bool{"2": true, "3": true, "4": true, "5": true, "6": true, "7": true}, dropped); d != "" {
		t.Errorf("dropped traces (-want +got):\n%s", d)
	}
	g, _ := an.Graph(AssemblyComponentGraph)
	var comps []string
	for _, n := range g.Nodes[1:] {
		comps = append(comps, n.Component)
	}
	if d := cmp.Diff([]string{"a.A", "a.A$Proxy", "a.B"}, comps); d != "" {
		t.Errorf("components (-want +got), a.A$Proxy from the classSignature:\n%s", d)
	}
	ops := an.Operations()
	var failed int64
	for _, op := range ops {
		failed += op.Errors
	}
	if failed != 1 {
		t.Errorf("%d errors, want 1", failed)
	}

	// --include-invalid keeps what was assembled.
	an, _, _ = r.run(Options{IncludeInvalid: true})
	if s := an.Summary(); s.Messages != 8 || s.Invalid != 0 {
		t.Errorf("with IncludeInvalid: %d traces, %d invalid; want 8, 0", s.Messages, s.Invalid)
	}
}

// TestThreadsAreKiekerTraces: a thread started by another (parentTraceId)
// is a trace of its own for Kieker, whose root call comes from 'Entry';
// a broken thread is dropped without its parent.
func TestThreadsAreKiekerTraces(t *testing.T) {
	r := &recs{t: t}
	r.meta(20, "h")
	r.ev('b', 20, 0, "public void a.A.run()", "a.A")
	r.child(21, 20, 1, "h")
	r.ev('b', 21, 0, "public void a.W.work()", "a.W")
	r.ev('a', 21, 1, "public void a.W.work()", "a.W")
	r.child(22, 20, 1, "h")
	r.ev('b', 22, 0, "public void a.W.work()", "a.W") // never returns
	r.child(23, 20, 1, "h")
	r.ev('b', 23, 0, "public void a.W.work()", "a.W") // orderIndex 0 twice (not a copy)
	r.ev('b', 23, 0, "public void a.W.rest()", "a.W")
	r.ev('a', 23, 1, "public void a.W.work()", "a.W")
	r.ev('a', 23, 2, "public void a.W.work()", "a.W")
	r.ev('a', 20, 1, "public void a.A.run()", "a.A")
	an, a, rs := r.run(Options{})
	if st := a.Stats(); st.Traces != 1 {
		t.Fatalf("assembled %d traces, want the three threads in one", st.Traces)
	}
	compareWithOracle(t, an, rs)
	g, _ := an.Graph(AssemblyComponentGraph)
	edges, _ := edgesOf(t, g)
	want := map[[2]string]int64{{oEntry, "a.A"}: 1, {oEntry, "a.W"}: 1}
	if d := cmp.Diff(want, edges); d != "" {
		t.Errorf("edges (-want +got):\n%s", d)
	}
	if s := an.Summary(); s.Invalid != 2 || s.InvalidList[0].ID != "22" || s.InvalidList[1].ID != "23" {
		t.Errorf("invalid %v, want threads 22 and 23 only", s.InvalidList)
	}
}

// TestOperationExecutions: OERs with traceId -1 belong to no trace; a
// trace whose eoi do not count from 0 or whose ess start above 0 or jump
// is dropped; executions on several hosts give edges between containers.
func TestOperationExecutions(t *testing.T) {
	r := &recs{t: t}
	const handle, query = "public void a.Web.handle(java.lang.String)", "public a.Row a.Db.query(int)"
	r.oer(10, 0, 0, 100, 900, handle, "web")
	r.oer(10, 1, 1, 200, 300, query, "db")
	r.oer(10, 2, 1, 400, 600, query, "db")
	r.oer(10, 3, 0, 1000, 1100, handle, "web") // a second root call: valid for OERs
	r.oer(-1, -1, -1, 1, 2, handle, "web")
	r.oer(-1, -1, -1, 3, 4, handle, "web")
	r.oer(11, 0, 0, 1, 9, handle, "web")
	r.oer(11, 1, 2, 2, 3, query, "db") // ess jumps
	r.oer(12, 0, 0, 1, 9, handle, "web")
	r.oer(12, 2, 1, 2, 3, query, "db")   // eoi 1 missing
	r.oer(13, 0, 1, 1, 9, handle, "web") // starts at ess 1
	an, a, rs := r.run(Options{})
	compareWithOracle(t, an, rs)
	if st := a.Stats(); st.Untraced != 2 {
		t.Errorf("%d untraced OERs, want 2", st.Untraced)
	}
	if s := an.Summary(); s.Messages != 1 || s.Invalid != 3 {
		t.Errorf("analysed %d, dropped %d %v; want 1, 3", s.Messages, s.Invalid, s.InvalidList)
	}
	g, _ := an.Graph(ContainerGraph)
	edges, rt := edgesOf(t, g)
	if d := cmp.Diff(map[[2]string]int64{{oEntry, "web"}: 2, {"web", "db"}: 2}, edges); d != "" {
		t.Errorf("container edges (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]oStats{"web": {2, 100, 800, 900}, "db": {2, 100, 200, 300}}, rt, cmp.AllowUnexported(oStats{})); d != "" {
		t.Errorf("response times (-want +got):\n%s", d)
	}
	golden(t, "oer-multihost-container.dot", dot(t, g.WithoutSelfLoops(), DOTOptions{}))
	g, _ = an.Graph(DeploymentComponentGraph)
	golden(t, "oer-multihost-deployment-component.dot", dot(t, g.WithoutSelfLoops().WithoutStats(), DOTOptions{}))
	for _, n := range g.Nodes[1:] {
		if n.Container == "" || n.Component == "" || n.Operation != "" {
			t.Errorf("deployment component node %+v", n)
		}
	}
}

// TestSpans: an OTLP trace is one trace; its containers are services, its
// operations span names; a span without a component is parsed Kieker's
// way when its name is a dotted identifier.
func TestSpans(t *testing.T) {
	var b record.Batch
	id := trace.ID{Hi: 1, Lo: 2}
	add := func(s trace.Span) { trace.AppendSpan(&b, id, &s) }
	add(trace.Span{SpanID: 1, Operation: "GET /users", Service: "frontend", Host: "h1", Start: 0, End: 100})
	add(trace.Span{SpanID: 2, ParentID: 1, Operation: "users.Store.find", Service: "users", Host: "h2", Start: 10, End: 90})
	add(trace.Span{SpanID: 3, ParentID: 2, Operation: "SELECT", Component: "db.Client", Service: "users", Host: "h2", Start: 20, End: 50, Error: true})
	add(trace.Span{SpanID: 4, ParentID: 2, Operation: "SELECT", Component: "db.Client", Service: "users", Host: "h2", Start: 60, End: 70})
	an := New(Options{})
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: an.Add})
	a.AddBatch(&b)
	a.Flush()
	g, _ := an.Graph(ContainerGraph)
	edges, _ := edgesOf(t, g)
	if d := cmp.Diff(map[[2]string]int64{{oEntry, "frontend"}: 1, {"frontend", "users"}: 1, {"users", "users"}: 2}, edges); d != "" {
		t.Errorf("container edges (-want +got):\n%s", d)
	}
	if got := len(g.WithoutSelfLoops().Edges); got != 2 {
		t.Errorf("%d edges without self loops, want 2", got)
	}
	g, _ = an.Graph(AssemblyOperationGraph)
	edges, _ = edgesOf(t, g)
	want := map[[2]string]int64{
		{oEntry, "frontend.GET /users"}:                         1,
		{"frontend.GET /users", "users.Store.users.Store.find"}: 1,
		{"users.Store.users.Store.find", "db.Client.SELECT"}:    2,
	}
	if d := cmp.Diff(want, edges); d != "" {
		t.Errorf("operation edges (-want +got):\n%s", d)
	}
	if n := g.Node("n3"); n == nil || n.Sig.Name != "find" || n.Sig.Class != "users.Store" {
		t.Errorf("parsed span node %+v", n)
	}
	ms, _ := Messages(&trace.Trace{}, Options{})
	if len(ms) != 0 {
		t.Errorf("empty trace: %d message traces", len(ms))
	}
}

// TestBrokenReasons pins the assembler's reasons to the Kieker trace they
// make invalid (brokenUnits reads them): a change of wording in the
// assembler shows here.
func TestBrokenReasons(t *testing.T) {
	r := &recs{t: t}
	r.meta(2, "h") // never returns
	r.ev('b', 2, 0, opX, "a.A")
	r.meta(3, "h") // out of order
	r.ev('b', 3, 0, opX, "a.A")
	r.ev('b', 3, 1, opY, "a.B")
	r.ev('a', 3, 2, opX, "a.A")
	r.ev('a', 3, 3, opY, "a.B")
	r.meta(4, "h") // gap
	r.ev('b', 4, 0, opX, "a.A")
	r.ev('a', 4, 2, opX, "a.A")
	r.ev('b', 5, 0, opX, "a.A") // no metadata
	r.ev('a', 5, 1, opX, "a.A")
	r.meta(6, "h") // returns from nothing
	r.ev('a', 6, 0, opX, "a.A")
	r.meta(7, "h") // orderIndex 1 twice (not a copy)
	r.ev('b', 7, 0, opX, "a.A")
	r.ev('a', 7, 1, opX, "a.A")
	r.ev('a', 7, 1, opY, "a.B")
	r.oer(11, 0, 0, 1, 9, opX, "h") // ess jumps
	r.oer(11, 1, 2, 2, 3, opY, "h")
	r.oer(12, 1, 0, 1, 9, opX, "h") // eoi from 1
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) {
		threads, oers, _, _ := brokenUnits(tr)
		kid, _ := tr.ID.Kieker()
		switch {
		case kid >= 11:
			if oers == "" {
				t.Errorf("trace %d %q: no reason for its OERs", kid, tr.Broken)
			}
		case len(threads[kid]) == 0:
			t.Errorf("trace %d %q: no reason for the thread", kid, tr.Broken)
		}
		for other := range threads {
			if other != kid {
				t.Errorf("trace %d: reasons %v attributed to thread %d", kid, threads[other], other)
			}
		}
	}})
	a.AddBatch(&r.b)
	a.Flush()
	if st := a.Stats(); st.Traces != 8 {
		t.Errorf("%d traces, want 8", st.Traces)
	}
}

// TestLongCall: a call that lasts longer than the assembler's window while
// other traces go on is one trace for Kieker (its reconstruction waits for
// the trace to be complete, with no timeout by default); analyze gives the
// assembler a window of an hour of record time (with the default 2 s
// the call is emitted unreturned, and dropped, and so is its return).
func TestLongCall(t *testing.T) {
	r := &recs{t: t}
	r.meta(1, "h")
	r.ev('b', 1, 0, opX, "a.A") // at 1 µs
	for i := int64(2); i < 12; i++ {
		r.meta(i, "h")
		r.add(record.BeforeOperationEvent, "timestamp", i*1e9, "traceId", i, "orderIndex", 0, "operationSignature", opY, "classSignature", "a.B")
		r.add(record.AfterOperationEvent, "timestamp", i*1e9+1, "traceId", i, "orderIndex", 1, "operationSignature", opY, "classSignature", "a.B")
	}
	r.add(record.AfterOperationEvent, "timestamp", int64(13e9), "traceId", 1, "orderIndex", 1, "operationSignature", opX, "classSignature", "a.A")
	for _, tc := range []struct {
		window  time.Duration
		traces  int64
		invalid int64
	}{
		{time.Hour, 11, 0},
		{0, 11, 0}, // the assembler's default window: a trace with an open call waits OpenWindow
	} {
		an := New(Options{})
		a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Window: tc.window, Emit: an.Add})
		for i := range r.b.Records {
			a.Add(&r.b.Records[i], nil)
			a.Tick()
		}
		a.Flush()
		if s := an.Summary(); s.Messages != tc.traces || s.Invalid != tc.invalid {
			t.Errorf("window %v: %d traces, %d invalid %v; want %d, %d", tc.window, s.Messages, s.Invalid, s.InvalidList, tc.traces, tc.invalid)
		}
	}
	_, _, rs := r.run(Options{})
	if o := runOracle(rs); len(o.traces) != 11 {
		t.Errorf("Kieker: %d traces, want 11", len(o.traces))
	}
}

// TestReturnFromOtherClass: Kieker matches an After event to the open
// Before by operation and class signature (refersToSameOperationAs), so a
// return from the same operation of another class makes the trace invalid.
// The assembler compares the operation only and reports nothing, so the
// analysis cannot tell (reported to the lead; unskip when the assembler
// reports it).
func TestReturnFromOtherClass(t *testing.T) {
	r := &recs{t: t}
	r.meta(1, "h")
	r.ev('b', 1, 0, opX, "a.A")
	r.ev('a', 1, 1, opX, "a.A$Proxy")
	an, _, rs := r.run(Options{})
	compareWithOracle(t, an, rs)
}

// TestWholeTraceReasons: a trace emitted in parts is invalid as a whole;
// reasons about span ids and parents concern spans only.
func TestWholeTraceReasons(t *testing.T) {
	ev := trace.Span{SpanID: 1, Parent: -1, Operation: opX, Component: "a.A", Host: "h", OrderIndex: 0, EOI: -1, ESS: -1, KiekerTrace: 5, Source: trace.FromEvents}
	sp := trace.Span{SpanID: 2, Parent: -1, ParentID: 9, Operation: "GET /", Service: "web", Source: trace.FromSpan}
	for _, tc := range []struct {
		broken        []string
		valid, errors int
	}{
		{nil, 2, 0},
		{[]string{"part 1 of a trace with more than 10 spans (emitted in parts to bound memory)"}, 0, 2},
		{[]string{"span 0000000000000002 (GET /): parent 0000000000000009 missing"}, 1, 1},
		{[]string{"span 0000000000000001 (x) ends 5 ns before it starts"}, 2, 0},
		{[]string{"trace 5 names parent trace 4, which is missing"}, 2, 0},
	} {
		ms, inv := Messages(&trace.Trace{ID: trace.KiekerID(5), Spans: []trace.Span{ev, sp}, Broken: tc.broken}, Options{})
		if len(ms) != tc.valid || len(inv) != tc.errors {
			t.Errorf("%q: %d valid, invalid %v; want %d, %d", tc.broken, len(ms), inv, tc.valid, tc.errors)
		}
	}
}
