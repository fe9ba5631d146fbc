package trace

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// kiekerGen generates Before/After events of traces of a number of calls
// each: random call trees up to 12 deep over 48 operations, timestamps
// rising by 50–2050 ns, trace ids counting from first.
type kiekerGen struct {
	rng           *rand.Rand
	ops, classes  []string
	before, after *record.Type
	calls         int
	ts            int64
	id            int64
	order         int32
	opened        int
	stack         []int
}

func newKiekerGen(first int64, calls int) *kiekerGen {
	g := &kiekerGen{rng: rand.New(rand.NewPCG(uint64(first), 7)), calls: calls, id: first, ts: 1_735_689_600_000_000_000,
		before: typ(record.BeforeOperationEvent), after: typ(record.AfterOperationEvent)}
	for i := range 48 {
		g.classes = append(g.classes, fmt.Sprintf("org.example.shop.Service%d", i/6))
		g.ops = append(g.ops, fmt.Sprintf("public int %s.op%d(long, int)", g.classes[i], i%6))
	}
	return g
}

// next adds the next n events to b.
func (g *kiekerGen) next(b *record.Batch, n int) {
	for range n {
		if g.opened == g.calls && len(g.stack) == 0 {
			g.id++
			g.order, g.opened = 0, 0
		}
		t, op := g.after, 0
		if g.opened < g.calls && len(g.stack) < 12 && (len(g.stack) == 0 || g.rng.IntN(100) < 50) {
			t, op = g.before, g.rng.IntN(len(g.ops))
			g.stack = append(g.stack, op)
			g.opened++
		} else {
			op = g.stack[len(g.stack)-1]
			g.stack = g.stack[:len(g.stack)-1]
		}
		g.ts += 50 + int64(g.rng.IntN(2001))
		r := b.Add(t, record.NoTimestamp)
		r.Values[0], r.Values[1], r.Values[2] = record.IntValue(g.ts), record.IntValue(g.id), record.IntValue(int64(g.order))
		r.Values[3], r.Values[4] = record.StringValue(g.ops[op]), record.StringValue(g.classes[op])
		g.order++
	}
}

// kiekerLoad returns batches (of batchSize records) of the events of n
// traces of calls calls each.
func kiekerLoad(first int64, n, calls, batchSize int) []*record.Batch {
	g := newKiekerGen(first, calls)
	var out []*record.Batch
	for left := 2 * n * calls; left > 0; left -= batchSize {
		b := &record.Batch{}
		g.next(b, min(left, batchSize))
		out = append(out, b)
	}
	return out
}

// BenchmarkKiekerEvents measures the assembly of Kieker event traces
// (records per second and per CPU-second over b.N records): traces of
// 1,000 calls, as barlib sends them, and of 10 calls.
func BenchmarkKiekerEvents(b *testing.B) {
	for _, calls := range []int{10, 1000} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) {
			load := kiekerLoad(1, 100_000/calls, calls, 1024)
			recs := 0
			for _, bt := range load {
				recs += len(bt.Records)
			}
			var emitted int
			a := NewAssembler(Options{Clock: RecordClock, Window: 1, Emit: func(t *Trace) { emitted += len(t.Spans) }})
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			n := 0
			for n < b.N {
				for _, bt := range load {
					a.AddBatch(bt)
					a.Tick()
				}
				a.Flush()
				n += recs
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "records/CPU-s")
			if emitted == 0 {
				b.Fatal("no spans")
			}
		})
	}
}

// cpuTime returns the process's user and system CPU time: on a shared
// machine records per CPU-second are steadier than per second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
