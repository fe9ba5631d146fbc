package cluster

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natslogin"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestCuts: the safe point is the last message no later one reaches back
// across and no open trace began at or before; after holdFor without one
// it falls back to the loose rule (open traces only), once per holdFor.
func TestCuts(t *testing.T) {
	const none = math.MaxUint64
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name      string
		marks     []mark
		base      uint64
		last      uint64
		oldest    uint64
		open      bool
		want      uint64
		wantMarks int
	}{
		{"nothing open: everything", []mark{{1, 1}, {2, 1}, {3, 3}}, 0, 3, 0, false, 3, 0},
		{"an open trace began at 3", []mark{{1, 1}, {2, 2}, {3, 3}, {4, 3}}, 0, 4, 3, true, 2, 2},
		{"the last message reaches back to 1", []mark{{1, 1}, {2, 2}, {3, 3}, {4, 1}}, 0, 4, 4, true, 0, 4},
		{"reaches back to 2: cut at 1", []mark{{1, 1}, {2, 2}, {3, 3}, {4, 2}}, 0, 4, 4, true, 1, 3},
		{"messages touching no trace", []mark{{5, none}, {7, none}}, 4, 7, 0, false, 7, 0},
		{"first mark only: before it", []mark{{6, 6}, {9, 6}}, 2, 9, 6, true, 5, 2},
		{"sequences of other partitions between", []mark{{10, 10}, {20, 10}, {30, 30}}, 0, 30, 30, true, 20, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := cuts{holdFor: time.Minute, marks: append([]mark(nil), c.marks...)}
			got, loose := cs.cut(c.base, c.last, c.oldest, c.open, t0)
			if got != c.want || loose || len(cs.marks) != c.wantMarks {
				t.Errorf("cut = %d (loose %v), %d marks left; want %d, %d", got, loose, len(cs.marks), c.want, c.wantMarks)
			}
		})
	}

	// Overlapping traces keep every cut reached across: the exact cut
	// waits, then after holdFor the loose one is taken, once.
	cs := cuts{holdFor: time.Minute}
	cs.add(1, 1)
	cs.add(2, 1) // trace of 1 goes on
	cs.add(3, 2) // trace of 2 goes on
	if s, loose := cs.cut(0, 3, 3, true, t0); s != 0 || loose {
		t.Fatalf("cut = %d (loose %v), want 0", s, loose)
	}
	if s, loose := cs.cut(0, 3, 3, true, t0.Add(59*time.Second)); s != 0 || loose {
		t.Fatalf("cut after 59s = %d (loose %v), want 0", s, loose)
	}
	if s, loose := cs.cut(0, 3, 3, true, t0.Add(61*time.Second)); s != 2 || !loose {
		t.Fatalf("cut after 61s = %d (loose %v), want 2, loose", s, loose)
	}
	cs.add(4, 3)
	if s, loose := cs.cut(2, 4, 4, true, t0.Add(62*time.Second)); s != 2 || loose {
		t.Fatalf("cut right after a loose one = %d (loose %v), want 2 (another holdFor first)", s, loose)
	}
}

// Kieker records for the owner tests (the shapes of trace's tests).
var testCat = trace.Types()

func kiekerRec(b *record.Batch, typ string, vals ...record.Value) {
	r := b.Add(testCat.Lookup(typ), record.NoTimestamp)
	copy(r.Values, vals)
}

func meta(b *record.Batch, id int64) {
	kiekerRec(b, record.TraceMetadata, record.IntValue(id), record.IntValue(1), record.StringValue("sess"), record.StringValue("n1"), record.IntValue(id), record.IntValue(-1))
}

func event(b *record.Batch, typ string, id int64, order int32, ts int64, op string) {
	kiekerRec(b, typ, record.IntValue(ts), record.IntValue(id), record.IntValue(int64(order)), record.StringValue(op), record.StringValue("a.C"))
}

// ownerNode runs one node (R1, one partition) on an embedded server and
// returns it with its sink and its owner of partition 0. Checkpoints are
// far apart: the tests ask the owner for its safe point themselves.
func ownerNode(t *testing.T, traces trace.Options) (*Node, *fakeSink, *owner) {
	t.Helper()
	n, sink, _, _ := runNode(t, startServer(t), "t1", traces)
	var o *owner
	waitFor(t, "partition 0 owned", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		o = n.owners[0]
		return o != nil
	})
	return n, sink, o
}

// runNode runs a node of one partition named name on srv, handing its
// traces to the sink it returns; stop ends its Run, whose result ran
// gives (put it back for the cleanup, which waits for it too).
func runNode(t *testing.T, srv *natsd.Server, name string, traces trace.Options) (n *Node, sink *fakeSink, stop context.CancelFunc, ran chan error) {
	t.Helper()
	sink = &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: name, Partitions: 1, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: traces, Sink: sink, Persist: sink.persist, LeaseTTL: 3 * time.Second, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran = make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
		n.Close()
	})
	return n, sink, cancel, ran
}

// publish publishes b as one message and waits until the owner took it.
func publish(t *testing.T, n *Node, b *record.Batch) {
	t.Helper()
	before := testutil.ToFloat64(n.met.consumed)
	if err := n.Publisher().Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := n.Publisher().Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message consumed", func() bool { return testutil.ToFloat64(n.met.consumed) > before })
}

// TestSafePointKeepsLinkedTrace: a cross-thread Kieker trace (a task
// linked to its creator by invocation identifiers) emitted while a trace
// begun after its first message is still open: the safe point stays
// before the linked trace's first message, so that a next owner reads
// all of it again rather than the task without its creator (which it
// would assemble as a trace of its own: the trace split). The old safe
// point, counting open traces only, cut after message 1.
func TestSafePointKeepsLinkedTrace(t *testing.T) {
	n, sink, o := ownerNode(t, trace.Options{Window: 300 * time.Millisecond, OpenWindow: time.Hour})
	const main, task, long = 100, 300, 200
	m1 := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	meta(m1, main)
	trace.AppendInvocation(m1, trace.Invocation{ID: 1, ProcessID: 10, Node: "n1", RunnableID: 1, CreationTime: 1, ParentID: -1, ParentOrderID: -1, TraceID: main})
	event(m1, record.BeforeOperationEvent, main, 0, 10, "void a.C.main()")
	event(m1, record.BeforeOperationEvent, main, 1, 20, "void a.C.submit()")
	publish(t, n, m1)
	m2 := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	meta(m2, long)
	event(m2, record.BeforeOperationEvent, long, 0, 25, "void a.C.serve()") // open: the trace waits OpenWindow
	publish(t, n, m2)
	m3 := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	event(m3, record.AfterOperationEvent, main, 2, 30, "void a.C.submit()")
	event(m3, record.AfterOperationEvent, main, 3, 90, "void a.C.main()")
	meta(m3, task)
	trace.AppendInvocation(m3, trace.Invocation{ID: 2, ProcessID: 10, Node: "n1", RunnableID: 7, CreationTime: 2, ParentID: 1, ParentProcessID: 10, ParentNode: "n1", ParentOrderID: 1, TraceID: task})
	event(m3, record.BeforeOperationEvent, task, 0, 40, "void a.C.run()")
	event(m3, record.AfterOperationEvent, task, 1, 70, "void a.C.run()")
	publish(t, n, m3)

	waitFor(t, "the linked trace handed on", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.spans[trace.KiekerID(main)] == 3
	})
	sink.mu.Lock()
	if len(sink.spans) != 1 {
		t.Errorf("traces handed on: %v, want only the linked one", sink.spans)
	}
	sink.mu.Unlock()
	if s := o.safe(context.Background()); s != 0 {
		t.Fatalf("safe point %d while the trace of message 2 is open and message 3 belongs to the trace of message 1: want 0", s)
	}
	// The open trace ends: everything is safe.
	m4 := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	event(m4, record.AfterOperationEvent, long, 1, 95, "void a.C.serve()")
	publish(t, n, m4)
	waitFor(t, "every trace handed on", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.spans[trace.KiekerID(long)] == 1
	})
	if s := o.safe(context.Background()); s != 4 {
		t.Fatalf("safe point %d with nothing open, want 4 (the last message)", s)
	}
}

// TestMetadataWaitsForEvents: a Kieker trace's TraceMetadata taken in
// one message and its events in a later one, many windows later (a
// publisher held them up while JetStream elected a leader): the owner
// hands on one trace, whole, with the metadata's host. Before, the
// metadata alone was a trace that ended a window later, and the events
// made another one, broken ("no TraceMetadata"), without a host: a
// cluster showed it so on one node after a kill (TestClusterKieker).
func TestMetadataWaitsForEvents(t *testing.T) {
	n, sink, _ := ownerNode(t, trace.Options{Window: 100 * time.Millisecond, OpenWindow: time.Hour})
	const held, witness = 100, 200
	m1 := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	meta(m1, held)
	// A whole trace in the same message: once it is handed on, the
	// window has passed for the metadata too.
	meta(m1, witness)
	event(m1, record.BeforeOperationEvent, witness, 0, 10, "void a.C.main()")
	event(m1, record.AfterOperationEvent, witness, 1, 20, "void a.C.main()")
	publish(t, n, m1)
	waitFor(t, "the witness trace handed on", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.spans[trace.KiekerID(witness)] == 1
	})
	m2 := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	event(m2, record.BeforeOperationEvent, held, 0, 30, "void a.C.main()")
	event(m2, record.AfterOperationEvent, held, 1, 40, "void a.C.main()")
	publish(t, n, m2)
	waitFor(t, "the held trace handed on", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.spans[trace.KiekerID(held)] > 0
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if got, want := sink.emitted[trace.KiekerID(held)], []string{"host n1"}; !slices.Equal(got, want) {
		t.Errorf("the held trace was handed on as %q, want %q (once, whole, with the metadata's host)", got, want)
	}
}

// TestSafePointClockSteppedBack: the assembler's clock reads an hour
// ahead of the time the message was noted (a clock stepped back between
// the two readings, seen from the other side): a trace still open must
// keep its message in the stream. The old safe point compared the two
// clock readings and gave the open trace's message away.
func TestSafePointClockSteppedBack(t *testing.T) {
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	n, sink, o := ownerNode(t, trace.Options{Window: time.Hour, Now: ahead})
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	trace.AppendSpan(b, trace.ID{Hi: 1, Lo: 2}, &trace.Span{SpanID: 1, Operation: "op", Start: 1, End: 2})
	publish(t, n, b)
	if s := o.safe(context.Background()); s != 0 {
		t.Fatalf("safe point %d while the message's trace is open, want 0", s)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.spans) != 0 {
		t.Fatalf("traces handed on: %v (the window is an hour)", sink.spans)
	}
}

// TestCutAgainAfterFailedPurge: a checkpoint whose purge failed asks
// again with no message taken since: it gets the same safe point, not the
// purged base (else the stream keeps those messages until more come).
func TestCutAgainAfterFailedPurge(t *testing.T) {
	cs := cuts{holdFor: time.Minute}
	now := time.Now()
	for seq := uint64(11); seq <= 13; seq++ {
		cs.add(seq, math.MaxUint64)
	}
	if s, _ := cs.cut(10, 13, 0, false, now); s != 13 {
		t.Fatalf("first cut %d, want 13", s)
	}
	if s, _ := cs.cut(10, 13, 0, false, now); s != 13 {
		t.Fatalf("the cut asked again after a failed purge: %d, want 13 (base 10)", s)
	}
}

// TestHandOverKeepsOpenTrace: a partition handed over (rebalancing)
// while a Kieker trace is open, its receivers going on: the owner hands
// on nothing of the open trace and purges only up to its safe point, so
// that the next owner reads the trace's first message again and
// assembles it whole with the records that come after the handover. The
// old handover emitted the open trace as it was (its first call only)
// and purged everything it had taken: the next owner assembled the rest
// alone (the trace split in two; on TestClusterKieker's input, the
// traces differed from a single bridge's).
func TestHandOverKeepsOpenTrace(t *testing.T) {
	n, sink, o := ownerNode(t, trace.Options{Window: 300 * time.Millisecond, OpenWindow: time.Hour})
	const main = 100
	m1 := openTrace(main)
	publish(t, n, m1)

	// The rebalancing's path: the node gives its highest partition back.
	n.release(context.Background(), 0)
	sink.mu.Lock()
	handed := maps.Clone(sink.spans)
	sink.mu.Unlock()
	if len(handed) != 0 {
		t.Errorf("traces handed on at the handover: %v, want none (the trace is open)", handed)
	}
	if got := streamInfo(t, n).State.Msgs; got != 1 {
		t.Errorf("the stream holds %d messages after the handover, want 1 (the open trace's, for the next owner)", got)
	}

	// The node takes the partition again (its share): the new owner
	// reads the trace's first message and the rest.
	waitFor(t, "partition 0 owned again", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.owners[0] != nil && n.owners[0] != o
	})
	m2 := traceEnd(main)
	publish(t, n, m2)
	waitFor(t, "the trace handed on", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.spans) > 0 && sink.spans[trace.KiekerID(main)] >= 2
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if want := map[trace.ID]int{trace.KiekerID(main): 2}; !maps.Equal(sink.spans, want) {
		t.Errorf("spans handed on by trace: %v, want %v (the trace once, whole)", sink.spans, want)
	}
}

// openTrace is the beginning of Kieker trace id: main() calls work(),
// which returns; traceEnd is main()'s return.
func openTrace(id int64) *record.Batch {
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	meta(b, id)
	event(b, record.BeforeOperationEvent, id, 0, 10, "void a.C.main()")
	event(b, record.BeforeOperationEvent, id, 1, 20, "void a.C.work()")
	event(b, record.AfterOperationEvent, id, 2, 30, "void a.C.work()")
	return b
}

func traceEnd(id int64) *record.Batch {
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "n1"}}
	event(b, record.AfterOperationEvent, id, 3, 90, "void a.C.main()")
	return b
}

// TestLeavingNodeKeepsOpenTrace: a node that stops (SIGTERM: its Run's
// context ends) while another node is alive leaves the traces still
// open to the next owner, which assembles them whole with the records
// that come after; before, it handed them on cut, and the next owner
// assembled the rest alone (a rolling restart split open Kieker traces).
func TestLeavingNodeKeepsOpenTrace(t *testing.T) {
	srv := startServer(t)
	traces := trace.Options{Window: 300 * time.Millisecond, OpenWindow: time.Hour}
	owns := func(n *Node) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.owners[0] != nil
	}
	a, sinkA, stopA, ranA := runNode(t, srv, "a", traces)
	waitFor(t, "a owning partition 0", func() bool { return owns(a) })
	b, sinkB, _, _ := runNode(t, srv, "b", traces)
	waitFor(t, "a seeing b alive", a.othersAlive)

	const main = 100
	m1 := openTrace(main)
	publish(t, a, m1)

	stopA()
	err := <-ranA
	ranA <- err // for the cleanup
	if err != nil {
		t.Fatal(err)
	}
	sinkA.mu.Lock()
	left := maps.Clone(sinkA.spans)
	sinkA.mu.Unlock()
	if len(left) != 0 {
		t.Errorf("traces handed on by the node that left: %v, want none (the trace is open)", left)
	}
	waitFor(t, "b owning partition 0", func() bool { return owns(b) })
	m2 := traceEnd(main)
	publish(t, b, m2)
	waitFor(t, "the trace handed on by b", func() bool {
		sinkB.mu.Lock()
		defer sinkB.mu.Unlock()
		return sinkB.spans[trace.KiekerID(main)] >= 2
	})
	sinkB.mu.Lock()
	defer sinkB.mu.Unlock()
	if want := map[trace.ID]int{trace.KiekerID(main): 2}; !maps.Equal(sinkB.spans, want) {
		t.Errorf("spans handed on by b: %v, want %v (the trace once, whole)", sinkB.spans, want)
	}
}
