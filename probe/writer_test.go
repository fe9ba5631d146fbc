package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

var (
	opOuter = NewOp("public void test.Outer.run()", "test.Outer")
	opInner = NewOp("public int test.Inner.calc(int)", "test.Inner")
)

func newWriter(t *testing.T, cfg Config) *Writer {
	t.Helper()
	w, err := NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// field returns a record's field as an int or string.
func field(r record.Record, name string) any {
	v, ok := r.Field(name)
	if !ok {
		return nil
	}
	i := r.Type.FieldIndex(name)
	if r.Type.Fields[i].Kind == record.String {
		return v.Str()
	}
	return v.Int()
}

func TestWriterSends(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), Hostname: "h1", SessionID: "s1"})
	from := time.Now().UnixNano()

	tr := w.StartTrace()
	outer := tr.EnterOp(opOuter)
	tr.Before("public int test.Inner.calc(int)", "test.Inner")
	tr.AfterFailed("public int test.Inner.calc(int)", "test.Inner", "boom")
	child := tr.Fork()
	c := child.EnterOp(opInner)
	c.ExitFailed("child boom")
	tr.Join(child.ID())
	var err error = errors.New("e")
	tr.EnterOp(opInner).ExitErr(&err)
	outer.Exit()
	other := w.Start(TraceOptions{SessionID: "s2", ThreadID: 77})
	other.BeforeOp(opInner)
	other.AfterOp(opInner)
	other.End()
	other.BeforeOp(opInner) // after End: ignored

	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := fb.waitRecords(3 + 9 + 3 + 2)
	to := time.Now().UnixNano()
	type row struct {
		Type           string
		Trace          int64
		Order          int64
		Op, Cls, Cause any
		Joined         any
	}
	var got []row
	byTrace := map[int64][]row{}
	for _, r := range recs {
		id := field(r, "traceId").(int64)
		x := row{Type: r.Type.ShortName(), Trace: id}
		switch r.Type.Name {
		case record.TraceMetadata:
			x.Order = field(r, "parentOrderId").(int64)
			x.Op, x.Cls, x.Cause = field(r, "sessionId"), field(r, "hostname"), field(r, "threadId")
			if p := field(r, "parentTraceId").(int64); p != id && p != tr.ID() {
				t.Errorf("trace %d: parent %d", id, p)
			}
		case trace.InvocationTypeName: // see TestInvocationRecords
			x.Order = field(r, "parentOrderId").(int64)
			x.Op, x.Cls = field(r, "nodeId"), field(r, "parentNodeId")
		default:
			x.Order = field(r, "orderIndex").(int64)
			x.Op, x.Cls, x.Cause = field(r, "operationSignature"), field(r, "classSignature"), field(r, "cause")
			x.Joined = field(r, "joinedTraceId")
			ts := field(r, "timestamp").(int64)
			if ts < from || ts > to || ts != r.LoggingTimestamp {
				t.Errorf("timestamp %d (logging %d) outside [%d, %d]", ts, r.LoggingTimestamp, from, to)
			}
		}
		byTrace[id] = append(byTrace[id], x)
	}
	for _, id := range []int64{tr.ID(), child.ID(), other.ID()} {
		got = append(got, byTrace[id]...)
	}
	o, oc := opOuter.Operation(), opOuter.Class()
	i, ic := opInner.Operation(), opInner.Class()
	want := []row{
		{"TraceMetadata", tr.ID(), -1, "s1", "h1", int64(0), nil},
		{"BeforeOperationEvent", tr.ID(), 0, o, oc, nil, nil},
		{"BeforeOperationEvent", tr.ID(), 1, i, ic, nil, nil},
		{"AfterOperationFailedEvent", tr.ID(), 2, i, ic, "boom", nil},
		{"InvocationRecord", tr.ID(), -1, "h1", "", nil, nil}, // at the first Fork
		{"SplitEvent", tr.ID(), 3, nil, nil, nil, nil},
		{"JoinEvent", tr.ID(), 4, nil, nil, nil, child.ID()},
		{"BeforeOperationEvent", tr.ID(), 5, i, ic, nil, nil},
		{"AfterOperationFailedEvent", tr.ID(), 6, i, ic, "e", nil},
		{"AfterOperationEvent", tr.ID(), 7, o, oc, nil, nil},
		{"TraceMetadata", child.ID(), 3, "s1", "h1", int64(0), nil},
		{"InvocationRecord", child.ID(), 3, "h1", "h1", nil, nil},
		{"BeforeOperationEvent", child.ID(), 0, i, ic, nil, nil},
		{"AfterOperationFailedEvent", child.ID(), 1, i, ic, "child boom", nil},
		{"TraceMetadata", other.ID(), -1, "s2", "h1", int64(77), nil},
		{"BeforeOperationEvent", other.ID(), 0, i, ic, nil, nil},
		{"AfterOperationEvent", other.ID(), 1, i, ic, nil, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	st := w.Stats()
	if st.Sent != uint64(len(want)) || st.Dropped != 0 || st.Connects != 1 || st.Connected {
		t.Errorf("stats %+v", st)
	}
}

func TestWriterUnreachable(t *testing.T) {
	w := newWriter(t, Config{Addr: unusedAddr(t), BufferEvents: 1024, Shards: 1, ReconnectMin: time.Millisecond})
	for range 100 {
		tr := w.StartTrace()
		tr.EnterOp(opOuter).Exit()
	}
	err := w.Flush(context.Background())
	if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Flush: %v, want ErrNotConnected with the reason", err)
	}
	start := time.Now()
	err = w.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	if !errors.Is(err, ErrDropped) {
		t.Errorf("Close: %v, want ErrDropped", err)
	}
	st := w.Stats()
	if st.Sent != 0 || st.Dropped != 300 || st.Lost+st.Rejected != 300 || st.ConnectFailures == 0 {
		t.Errorf("stats %+v", st)
	}
	if err2 := w.Close(); err2 != err {
		t.Errorf("second Close: %v, want %v", err2, err)
	}
	if !errors.Is(w.Flush(context.Background()), ErrClosed) {
		t.Error("Flush after Close")
	}
	// Probes after Close do nothing but count.
	tr := w.StartTrace()
	tr.EnterOp(opOuter).Exit()
	if st2 := w.Stats(); st2.Rejected != st.Rejected+3 {
		t.Errorf("rejected %d after Close, want %d", st2.Rejected, st.Rejected+3)
	}
}

// TestWriterBufferFull: with no bridge the buffer fills; probes go on
// without blocking and count what they drop.
func TestWriterBufferFull(t *testing.T) {
	w := newWriter(t, Config{Addr: unusedAddr(t), BufferEvents: 1024, Shards: 1, CloseTimeout: 50 * time.Millisecond})
	start := time.Now()
	const traces = 1000
	for range traces {
		tr := w.StartTrace()
		tr.BeforeOp(opOuter)
		tr.BeforeOp(opInner)
		tr.AfterOp(opInner)
		tr.AfterOp(opOuter)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("probes took %v", d)
	}
	st := w.Stats()
	if st.Rejected == 0 || st.Buffered > 1024 || st.Rejected+st.Buffered < traces*5-traces { // metadata counts twice in Buffered
		t.Errorf("stats %+v", st)
	}
	w.Close()
	st = w.Stats()
	if st.Dropped != traces*5 {
		t.Errorf("dropped %d, want %d (%+v)", st.Dropped, traces*5, st)
	}
}

// TestWriterReconnect: the bridge drops the connection; the writer makes a
// new one with a new registry and keeps sending.
func TestWriterReconnect(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	send := func(n int) {
		for range n {
			tr := w.StartTrace()
			tr.EnterOp(opOuter).Exit()
		}
	}
	send(10)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fb.waitRecords(30)
	fb.dropConns()
	// Writes into a connection the peer closed fail after a round trip or
	// two; keep sending until the writer has reconnected.
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Connects < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect: %+v", w.Stats())
		}
		send(1)
		w.Flush(context.Background())
		time.Sleep(5 * time.Millisecond)
	}
	before := w.Stats().Sent
	send(10)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil && !errors.Is(err, ErrDropped) {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Sent < before+30 {
		t.Errorf("sent %d after reconnecting, want %d more", st.Sent-before, 30)
	}
	recs := fb.waitRecords(int(st.Sent) - int(st.Lost)) // decoded without error on every connection
	_, errs, conns := fb.snapshot()
	if len(errs) > 0 || conns < 2 {
		t.Errorf("%d connections, decode errors %v", conns, errs)
	}
	if n := len(recs); n < 60 {
		t.Errorf("%d records decoded", n)
	}
}

// TestWriterBridgeLater: records buffered while the bridge is not there go
// out once it is.
func TestWriterBridgeLater(t *testing.T) {
	addr := unusedAddr(t)
	w := newWriter(t, Config{Addr: addr, ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	for range 10 {
		tr := w.StartTrace()
		tr.EnterOp(opOuter).Exit()
	}
	time.Sleep(50 * time.Millisecond)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	fb := &fakeBridge{t: t, ln: ln}
	fb.wg.Add(1)
	go fb.accept()
	t.Cleanup(fb.close)
	fb.waitRecords(30)
	if st := w.Stats(); st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestWriterWriteTimeout: a bridge that accepts but never reads makes
// writes time out; the probes never block and Close returns in time.
func TestWriterWriteTimeout(t *testing.T) {
	w := newWriter(t, Config{Addr: bridgetest.Blackhole(t), WriteTimeout: 50 * time.Millisecond, CloseTimeout: 200 * time.Millisecond, BufferEvents: 1 << 16})
	start := time.Now()
	for time.Since(start) < 2*time.Second && w.Stats().WriteFailures == 0 {
		for range 1000 {
			tr := w.StartTrace()
			tr.EnterOp(opOuter).Exit()
		}
		time.Sleep(time.Millisecond)
	}
	st := w.Stats()
	if st.WriteFailures == 0 {
		t.Fatalf("no write timed out: %+v", st)
	}
	start = time.Now()
	if err := w.Close(); !errors.Is(err, ErrDropped) {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
}

func TestNilAndDisabled(t *testing.T) {
	var w *Writer
	if w.StartTrace() != nil || w.Start(TraceOptions{}) != nil || w.Close() != nil || w.Stats() != (Stats{}) {
		t.Error("nil writer")
	}
	if !errors.Is(w.Flush(context.Background()), ErrClosed) {
		t.Error("nil writer Flush")
	}
	var tr *Trace
	tr.BeforeOp(opOuter)
	tr.AfterOp(opOuter)
	tr.AfterFailedOp(opOuter, "x")
	tr.Before("a", "b")
	tr.After("a", "b")
	tr.AfterFailed("a", "b", "c")
	tr.EnterOp(opOuter).Exit()
	tr.Enter("a", "b").ExitFailed("c")
	var err error = errors.New("x")
	tr.EnterOp(opOuter).ExitErr(&err)
	tr.EnterOp(opOuter).ExitErr(nil)
	tr.End()
	tr.Publish()
	if tr.Fork() != nil || tr.ID() != 0 {
		t.Error("nil trace")
	}
	var zero Trace // not made by a Writer: records go nowhere
	zero.EnterOp(opOuter).Exit()
	zero.BeforeOp(opOuter)
	zero.End()
	if zero.Fork() != nil {
		t.Error("zero trace forks")
	}

	fb := newFakeBridge(t, false)
	w = newWriter(t, Config{Addr: fb.addr()})
	Enable(false)
	if Enabled() {
		t.Error("Enabled after Enable(false)")
	}
	if w.StartTrace() != nil {
		t.Error("StartTrace while disabled")
	}
	Enable(true)
	live := w.StartTrace()
	c := live.EnterOp(opOuter)
	Enable(false)
	live.BeforeOp(opInner) // ignored
	c.Exit()               // recorded: the call began while enabled
	Enable(true)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fb.waitRecords(3)
	time.Sleep(20 * time.Millisecond)
	if recs, _, _ := fb.snapshot(); len(recs) != 3 {
		t.Errorf("%d records, want 3", len(recs))
	}
}

func TestContext(t *testing.T) {
	if FromContext(context.Background()) != nil {
		t.Error("empty context has a trace")
	}
	tr := &Trace{id: 5}
	if FromContext(WithTrace(context.Background(), tr)) != tr {
		t.Error("trace lost")
	}
}

// TestTraceBlocks: a trace publishes when its outermost call ends, when
// its block is full, and at End; not before.
func TestTraceBlocks(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), Shards: 1})
	tr := w.StartTrace()
	tr.BeforeOp(opOuter)
	tr.BeforeOp(opInner)
	tr.AfterOp(opInner)
	w.Flush(context.Background())
	if b := w.Stats().Sent; b != 0 {
		t.Fatalf("%d records sent before the outermost call ended", b)
	}
	tr.AfterOp(opOuter)
	w.Flush(context.Background())
	if b := w.Stats().Sent; b != 5 {
		t.Fatalf("%d records sent, want 5", b)
	}
	// Deep nesting: published every blockEvents events.
	for range blockEvents {
		tr.BeforeOp(opInner)
	}
	w.Flush(context.Background())
	if b := w.Stats().Sent; b != 5+blockEvents {
		t.Fatalf("%d records sent, want %d", b, 5+blockEvents)
	}
	tr.BeforeOp(opInner)
	tr.Publish()
	w.Flush(context.Background())
	if b := w.Stats().Sent; b != 6+blockEvents {
		t.Fatalf("%d records sent after Publish, want %d", b, 6+blockEvents)
	}
	tr.BeforeOp(opInner)
	tr.End()
	w.Flush(context.Background())
	if b := w.Stats().Sent; b != 7+blockEvents {
		t.Fatalf("%d records sent after End, want %d", b, 7+blockEvents)
	}
	fb.waitRecords(7 + blockEvents)
}

// TestConcurrentTraces runs traces on many goroutines at once; every
// record arrives.
func TestConcurrentTraces(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), BufferEvents: 1 << 16})
	const goroutines, traces = 8, 200
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range traces {
				tr := w.StartTrace()
				outer := tr.EnterOp(opOuter)
				child := tr.Fork()
				var cw sync.WaitGroup
				cw.Go(func() { child.EnterOp(opInner).Exit() })
				tr.Before("dyn.op", "dyn")
				tr.After("dyn.op", "dyn")
				cw.Wait()
				outer.Exit()
			}
		})
	}
	wg.Wait()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := goroutines * traces * (1 + 5 + 1 + 2 + 2) // the parent's SplitEvent and both InvocationRecords too
	fb.waitRecords(want)
	if st := w.Stats(); st.Dropped != 0 || st.Sent != uint64(want) {
		t.Errorf("stats %+v, want %d sent", st, want)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
		chk  func(c Config) bool
	}{
		{"defaults", Config{}, "", func(c Config) bool {
			return c.Addr == DefaultAddr && c.BufferEvents == DefaultBufferEvents && c.SessionID == DefaultSessionID && c.Hostname != "" && c.Shards >= 1
		}},
		{"rounding", Config{BufferEvents: 3000, Shards: 3}, "", func(c Config) bool { return c.BufferEvents == 4096 && c.Shards == 4 }},
		{"small buffer, fewer shards", Config{BufferEvents: 1, Shards: 64}, "", func(c Config) bool { return c.BufferEvents == MinBufferEvents && c.Shards == 1 }},
		{"bad address", Config{Addr: "nohostport"}, "address", nil},
		{"huge buffer", Config{BufferEvents: MaxBufferEvents + 1}, "buffer", nil},
		{"too many shards", Config{Shards: MaxShards + 1}, "shards", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			err := c.setDefaults()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one about %s", err, tc.err)
				}
				if _, err := NewWriter(tc.cfg); err == nil {
					t.Fatal("NewWriter accepted the config")
				}
				return
			}
			if err != nil || !tc.chk(c) {
				t.Fatalf("%+v, %v", c, err)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("TRACEBRIDGE_HOST", "")
	t.Setenv("KIEKER_HOSTNAME", "bridge.example")
	t.Setenv("TRACEBRIDGE_PORT", "4242")
	t.Setenv("TRACEBRIDGE_HOSTNAME", "me")
	t.Setenv("TRACEBRIDGE_SESSION", "sess")
	t.Setenv("TRACEBRIDGE_BUFFER", "2048")
	t.Setenv("TRACEBRIDGE_FLUSH_MS", "5")
	t.Setenv("TRACEBRIDGE_EXIT_TIMEOUT_MS", "250")
	t.Setenv("TRACEBRIDGE_INVOCATIONS", "off")
	c, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Addr: "bridge.example:4242", Hostname: "me", SessionID: "sess", BufferEvents: 2048,
		FlushInterval: 5 * time.Millisecond, CloseTimeout: 250 * time.Millisecond, NoInvocations: true}
	if diff := cmp.Diff(want, c, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Logger" }, cmp.Ignore())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	t.Setenv("TRACEBRIDGE_PORT", "70000")
	t.Setenv("TRACEBRIDGE_FLUSH_MS", "x")
	c, err = ConfigFromEnv()
	if err == nil || !strings.Contains(err.Error(), "70000") {
		t.Errorf("error %v, want one naming the port", err)
	}
	if c.Addr != "bridge.example:10133" || c.FlushInterval != 0 || c.Hostname != "me" {
		t.Errorf("config beside the error: %+v", c)
	}
}

func TestConverter(t *testing.T) {
	var c converter
	c.update()
	for range 3 {
		s := stamp()
		wall := time.Now().UnixNano()
		if d := wall - c.toNs(s); d < -int64(time.Millisecond) || d > int64(time.Millisecond) {
			t.Errorf("stamp converts to %d ns off the wall clock (tsc %v)", d, useTSC)
		}
		time.Sleep(5 * time.Millisecond)
		c.update()
	}
	a, b := stamp(), stamp()
	if c.toNs(b) < c.toNs(a) {
		t.Error("time went backwards")
	}
}

// TestGoAndFork: Go and Fork(ctx) split a child trace off the trace of a
// context (a SplitEvent in the parent, the child's TraceMetadata naming
// it), a child that records nothing sends no TraceMetadata, a parent that
// has ended leaves its children without a known split point, and without
// a trace (or with the probes off) no goroutine shares the caller's trace.
func TestGoAndFork(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), Shards: 1})
	tr := w.StartTrace()
	ctx := WithTrace(context.Background(), tr)
	outer := tr.EnterOp(opOuter)
	done := make(chan struct{})
	id := Go(ctx, func(ctx context.Context) {
		defer close(done)
		if c := FromContext(ctx); c == tr || c == nil {
			t.Errorf("goroutine got trace %p, the caller's is %p", c, tr)
		}
		FromContext(ctx).EnterOp(opInner).Exit()
	})
	<-done
	tr.Join(id)
	idle := Fork(ctx) // never used: a SplitEvent, no child trace
	if FromContext(idle) == tr {
		t.Error("Fork(ctx) returned the caller's trace")
	}
	outer.Exit()
	tr.End()
	late := w.Start(TraceOptions{Parent: tr}) // tr has ended: no split point
	late.EnterOp(opInner).Exit()

	if got := Fork(context.Background()); FromContext(got) != nil {
		t.Error("Fork without a trace made one")
	}
	ran := make(chan context.Context, 1)
	if Go(context.Background(), func(ctx context.Context) { ran <- ctx }) != 0 {
		t.Error("Go without a trace returned a child id")
	}
	if FromContext(<-ran) != nil {
		t.Error("Go without a trace gave the goroutine one")
	}
	other := w.StartTrace()
	Enable(false)
	if Go(WithTrace(context.Background(), other), func(ctx context.Context) { ran <- ctx }) != 0 {
		t.Error("Go with the probes off returned a child id")
	}
	if FromContext(<-ran) != nil {
		t.Error("Go with the probes off handed the caller's trace to the goroutine")
	}
	Enable(true)
	other.End() // no events: nothing sent

	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// tr: meta, Before, its InvocationRecord, Split, Join, Split, After;
	// child: meta, InvocationRecord, Before, After; late: the same.
	recs := fb.waitRecords(7 + 4 + 4)
	time.Sleep(20 * time.Millisecond)
	if all, _, _ := fb.snapshot(); len(all) != 15 {
		t.Errorf("%d records, want 15", len(all))
	}
	invs := invocations(recs)
	var trInv int64
	parents := map[int64][2]int64{} // traceId → parent invocation, order
	for _, in := range invs {
		if in.TraceID == tr.ID() {
			trInv = in.ID
		}
		parents[in.TraceID] = [2]int64{in.ParentID, int64(in.ParentOrderID)}
	}
	// late was started after tr ended: tr's invocation, no split point.
	wantParents := map[int64][2]int64{tr.ID(): {-1, -1}, id: {trInv, 1}, late.ID(): {trInv, -1}}
	if diff := cmp.Diff(wantParents, parents); diff != "" {
		t.Errorf("invocation parents (-want +got):\n%s", diff)
	}
	type meta struct{ Parent, Order int64 }
	metas := map[int64]meta{}
	var kinds []string
	for _, r := range recs {
		switch r.Type.Name {
		case record.TraceMetadata:
			metas[field(r, "traceId").(int64)] = meta{field(r, "parentTraceId").(int64), field(r, "parentOrderId").(int64)}
		case trace.InvocationTypeName:
		default:
			if field(r, "traceId").(int64) == tr.ID() {
				kinds = append(kinds, fmt.Sprintf("%s@%d", r.Type.ShortName(), field(r, "orderIndex")))
				if j := field(r, "joinedTraceId"); j != nil && j != id {
					t.Errorf("JoinEvent names %v, want %d", j, id)
				}
			}
		}
	}
	wantKinds := []string{"BeforeOperationEvent@0", "SplitEvent@1", "JoinEvent@2", "SplitEvent@3", "AfterOperationEvent@4"}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("parent's events (-want +got):\n%s", diff)
	}
	wantMetas := map[int64]meta{tr.ID(): {tr.ID(), -1}, id: {tr.ID(), 1}, late.ID(): {tr.ID(), -1}}
	if diff := cmp.Diff(wantMetas, metas); diff != "" {
		t.Errorf("TraceMetadata parents (-want +got):\n%s", diff)
	}
}
