package probe

import (
	"errors"
	"runtime"
	"testing"
)

var benchOp = NewOp("public void bench.Service.call()", "bench.Service")

// BenchmarkProbe measures one Before/After pair (an instrumented call) on
// one goroutine, with the writer sending to a loopback reader that
// discards. SetBytes counts the two frames on the wire.
func BenchmarkProbe(b *testing.B) {
	for _, bc := range []struct {
		name string
		off  bool
		call func(t *Trace)
	}{
		{"op", false, func(t *Trace) { t.BeforeOp(benchOp); t.AfterOp(benchOp) }},
		{"enter", false, func(t *Trace) { t.EnterOp(benchOp).Exit() }},
		{"strings", false, func(t *Trace) {
			t.Before("public void bench.Service.call()", "bench.Service")
			t.After("public void bench.Service.call()", "bench.Service")
		}},
		{"failed", false, func(t *Trace) {
			err := errBench
			t.EnterOp(benchOp).ExitErr(&err)
		}},
		{"disabled", true, func(t *Trace) { t.BeforeOp(benchOp); t.AfterOp(benchOp) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := benchWriter(b, newFakeBridge(b, true).addr())
			defer w.Close()
			t := w.StartTrace()
			if bc.off {
				Enable(false)
				defer Enable(true)
			}
			b.SetBytes(2 * sizeEvent)
			b.ReportAllocs()
			before := w.Stats()
			for b.Loop() {
				bc.call(t)
			}
			b.StopTimer()
			st := w.Stats()
			b.ReportMetric(float64(st.Rejected-before.Rejected)/float64(b.N), "rejected/op")
		})
	}
}

var errBench = errors.New("bench: failed")

// BenchmarkProbeParallel measures instrumented calls from GOMAXPROCS
// goroutines, each with its own trace.
func BenchmarkProbeParallel(b *testing.B) {
	w := benchWriter(b, newFakeBridge(b, true).addr())
	defer w.Close()
	b.SetBytes(2 * sizeEvent)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		t := w.StartTrace()
		for pb.Next() {
			t.BeforeOp(benchOp)
			t.AfterOp(benchOp)
		}
	})
	st := w.Stats()
	b.ReportMetric(float64(st.Rejected)/float64(b.N), "rejected/op")
}

// BenchmarkEncode measures the writer goroutine's encoding of one event.
func BenchmarkEncode(b *testing.B) {
	var r registry
	ev := event{kind: kindBefore, ts: 1, trace: 2, order: 3, op: benchOp.id}
	buf := r.appendEvent(nil, &ev, nil, strEmpty)
	b.SetBytes(sizeEvent)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.appendEvent(buf[:0], &ev, nil, strEmpty)
	}
}

//go:noinline
func mooMonitored(t *Trace, depth int) int64 {
	t.BeforeOp(benchOp)
	r := int64(1)
	if depth > 1 {
		r = mooMonitored(t, depth-1) + 1
	}
	t.AfterOp(benchOp)
	return r
}

// benchWriter is a Writer to addr.
func benchWriter(b *testing.B, addr string) *Writer {
	b.Helper()
	w, err := NewWriter(Config{Addr: addr})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkMoo is the benchmark of probe/bench in small: one op is a
// trace of one call recursing to depth 10 (21 records), sent to a loopback
// reader that discards, or dropped when no reader listens.
func BenchmarkMoo(b *testing.B) {
	for _, bc := range []struct {
		name   string
		bridge bool
	}{{"bridge", true}, {"nobridge", false}} {
		b.Run(bc.name, func(b *testing.B) {
			addr := unusedAddr(b)
			if bc.bridge {
				addr = newFakeBridge(b, true).addr()
			}
			w := benchWriter(b, addr)
			defer w.Close()
			b.SetBytes(sizeMeta + 20*sizeEvent)
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := threadCPU()
			for b.Loop() {
				mooMonitored(w.StartTrace(), 10)
			}
			cpu = threadCPU() - cpu
			b.StopTimer()
			st := w.Stats()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10, "ns/invocation")
			b.ReportMetric(float64(cpu)/float64(b.N)/10, "cpu-ns/invocation")
			b.ReportMetric(float64(st.Rejected)/float64(b.N)/21, "rejected/record")
		})
	}
}

// BenchmarkFork measures a task handed to another goroutine, on the
// parent's side and the child's: Fork (a SplitEvent, and the child's
// TraceMetadata and InvocationRecord), one call in the child, End. The
// parent is a long-lived trace, so its own InvocationRecord is paid once.
func BenchmarkFork(b *testing.B) {
	w := benchWriter(b, newFakeBridge(b, true).addr())
	defer w.Close()
	t := w.StartTrace()
	outer := t.EnterOp(benchOp)
	b.ReportAllocs()
	for b.Loop() {
		c := t.Fork()
		c.EnterOp(benchOp).Exit()
		c.End()
	}
	b.StopTimer()
	outer.Exit()
	st := w.Stats()
	b.ReportMetric(float64(st.Rejected)/float64(b.N), "rejected/op")
}
