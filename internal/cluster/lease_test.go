package cluster

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natslogin"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestTakeStaleLease: a lease whose recorded renewal is older than the
// TTL (and the skew margin) is taken over while the bucket still holds it
// (here its TTL is ten minutes, so the bucket does not remove it during
// the test: the case of a bucket leader whose expiry runs late); a lease
// renewed recently, and a lease of an earlier version (no renewal time),
// are not.
func TestTakeStaleLease(t *testing.T) {
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	creds := srv.Credentials()
	nc, err := nats.Connect("nats://"+srv.Addr(), nats.UserInfo(creds.User, creds.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: 10 * time.Minute, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	put := func(p int, v leaseValue) {
		t.Helper()
		b, _ := json.Marshal(v)
		if _, err := kv.Put(ctx, leaseKey(p), b); err != nil {
			t.Fatal(err)
		}
	}
	put(0, leaseValue{Node: "dead", Since: old, Renewed: old})
	put(1, leaseValue{Node: "alive", Since: old, Renewed: time.Now().Add(time.Hour)}) // renewed "all the time"
	put(2, leaseValue{Node: "older", Since: old})                                     // an earlier version's: no renewal time

	sink := &fakeSink{spans: map[trace.ID]int{}}
	n, err := New(Options{Node: "a", Partitions: 3, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: sink.persist,
		LeaseTTL: 2 * time.Second, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(rctx) }()
	defer func() { rcancel(); <-ran; n.Close() }()

	owns := func(p int) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.owners[p] != nil
	}
	waitFor(t, "partition 0 taken over from the dead node's stale lease", func() bool { return owns(0) })
	e, err := kv.Get(ctx, leaseKey(0))
	if err != nil {
		t.Fatal(err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Node != "a" || v.Renewed.IsZero() {
		t.Errorf("partition 0's lease after the takeover: %s (%v), want node a's with its renewal time", e.Value(), err)
	}
	// Never the others: checked while the new owner renews its lease
	// twice (at least TTL/4 apart: the takers sweep every lease every
	// TTL/2 meanwhile).
	check := func() {
		t.Helper()
		for p, who := range map[int]string{1: "alive", 2: "older"} {
			if owns(p) {
				t.Fatalf("partition %d (lease of %s) taken", p, who)
			}
		}
	}
	rev := e.Revision()
	waitFor(t, "partition 0's lease renewed twice by its new owner", func() bool {
		check()
		e, err := kv.Get(ctx, leaseKey(0))
		return err == nil && e.Revision() >= rev+2
	})
	for p, who := range map[int]string{1: "alive", 2: "older"} {
		e, err := kv.Get(ctx, leaseKey(p))
		if err != nil || json.Unmarshal(e.Value(), &v) != nil || v.Node != who {
			t.Errorf("partition %d's lease: %v, %v; want %s's", p, e, err, who)
		}
	}
}

// TestOwnerStopsAtDeadline: an owner stops reading its partition at its
// own renewal deadline even when its renewals do not run (the lease
// goroutine waits in a hand-over whose checkpoint hangs), and the node
// stops being the compactor then: another node takes the partitions
// after their leases' time, and the first reads nothing it published
// after the deadline.
func TestOwnerStopsAtDeadline(t *testing.T) {
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	creds := srv.Credentials()
	const partitions = 4
	// hang makes Persist wait until released or its context ends.
	var hang struct {
		sync.Mutex
		on      bool
		waiting int
		release chan struct{}
	}
	hang.release = make(chan struct{})
	start := func(name string, hangs bool) (*Node, *fakeSink, func()) {
		sink := &fakeSink{spans: map[trace.ID]int{}}
		persist := sink.persist
		if hangs {
			persist = func(ctx context.Context) error {
				hang.Lock()
				on := hang.on
				if on {
					hang.waiting++
				}
				hang.Unlock()
				if on {
					select {
					case <-hang.release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return sink.persist(ctx)
			}
		}
		n, err := New(Options{Node: name, Partitions: partitions, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
			Traces: trace.Options{Window: 100 * time.Millisecond}, Sink: sink, Persist: persist,
			LeaseTTL: 4 * time.Second, CheckpointInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- n.Run(ctx) }()
		return n, sink, func() { cancel(); <-ran; n.Close() }
	}
	owned := func(n *Node) []int {
		n.mu.Lock()
		defer n.mu.Unlock()
		var ps []int
		for p := range n.owners {
			ps = append(ps, p)
		}
		return ps
	}
	a, asink, stopA := start("a", true)
	defer stopA()
	waitFor(t, "a owning every partition", func() bool { return len(owned(a)) == partitions })

	// b joins: a's share halves and its lease goroutine hands a partition
	// over, in a checkpoint that hangs. Meanwhile nothing renews a's
	// other leases.
	hang.Lock()
	hang.on = true
	hang.Unlock()
	b, bsink, stopB := start("b", false)
	defer stopB()
	defer close(hang.release)
	waitFor(t, "a's hand-over waiting for its checkpoint", func() bool {
		hang.Lock()
		defer hang.Unlock()
		return hang.waiting > 0
	})
	var last time.Duration
	a.mu.Lock()
	for _, o := range a.owners {
		last = max(last, time.Duration(o.deadline.Load()))
	}
	compactor := a.owners[0] != nil
	a.mu.Unlock()
	if !compactor {
		t.Fatal("a handed partition 0 over: want the highest")
	}
	// Past every deadline (and a fetch in flight at it).
	waitFor(t, "a's owners' deadlines passed", func() bool { return time.Since(a.started) > last+fetchWait })
	if a.Compactor() {
		t.Error("a is still the compactor past its lease's deadline, its renewals held up")
	}

	// Published now: a's owners must not read it; b reads what it owns.
	const first, k = 1000, 64
	publishTraces(t, b, first, k)
	part := NewPartitioner(partitions)
	partOf := map[trace.ID]int{}
	for i := range k {
		bt := &record.Batch{}
		id := trace.ID{Hi: 5, Lo: uint64(first + i + 1)}
		trace.AppendSpan(bt, id, &trace.Span{SpanID: 1})
		partOf[id] = part.Partition(&bt.Records[0], &bt.Origin)
	}
	waitFor(t, "b owning two partitions and reading every trace of them", func() bool {
		ps := owned(b)
		if len(ps) < 2 {
			return false
		}
		bsink.mu.Lock()
		defer bsink.mu.Unlock()
		for id, p := range partOf {
			for _, q := range ps {
				if p == q && bsink.spans[id] == 0 {
					return false
				}
			}
		}
		return true
	})
	asink.mu.Lock()
	read := 0
	for id := range partOf {
		if asink.spans[id] > 0 {
			read++
		}
	}
	asink.mu.Unlock()
	if read > 0 {
		t.Errorf("a read %d traces published after its owners' deadline (its renewals held up)", read)
	}
}
