package store

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// benchStore is a local store of 4,000 traces of 4 spans in 8 blocks of
// host "a" (the single-node case, small), for the read benchmarks.
func benchStore(b *testing.B, o Options) (*Store, []*trace.Trace) {
	b.Helper()
	s, err := Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var all []*trace.Trace
	for blk := range 8 {
		var ts []*trace.Trace
		for i := range 500 {
			n := blk*500 + i
			ts = append(ts, mkTrace(n, "a", 4, int64(1_000_000+n*1000), int64(100+n%300), n%20 == 0))
		}
		if _, err := s.Append(ts); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		all = append(all, ts...)
	}
	return s, all
}

// BenchmarkSearchNewest: the newest 20 traces, and the 20 newest with an
// attribute pair (the term index), of a warm store.
func BenchmarkSearchNewest(b *testing.B) {
	s, _ := benchStore(b, Options{})
	for _, c := range []struct {
		name string
		q    Query
	}{{"all", Query{}}, {"attr", Query{Attrs: []trace.Attr{{Key: "user", Value: "u3"}}}}, {"errors", Query{Errors: true, Limit: 100}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := s.Search(c.q)
				if err != nil || len(p.Traces) == 0 {
					b.Fatal(len(p.Traces), err)
				}
			}
		})
	}
}

// BenchmarkGet: a trace by id in a warm store of 8 blocks.
func BenchmarkGet(b *testing.B) {
	s, all := benchStore(b, Options{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Get(all[i%len(all)].ID); err != nil {
			b.Fatal(err)
		}
		i += 97
	}
}
