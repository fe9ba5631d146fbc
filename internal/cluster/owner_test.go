package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natslogin"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// refusingSink refuses every trace while refuse is set (a store whose
// disk is full), else keeps them.
type refusingSink struct {
	fakeSink
	refuse atomic.Bool
}

func (s *refusingSink) ConsumeTraces(ctx context.Context, ts []*trace.Trace) error {
	if s.refuse.Load() {
		return errors.New("store: no space left on device")
	}
	return s.fakeSink.ConsumeTraces(ctx, ts)
}

func (s *refusingSink) traces() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spans)
}

// faultNode starts a node owning partitions partitions on the server at
// addr, logging into logs; it stops with the test.
func faultNode(t *testing.T, addr string, creds natsd.Credentials, partitions int, sink TraceSink, logs *logtest.Buffer) *Node {
	t.Helper()
	n, err := New(Options{Node: "o1", Partitions: partitions, Replicas: 1, URL: "nats://" + addr, Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: func(context.Context) error { return nil },
		LeaseTTL: time.Minute, CheckpointInterval: 200 * time.Millisecond, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	n.readSettle = 2 * time.Second
	runUntilEnd(t, n)
	waitFor(t, "every partition owned", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.owners) == partitions
	})
	return n
}

// publishTraces publishes k one-span traces and waits until JetStream
// stored them.
func publishTraces(t *testing.T, n *Node, first, k int) {
	t.Helper()
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	for i := range k {
		trace.AppendSpan(b, trace.ID{Hi: 5, Lo: uint64(first + i + 1)}, &trace.Span{SpanID: 1, Operation: "op", Start: 1, End: 2})
	}
	if err := n.Publisher().Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := n.Publisher().Flush(); err != nil {
		t.Fatal(err)
	}
}

// eachOwner reports whether cond holds for every owner of n.
func eachOwner(n *Node, cond func(*owner) bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, o := range n.owners {
		if !cond(o) {
			return false
		}
	}
	return len(n.owners) > 0
}

// checkOncePerPartition checks that each partition logged one of starts
// once and end once, the end with at least least failures, and with the node.
func checkOncePerPartition(t *testing.T, logs *logtest.Buffer, partitions int, starts []string, end string, least float64) {
	t.Helper()
	started, ends := map[string]int{}, map[string]int{}
	for _, l := range logs.Lines(t) {
		msg, _ := l["msg"].(string)
		pf, ok := l["partition"].(float64)
		if !ok {
			continue
		}
		p := strconv.FormatFloat(pf, 'f', -1, 64)
		switch {
		case slices.ContainsFunc(starts, func(s string) bool { return strings.HasPrefix(msg, s) }):
			started[p]++
		case msg == end:
			ends[p]++
			if f, _ := l["failures"].(float64); f < least {
				t.Errorf("end logged with %v failures, want at least %v: %v", f, least, l)
			}
		default:
			continue
		}
		if l["node"] != "o1" {
			t.Errorf("logged without the node: %v", l)
		}
	}
	for p := range partitions {
		k := strconv.Itoa(p)
		if started[k] != 1 || ends[k] != 1 {
			t.Errorf("partition %s: %q logged %d times and %q %d times, want once each", k, starts, started[k], end, ends[k])
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}

// TestStoreRefusalLoggedOnce: an owner whose store refuses its traces
// retries every second; that is logged once per partition when it
// starts and once when the store takes the traces again, with the
// number of refusals.
func TestStoreRefusalLoggedOnce(t *testing.T) {
	srv := startServer(t)
	sink := &refusingSink{fakeSink: fakeSink{spans: map[trace.ID]int{}}}
	sink.refuse.Store(true)
	var logs logtest.Buffer
	const partitions = 2
	n := faultNode(t, srv.Addr(), srv.Credentials(), partitions, sink, &logs)
	publishTraces(t, n, 0, 20)
	waitFor(t, "three refusals in each partition", func() bool {
		return eachOwner(n, func(o *owner) bool { return o.storing.Failures() >= 3 })
	})
	sink.refuse.Store(false)
	waitFor(t, "every trace at the sink", func() bool { return sink.traces() == 20 })
	const end = "cluster: the store takes a partition's traces again"
	waitFor(t, "the end logged in each partition", func() bool { return strings.Count(logs.String(), end) == partitions })
	checkOncePerPartition(t, &logs, partitions, []string{"cluster: the store did not take a partition's traces"}, end, 3)
}

// TestReadFailuresLoggedOnce: while the NATS server is away, an owner's
// reads fail on every try; that is logged once per partition when it
// starts and once when the partition is read again, with the number of
// failures.
func TestReadFailuresLoggedOnce(t *testing.T) {
	store := filepath.Join(t.TempDir(), "js")
	srv, err := natsd.Start(natsd.Config{StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	addr, creds := srv.Addr(), srv.Credentials()
	_, port, err := natsd.SplitListen(addr)
	if err != nil {
		srv.Shutdown()
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Shutdown()
		}
	})
	sink := &refusingSink{fakeSink: fakeSink{spans: map[trace.ID]int{}}}
	var logs logtest.Buffer
	const partitions = 2
	n := faultNode(t, addr, creds, partitions, sink, &logs)
	publishTraces(t, n, 0, 20)
	waitFor(t, "every trace at the sink", func() bool { return sink.traces() == 20 })

	srv.Shutdown()
	stopped = true
	waitFor(t, "two failed reads in each partition", func() bool {
		return eachOwner(n, func(o *owner) bool { return o.reading.Failures() >= 2 })
	})
	srv, err = natsd.Start(natsd.Config{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	stopped = false
	const end = "cluster: reading a partition again"
	waitFor(t, "the end logged in each partition", func() bool { return strings.Count(logs.String(), end) == partitions })
	publishTraces(t, n, 20, 20)
	waitFor(t, "the traces published after the outage at the sink", func() bool { return sink.traces() == 40 })
	checkOncePerPartition(t, &logs, partitions, []string{"cluster: cannot read a partition yet", "cluster: reading a partition failed"}, end, 2)
	// The metric counts each failure.
	if got := testutil.ToFloat64(n.met.readErrors); got < 2*partitions {
		t.Errorf("tracebridge_cluster_read_errors_total = %v, want at least %d", got, 2*partitions)
	}
}

// TestMissedHeartbeatAlone: a pull that missed its heartbeat between good
// ones is counted, not logged (a loaded machine's stall); two in a row,
// or one followed by another failure, start an outage, logged once.
func TestMissedHeartbeatAlone(t *testing.T) {
	var logs logtest.Buffer
	n := &Node{opt: Options{Node: "o1"}, log: logs.Logger()}
	n.met = newNodeMetrics(n)
	o := newOwner(n, 3, nil, 0, time.Now())
	miss := func() { o.readFailed(fmt.Errorf("fetch: %w", jetstream.ErrNoHeartbeat)) }
	miss()
	o.readWorked()
	miss()
	o.readWorked()
	if s := logs.String(); s != "" {
		t.Fatalf("lone missed heartbeats logged:\n%s", s)
	}
	miss()
	miss() // a consumer really lost
	miss()
	o.readFailed(errors.New("no responders available for request"))
	o.readWorked()
	o.faultsEnd() // (Settle not over: the owner stops)
	var got []string
	for _, l := range logs.Lines(t) {
		got = append(got, fmt.Sprintf("%s %v failures=%v", l["level"], l["msg"], l["failures"]))
	}
	want := []string{
		"WARN cluster: reading a partition failed; reading again from where it was until it works failures=<nil>",
		"INFO cluster: stopped reading a partition whose reads were failing failures=3",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("log lines (-want +got):\n%s", d)
	}
	if got := testutil.ToFloat64(n.met.readErrors); got != 6 {
		t.Errorf("tracebridge_cluster_read_errors_total = %v, want 6 (each failure)", got)
	}
}

// TestTookInOrder: the messages an owner took stay in order, once each,
// when the consumer delivers an earlier one after later ones; the
// checkpoint's share and the removal cut them at a sequence.
func TestTookInOrder(t *testing.T) {
	o := &owner{}
	for _, s := range []uint64{5, 9, 7, 9, 12, 3} {
		o.took(s)
	}
	if want := []uint64{3, 5, 7, 9, 12}; !slices.Equal(o.read, want) {
		t.Fatalf("read %v, want %v", o.read, want)
	}
	if got, want := o.readUpTo(8), []uint64{3, 5, 7}; !slices.Equal(got, want) {
		t.Errorf("readUpTo(8) = %v, want %v", got, want)
	}
	o.purgedTo(9)
	if want := []uint64{12}; !slices.Equal(o.read, want) || o.purged.Load() != 9 {
		t.Errorf("after purgedTo(9): read %v purged %d, want %v and 9", o.read, o.purged.Load(), want)
	}
}
