package trace

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// kiekerLoad returns batches (of batchSize records) of Before/After events
// of n traces of spans calls each: random call trees up to 12 deep over 48
// operations, timestamps rising by 50–2050 ns, trace ids from first.
func kiekerLoad(first int64, n, spans, batchSize int) []*record.Batch {
	rng := rand.New(rand.NewPCG(uint64(first), 7))
	ops := make([]string, 48)
	classes := make([]string, 48)
	for i := range ops {
		classes[i] = fmt.Sprintf("org.example.shop.Service%d", i/6)
		ops[i] = fmt.Sprintf("public int %s.op%d(long, int)", classes[i], i%6)
	}
	bt, at := typ(record.BeforeOperationEvent), typ(record.AfterOperationEvent)
	var out []*record.Batch
	b := &record.Batch{}
	ts := int64(1_735_689_600_000_000_000)
	add := func(t *record.Type, id int64, order int32, op int) {
		if len(b.Records) == batchSize {
			out = append(out, b)
			b = &record.Batch{}
		}
		ts += 50 + int64(rng.IntN(2001))
		r := b.Add(t, record.NoTimestamp)
		r.Values[0], r.Values[1], r.Values[2] = record.IntValue(ts), record.IntValue(id), record.IntValue(int64(order))
		r.Values[3], r.Values[4] = record.StringValue(ops[op]), record.StringValue(classes[op])
	}
	stack := make([]int, 0, 12)
	for tr := range n {
		id := first + int64(tr)
		var order int32
		opened := 0
		for opened < spans || len(stack) > 0 {
			if opened < spans && len(stack) < 12 && (len(stack) == 0 || rng.IntN(100) < 50) {
				op := rng.IntN(len(ops))
				stack = append(stack, op)
				add(bt, id, order, op)
				opened++
			} else {
				add(at, id, order, stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			order++
		}
	}
	if len(b.Records) > 0 {
		out = append(out, b)
	}
	return out
}

// BenchmarkKiekerEvents measures the assembly of Kieker event traces
// (records per second in b.N records): traces of 1,000 calls, as barlib
// sends them, and of 10 calls.
func BenchmarkKiekerEvents(b *testing.B) {
	for _, spans := range []int{10, 1000} {
		b.Run(fmt.Sprintf("spans=%d", spans), func(b *testing.B) {
			load := kiekerLoad(1, 200_000/spans, spans, 1024)
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
