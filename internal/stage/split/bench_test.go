package split

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

const benchBatch = 1024

// longTrace produces the events of one endless trace in batches: a root
// call that never returns, under it call trees of depth up to 12 through
// classes in four packages (a callee stays in its caller's package three
// times in four, so that with package:1 about one call in eight crosses).
// Its batches are made once and replayed with orderIndex renumbered, so
// the trace grows without end at no cost.
type longTrace struct {
	batches []record.Batch
	next    int
	oi      int64
}

func newLongTrace(id int64) *longTrace {
	rng := rand.New(rand.NewPCG(1, 2))
	packages := [][]string{
		{"app.web.Controller", "app.web.View"},
		{"svc.Orders", "svc.Cache", "svc.Prices"},
		{"db.dao.Repository", "db.dao.Query"},
		{"util.Strings", "util.Clock"},
	}
	var evs []record.Record
	var stack []int // package of each open call
	const period = 8 * benchBatch
	for len(evs) < period || len(stack) > 0 {
		if len(stack) < 12 && (len(stack) == 0 || rng.IntN(2) == 0) && len(evs) < period {
			pkg := rng.IntN(len(packages))
			if len(stack) > 0 && rng.IntN(4) != 0 {
				pkg = stack[len(stack)-1]
			}
			c := packages[pkg][rng.IntN(len(packages[pkg]))]
			evs = append(evs, before(id, 0, c, "m"))
			stack = append(stack, pkg)
		} else {
			pkg := stack[len(stack)-1]
			evs = append(evs, after(id, 0, packages[pkg][0], "m"))
			stack = stack[:len(stack)-1]
		}
	}
	lt := &longTrace{}
	for i := 0; i < len(evs); i += benchBatch {
		var b record.Batch
		for _, e := range evs[i:min(i+benchBatch, len(evs))] {
			b.AddRecord(&e)
		}
		lt.batches = append(lt.batches, b)
	}
	return lt
}

// start returns the trace's metadata and root call.
func (lt *longTrace) start(id int64) *record.Batch {
	var b record.Batch
	for _, r := range []record.Record{tm(id, 1, id, -1), before(id, 0, "app.Main", "main")} {
		b.AddRecord(&r)
	}
	lt.oi = 1
	return &b
}

// batch returns the next batch of events.
func (lt *longTrace) batch() *record.Batch {
	b := &lt.batches[lt.next]
	lt.next = (lt.next + 1) % len(lt.batches)
	for i := range b.Records {
		b.Records[i].Values[2] = record.IntValue(int64(int32(lt.oi)))
		lt.oi++
	}
	return b
}

// binarySize is the size of a Before/After event in a Kieker binary log.
const binarySize = 4 + 8 + 8 + 8 + 4 + 4 + 4

type discard struct{}

func (discard) Consume(context.Context, *record.Batch) error { return nil }

// BenchmarkSplit splits one endless trace (an op is a batch of 1024
// events; the trace is b.N batches long, so allocations per op staying at
// zero shows that memory does not grow with trace length).
func BenchmarkSplit(b *testing.B) {
	s := New(mustParse(b, "package:1"), discard{}, Options{})
	runLongTrace(b, s)
	st := s.Stats()
	b.ReportMetric(float64(st.Partial)/float64(st.RecordsIn), "partial/record")
	if st.Malformed != 0 {
		b.Fatalf("stats %+v", st)
	}
}

// BenchmarkSplitMerge splits the endless trace and merges it back (an op
// is a batch of 1024 events).
func BenchmarkSplitMerge(b *testing.B) {
	m := NewMerger(discard{}, Options{})
	runLongTrace(b, New(mustParse(b, "package:1"), m, Options{}))
	if st := m.Stats(); st.Malformed != 0 || st.Partial == 0 {
		b.Fatalf("merge stats %+v", st)
	}
}

// runLongTrace times s on one endless trace, b.N batches long, after a
// warm-up that grows the output batch, and reports ns/record.
func runLongTrace(b *testing.B, s *Stage) {
	ctx := context.Background()
	lt := newLongTrace(1)
	if err := s.Consume(ctx, lt.start(1)); err != nil {
		b.Fatal(err)
	}
	for range len(lt.batches) { // warm up: grow the output batch
		s.Consume(ctx, lt.batch())
	}
	b.SetBytes(benchBatch * binarySize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := s.Consume(ctx, lt.batch()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/record")
}
