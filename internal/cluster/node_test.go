package cluster

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natslogin"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// fakeSink keeps the traces an owner hands on; persisted counts
// Persist's calls.
type fakeSink struct {
	mu        sync.Mutex
	spans     map[trace.ID]int
	persisted int
	// packed: the sink reads traces packed (as the store does); ops
	// counts the operations of their spans, read through an Unpacker,
	// and packedTraces the traces that came packed.
	packed       bool
	unpack       trace.Unpacker
	ops          map[string]int
	packedTraces int
	// emitted: what each trace handed on was (its broken reasons and
	// its spans' hosts), for sinks that do not read packed traces.
	emitted map[trace.ID][]string
}

func (s *fakeSink) PackedTraces() bool { return s.packed }

func (s *fakeSink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range ts {
		s.spans[t.ID] += t.SpanCount()
		if t.Packed != nil {
			s.packedTraces++
		} else {
			if s.emitted == nil {
				s.emitted = map[trace.ID][]string{}
			}
			e := slices.Clone(t.Broken)
			for _, sp := range t.Spans {
				e = append(e, "host "+sp.Host)
			}
			s.emitted[t.ID] = append(s.emitted[t.ID], strings.Join(e, ", "))
		}
		if s.ops != nil {
			for _, sp := range s.unpack.Trace(t).Spans {
				s.ops[sp.Operation]++
			}
		}
	}
	return nil
}

func (s *fakeSink) persist(context.Context) error {
	s.mu.Lock()
	s.persisted++
	s.mu.Unlock()
	return nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, 60*time.Second, what, cond)
}

// runUntilEnd runs n until the test ends (then it stops it, checks Run's
// error and closes n) and returns the context it runs in.
func runUntilEnd(t *testing.T, n *Node) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
		n.Close()
	})
	return ctx
}

// TestNodePublishOwnCheckpoint: one node on an embedded server (R1):
// what its publisher stores reaches the owners, whole traces reach the
// sink (packed: it reads them so, as the store), and checkpoints empty the stream; at the end the leases are
// released.
func TestNodePublishOwnCheckpoint(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sink := &fakeSink{spans: map[trace.ID]int{}, packed: true, ops: map[string]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "t1", Partitions: 4, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 3 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	waitFor(t, "every partition owned", func() bool {
		st := n.Status()
		for _, p := range st.Owners {
			if p.Owner != "t1" {
				return false
			}
		}
		return len(st.Owners) == 4
	})

	// 50 traces of 3 spans, in two batches (a trace's spans in both).
	pub := n.Publisher()
	for half := range 2 {
		b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
		for i := range 50 {
			id := trace.ID{Hi: 7, Lo: uint64(i + 1)}
			for k := range 3 {
				if k%2 == half {
					trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
				}
			}
		}
		if err := pub.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
		// The same batch again: a client's retry, deduplicated by id.
		if err := pub.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// A retry of the first half after its flush, in one message with a
	// new trace's spans: the owner drops the retry's section and keeps
	// the new one.
	first := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h", Peer: "elsewhere"}}
	for i := range 50 {
		for k := 0; k < 3; k += 2 {
			trace.AppendSpan(first, trace.ID{Hi: 7, Lo: uint64(i + 1)}, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
		}
	}
	fresh := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	for k := range 3 {
		trace.AppendSpan(fresh, trace.ID{Hi: 8, Lo: 1}, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
	}
	for _, b := range []*record.Batch{first, fresh} {
		if err := pub.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every trace whole at the sink", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		whole := 0
		for _, n := range sink.spans {
			if n >= 3 {
				whole++
			}
		}
		return whole == 51
	})
	sink.mu.Lock()
	for id, c := range sink.spans {
		if c != 3 {
			t.Errorf("trace %v: %d spans, want 3 (the retry was not deduplicated?)", id, c)
		}
	}
	// The sink reads traces packed: the owner packed them, and their
	// spans read back.
	if sink.packedTraces < 51 || sink.ops["op"] != 153 || len(sink.ops) != 1 {
		t.Errorf("%d traces came packed (want every one, at least 51); operations read %v, want op: 153", sink.packedTraces, sink.ops)
	}
	sink.mu.Unlock()
	waitFor(t, "the stream emptied by checkpoints", func() bool {
		st := n.Status()
		return st.Stream.OK && st.Stream.Messages == 0 && st.Store.OK && !st.Store.LastCheckpoint.IsZero()
	})
	var ckpt uint64
	for _, p := range n.Status().Owners {
		ckpt = max(ckpt, p.Checkpoint)
	}
	if ckpt == 0 {
		t.Errorf("no partition shows a checkpoint after the stream was emptied: %+v", n.Status().Owners)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// The leases are gone: another node takes the partitions at once.
	lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer lcancel()
	kv, err := n.JetStream().KeyValue(lctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := kv.Keys(lctx); err == nil && len(keys) > 0 {
		t.Errorf("leases left after Run: %v", keys)
	}
}

// TestNodeGone: a node whose heartbeat expires (killed: its connection
// just ends) stays in the others' status as gone, and degraded says so,
// until it comes back; a node that stops (its Run ends) is not listed.
// (A node tells the two apart by the delete marker a stopping node
// leaves, which lives for the lease TTL: the TTL is long enough here for
// a's beats, a second apart, to see it on a busy machine.)
func TestNodeGone(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	creds := srv.Credentials()
	start := func(name string) (*Node, context.CancelFunc, chan error) {
		sink := &fakeSink{spans: map[trace.ID]int{}}
		n, err := New(Options{Node: name, Partitions: 4, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
			Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
			LeaseTTL: 6 * time.Second, CheckpointInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- n.Run(ctx) }()
		return n, cancel, ran
	}
	has := func(ns []NodeStatus, name string) bool {
		for _, s := range ns {
			if s.Name == name {
				return true
			}
		}
		return false
	}
	a, acancel, aran := start("a")
	defer func() { acancel(); <-aran; a.Close() }()
	b, bcancel, bran := start("b")
	c, ccancel, cran := start("c")
	waitFor(t, "a seeing b and c", func() bool {
		st := a.Status()
		return has(st.Nodes, "b") && has(st.Nodes, "c")
	})

	// c stops: not gone.
	ccancel()
	<-cran
	c.Close()
	waitFor(t, "c no longer alive", func() bool { return !has(a.Status().Nodes, "c") })

	// b is killed: its connection ends without a goodbye.
	b.Close()
	waitFor(t, "b gone", func() bool { return has(a.Status().Gone, "b") })
	st := a.Status()
	if has(st.Nodes, "b") || has(st.Gone, "c") {
		t.Errorf("nodes %v, gone %v: want b only gone, c in neither", st.Nodes, st.Gone)
	}
	found := false
	for _, d := range st.Degraded {
		found = found || strings.HasPrefix(d, "node b gone since ")
	}
	if !found {
		t.Errorf("degraded %q: want node b gone", st.Degraded)
	}
	bcancel()
	<-bran

	// b comes back.
	b2, b2cancel, b2ran := start("b")
	defer func() { b2cancel(); <-b2ran; b2.Close() }()
	waitFor(t, "b back", func() bool {
		st := a.Status()
		return has(st.Nodes, "b") && !has(st.Gone, "b")
	})
}

// TestOwnerHolds: a lease renewed with a checkpoint and its renewal time
// is still its owner's
// (the recovery of a renewal whose answer was lost compares owners, not
// bytes); another node's or another take's is not.
func TestOwnerHolds(t *testing.T) {
	since := time.Date(2026, 11, 28, 19, 0, 0, 123, time.UTC)
	val, _ := json.Marshal(leaseValue{Node: "n1", Since: since})
	o := &owner{value: val}
	other, _ := json.Marshal(leaseValue{Node: "n2", Since: since})
	later, _ := json.Marshal(leaseValue{Node: "n1", Since: since.Add(time.Second)})
	for _, c := range []struct {
		b    []byte
		want bool
	}{{val, true}, {stamp(o.value, 42, since.Add(time.Minute)), true}, {other, false}, {later, false}, {[]byte("junk"), false}} {
		if got := o.holds(c.b); got != c.want {
			t.Errorf("holds(%s) = %v, want %v", c.b, got, c.want)
		}
	}
	var v leaseValue
	if err := json.Unmarshal(stamp(o.value, 42, since.Add(time.Minute)), &v); err != nil || v.Checkpoint != 42 || v.Node != "n1" || !v.Since.Equal(since) || !v.Renewed.Equal(since.Add(time.Minute)) {
		t.Errorf("stamp(42) = %+v, %v", v, err)
	}
}

// TestFencedLeaseReclaimed: a node cut off from NATS (its connection
// goes through a proxy that refuses it) fences its owners before their
// leases can expire. Back before they expire, it renews them (the same
// leases: nobody took them) and owns its partitions again; back after,
// it finds them the other node's and owns none of those. At no poll do
// two nodes own one partition.
func TestFencedLeaseReclaimed(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	creds := srv.Credentials()
	proxy := servicetest.NewProxy(t, srv.Addr())
	start := func(name, addr string) (*Node, func()) {
		sink := &fakeSink{spans: map[trace.ID]int{}}
		n, err := New(Options{Node: name, Partitions: 4, Replicas: 1, URL: "nats://" + addr, Login: natslogin.Login{User: creds.User, Password: creds.Password},
			Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist, Expected: 2,
			LeaseTTL: 12 * time.Second, CheckpointInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- n.Run(ctx) }()
		return n, func() { cancel(); <-ran; n.Close() }
	}
	a, stopA := start("a", proxy.Addr())
	defer stopA()
	b, stopB := start("b", srv.Addr())
	defer stopB()
	// owned: the partitions n owns, with the time their lease was
	// taken (a lease renewed keeps it).
	owned := func(n *Node) map[int]time.Time {
		n.mu.Lock()
		defer n.mu.Unlock()
		m := map[int]time.Time{}
		for p, o := range n.owners {
			var v leaseValue
			if err := json.Unmarshal(o.value, &v); err != nil {
				t.Fatal(err)
			}
			m[p] = v.Since
		}
		return m
	}
	fenced := func(n *Node) int {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.fenced)
	}
	// check fails the test when a and b own one partition.
	check := func() {
		t.Helper()
		oa, ob := owned(a), owned(b)
		for p := range oa {
			if _, ok := ob[p]; ok {
				t.Fatalf("partition %d owned by a and b", p)
			}
		}
	}
	waitChecked := func(what string, cond func() bool) {
		t.Helper()
		waitFor(t, what, func() bool { check(); return cond() })
	}
	waitChecked("every partition owned, two by each", func() bool { return len(owned(a)) == 2 && len(owned(b)) == 2 })
	before := owned(a)

	// Cut off until its owners are fenced, back at once: within the
	// fencing margin (TTL/4 = 3 s) before the leases expire.
	proxy.Down()
	waitChecked("a fencing its owners", func() bool { return fenced(a) == len(before) })
	proxy.Up()
	waitChecked("a owning its partitions again", func() bool { return len(owned(a)) == len(before) })
	if got := owned(a); !maps.Equal(got, before) {
		t.Errorf("a owns %v after the cut, want the same leases as before %v (renewed, not taken anew)", got, before)
	}

	// Cut off for longer than the TTL: b takes a's partitions; back, a
	// finds them b's and forgets its fenced leases.
	proxy.Down()
	waitChecked("b owning every partition", func() bool { return len(owned(b)) == 4 })
	proxy.Up()
	waitChecked("a without fenced leases", func() bool { return fenced(a) == 0 })
	waitChecked("the partitions shared again", func() bool { return len(owned(a)) >= 1 && len(owned(a))+len(owned(b)) == 4 })
	for p, since := range owned(a) {
		if before[p].Equal(since) {
			t.Errorf("a owns partition %d with its lease of before the long cut", p)
		}
	}
}

// TestNoOwner: the partitions without an owner make one degraded line,
// runs written as ranges, instead of a line per partition.
func TestNoOwner(t *testing.T) {
	for _, tc := range []struct {
		ps   []int
		want string
	}{
		{[]int{3}, "partition 3 has no owner"},
		{[]int{0, 1}, "partitions 0–1 have no owner"},
		{[]int{1, 4, 7, 8, 9, 31}, "partitions 1, 4, 7–9, 31 have no owner"},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}, "partitions 0–31 have no owner"},
	} {
		if got := noOwner(tc.ps); got != tc.want {
			t.Errorf("noOwner(%v) = %q, want %q", tc.ps, got, tc.want)
		}
	}
}

// TestCheckpointKeepsSkippedMessage: an owner whose reader passes over a
// message (as a JetStream consumer on a lagging replica was seen to do)
// does not remove it with the later ones it took: the checkpoint finds
// it unread, leaves it in the stream and has the partition read again,
// so its trace reaches the sink; then the stream empties. The node owns
// several partitions, checked by one reading.
func TestCheckpointKeepsSkippedMessage(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sink := &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "t1", Partitions: 4, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 3 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// A partition's second message is passed over the first time it
	// comes; a third one follows it (a reader that skipped the last
	// message of a partition took nothing after it: the checkpoint does
	// not reach it, and it waits in the stream).
	var mu sync.Mutex
	seen, lost := map[int]int{}, uint64(0)
	n.lose = func(p int, seq uint64) bool {
		mu.Lock()
		defer mu.Unlock()
		if lost == 0 {
			if seen[p]++; seen[p] == 2 {
				lost = seq
				return true
			}
		}
		return false
	}
	// Three traces for each partition, sent a round of partitions at a
	// time: one message each.
	part := NewPartitioner(4)
	var rounds [3][4]trace.ID
	count := [4]int{}
	for lo, filled := uint64(1), 0; filled < 12; lo++ {
		b := &record.Batch{}
		id := trace.ID{Hi: 9, Lo: lo}
		trace.AppendSpan(b, id, &trace.Span{SpanID: 1})
		if p := part.Partition(&b.Records[0], &b.Origin); count[p] < 3 {
			rounds[count[p]][p] = id
			count[p]++
			filled++
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "the partitions owned", func() bool {
		st := n.Status()
		if len(st.Owners) != 4 {
			return false
		}
		for _, o := range st.Owners {
			if o.Owner != "t1" {
				return false
			}
		}
		return true
	})
	pub := n.Publisher()
	for _, id := range slices.Concat(rounds[0][:], rounds[1][:], rounds[2][:]) {
		b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
		for k := range 2 {
			trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
		}
		if err := pub.Consume(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every trace at the sink, the passed-over one too", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.spans) == 12
	})
	waitFor(t, "the stream emptied by checkpoints", func() bool {
		st := n.Status()
		return st.Stream.OK && st.Stream.Messages == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if lost == 0 {
		t.Fatal("no message was passed over")
	}
	if c := testutil.ToFloat64(n.met.skipped); c < 1 {
		t.Errorf("skipped messages counted %v, want at least 1", c)
	}
}

// TestSomeoneBelow: a node above its share gives a partition back while
// another node holds fewer than the share (8 partitions on 3 nodes,
// share 3: 4/2/2 moves, 3/3/2 stays).
func TestSomeoneBelow(t *testing.T) {
	for _, tc := range []struct {
		owned []int
		want  bool
	}{
		{[]int{4, 2, 2}, true},
		{[]int{3, 3, 2}, true},
		{[]int{3, 3, 3}, false},
		{[]int{4, 3, 3}, false},
	} {
		n := &Node{}
		for i, o := range tc.owned {
			n.seen = append(n.seen, NodeStatus{Name: string(rune('a' + i)), Owned: o})
		}
		if got := n.someoneBelow(3); got != tc.want {
			t.Errorf("someoneBelow(3) with %v = %v, want %v", tc.owned, got, tc.want)
		}
	}
}
