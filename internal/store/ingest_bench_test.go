package store

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkIngestCut measures the store's whole ingest path per span:
// Append of OTLP-like traces (8 spans, resources and scopes shared per
// service as the assembler shares them), then Flush (the head cut, its
// block built from the write-ahead file and written to the bucket).
// spans/CPU-s is the figure (the process's CPU time: the uploader runs
// on its own goroutine); B/span the block bytes per span.
func BenchmarkIngestCut(b *testing.B) {
	const traces, spans = 4000, 8
	shared := map[string]*trace.Resource{}
	scopes := map[string]*trace.Scope{}
	ts := make([]*trace.Trace, traces)
	for i := range ts {
		t := withResources(mkTrace(i, "alpha", spans, int64(1_000_000+i*1000), 100, i%50 == 0), "prod")
		for j, r := range t.Resources {
			if x, ok := shared[r.Attributes[0].Value]; ok {
				t.Resources[j] = x
			} else {
				shared[r.Attributes[0].Value] = r
			}
		}
		for j, c := range t.Scopes {
			if x, ok := scopes[c.Name]; ok {
				t.Scopes[j] = x
			} else {
				scopes[c.Name] = c
			}
		}
		for k := range t.Spans {
			sp := &t.Spans[k]
			sp.Resource, sp.Scope = shared[sp.Resource.Attributes[0].Value], scopes[sp.Scope.Name]
		}
		ts[i] = t
	}
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		for j := 0; j < traces; j += 100 {
			batch := ts[j : j+100]
			for _, t := range batch {
				t.ID.Hi = uint64(i + 1)
			}
			if _, err := s.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		n += traces * spans
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "spans/CPU-s")
	b.ReportMetric(float64(s.Size())/float64(n), "B/span")
}

// cpuTime returns the process's user and system CPU time: on a shared
// machine spans per CPU-second are steadier than per second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
