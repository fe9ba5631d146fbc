package reconstruct

import (
	"runtime"
	"testing"

	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
)

// TestLongTraceMemory: a trace is buffered until its last call returns
// (Kieker numbers nothing of a trace that may turn out invalid), at
// about 24 bytes an event.
func TestLongTraceMemory(t *testing.T) {
	const calls = 200_000
	var got int
	r := New(sysmodel.NewRepository(), Options{Valid: func(tr *sysmodel.ExecutionTrace) { got = len(tr.Execs) }})
	var b batch
	b.meta(1)
	b.before(0, 1, 0, mainOp, "a.A")
	r.Add(&b.Batch)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	order := 1
	for i := 0; i < calls-1; i++ {
		b.Reset()
		b.before(2*i+1, 1, order, extOp, "b.B")
		b.after(2*i+2, 1, order+1, extOp, "b.B")
		order += 2
		r.Add(&b.Batch)
	}
	per := float64(heap()-before) / float64(r.Stats().Buffered)
	t.Logf("%d events buffered: %.1f bytes each", r.Stats().Buffered, per)
	if per > 40 {
		t.Errorf("%.1f bytes per buffered event, want at most 40", per)
	}
	b.Reset()
	b.after(3*calls, 1, order, mainOp, "a.A")
	r.Add(&b.Batch)
	r.Finish()
	if got != calls {
		t.Errorf("%d executions, want %d", got, calls)
	}
}
