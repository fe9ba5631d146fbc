//go:build unix

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natslogin"

	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkCheck: the second reading before a checkpoint's purge
// (Node.unread) of a node owning 32 partitions, each holding 64 messages
// it took, for all of them and for a third of them: one consumer for all
// the partitions checked (what checkpoints do), against
// one consumer per partition, side by side (what they did before). It
// reports the process's CPU time per check (cpu-ns/op: the embedded
// NATS server's work included) beside the wall time.
func BenchmarkCheck(b *testing.B) {
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(b.TempDir(), "js")})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	const partitions, perPartition = 32, 64
	sink := &fakeSink{spans: map[trace.ID]int{}}
	creds := srv.Credentials()
	n, err := New(Options{Node: "b1", Partitions: partitions, Replicas: 1, URL: "nats://" + srv.Addr(), Login: natslogin.Login{User: creds.User, Password: creds.Password},
		Traces: trace.Options{Window: time.Hour}, Sink: sink, Persist: sink.persist, LeaseTTL: 3 * time.Second, CheckpointInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	owners := func() []*owner {
		n.mu.Lock()
		defer n.mu.Unlock()
		var os []*owner
		for _, o := range n.owners {
			os = append(os, o)
		}
		return os
	}
	for deadline := time.Now().Add(time.Minute); len(owners()) < partitions; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the partitions not owned")
		}
	}
	for i := range partitions * perPartition {
		batch := &record.Batch{Origin: record.Origin{Receiver: "bench", Host: "h"}}
		trace.AppendSpan(batch, trace.ID{Hi: 7, Lo: uint64(i + 1)}, &trace.Span{SpanID: 1, Operation: "op", Start: 1, End: 2})
		if err := n.Publisher().Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if err := n.Publisher().Flush(); err != nil {
			b.Fatal(err)
		}
	}
	taken := func(o *owner) int { o.readMu.Lock(); defer o.readMu.Unlock(); return len(o.read) }
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		sum := 0
		for _, o := range owners() {
			sum += taken(o)
		}
		if sum == partitions*perPartition {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d messages taken, want %d", sum, partitions*perPartition)
		}
	}
	// checks asks for the first k partitions (by number): a node of a
	// three-node cluster checks about a third of the stream's subjects.
	checks := func(k int) []check {
		var cs []check
		for _, o := range owners() {
			if o.p >= k {
				continue
			}
			read := o.readUpTo(1 << 62)
			cs = append(cs, check{o: o, upto: read[len(read)-1], read: read})
		}
		return cs
	}
	verify := func(b *testing.B, cs []check) {
		for _, c := range cs {
			if !c.told || c.missed != 0 {
				b.Fatalf("partition %d: told %v, missed %d", c.o.p, c.told, c.missed)
			}
		}
	}
	for _, k := range []int{partitions, partitions / 3} {
		b.Run(fmt.Sprintf("one-consumer/partitions=%d", k), func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				cs := checks(k)
				if err := n.unread(ctx, cs); err != nil {
					b.Fatal(err)
				}
				verify(b, cs)
			}
		})
		b.Run(fmt.Sprintf("per-partition/partitions=%d", k), func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				cs := checks(k)
				var wg sync.WaitGroup
				for i := range cs {
					wg.Go(func() {
						if err := n.unread(ctx, cs[i:i+1]); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				verify(b, cs)
			}
		})
	}
}

// reportCPU reports the process's CPU time per operation when the
// function it returns is called.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t0 := cpu()
	return func() { b.ReportMetric(float64(cpu()-t0)/float64(b.N), "cpu-ns/op") }
}
