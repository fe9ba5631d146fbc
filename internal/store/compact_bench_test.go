package store

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkCompact measures a compaction of 16 blocks of 4,000 traces of
// 8 spans (512,000 spans) into one, with every 100th trace in two
// blocks (parts to merge): spans/CPU-s, and peak-live-MiB, the most the
// heap that the garbage collector found live grew by while Compact ran
// (sampled every millisecond, over what it was before). Run it with -benchtime 1x to 5x: every iteration
// writes its blocks first (not timed).
func BenchmarkCompact(b *testing.B) {
	const blocks, traces, spans = 16, 4000, 8
	var peak float64
	var cpu time.Duration
	n := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := Open(b.TempDir(), Options{CompactBelow: 1 << 30, CompactTo: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		for k := range blocks {
			ts := make([]*trace.Trace, 0, traces)
			for j := range traces {
				id := k*traces + j
				if j%100 == 0 && k > 0 {
					id = (k-1)*traces + j // again, in the block after
				}
				t := withResources(mkTrace(id, "alpha", spans, int64(1_000_000+id*1000), 100, j%50 == 0), "prod")
				ts = append(ts, t)
			}
			if _, err := s.Append(ts); err != nil {
				b.Fatal(err)
			}
			if err := s.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		base := heapLive()
		var mu sync.Mutex
		most := base
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					h := heapLive()
					mu.Lock()
					most = max(most, h)
					mu.Unlock()
				}
			}
		})
		cpu0 := cpuTime()
		b.StartTimer()
		merged, err := s.Compact()
		b.StopTimer()
		cpu += cpuTime() - cpu0
		close(done)
		wg.Wait()
		if err != nil || merged != blocks-1 {
			b.Fatalf("compaction merged %d blocks (%v), want %d", merged, err, blocks-1)
		}
		peak = max(peak, float64(most-base)/(1<<20))
		n += blocks * traces * spans
		s.Close()
	}
	b.ReportMetric(float64(n)/cpu.Seconds(), "spans/CPU-s")
	b.ReportMetric(peak, "peak-live-MiB")
}

// heapLive returns the bytes of the heap the last garbage collection
// found live.
func heapLive() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}
