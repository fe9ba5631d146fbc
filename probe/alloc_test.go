package probe

import (
	"errors"
	"testing"
)

var errAlloc = errors.New("alloc: failed")

// TestNoAllocations: recording an event allocates nothing, whichever API
// records it, enabled or not, sent or dropped.
func TestNoAllocations(t *testing.T) {
	fb := newFakeBridge(t, true)
	w := newWriter(t, Config{Addr: fb.addr()})
	tr := w.StartTrace()
	tr.BeforeOp(opOuter) // keeps the trace open: events are published in blocks
	known := "alloc cause"
	tr.AfterFailed("alloc.op", "alloc", known)
	var err error = errAlloc
	for _, tc := range []struct {
		name  string
		f     func()
		trace bool // starts a trace: one allocation, none when the trace stays on the stack
	}{
		{"BeforeOp/AfterOp", func() { tr.BeforeOp(opInner); tr.AfterOp(opInner) }, false},
		{"EnterOp/Exit", func() { tr.EnterOp(opInner).Exit() }, false},
		{"EnterOp/ExitErr", func() { tr.EnterOp(opInner).ExitErr(&err) }, false},
		{"AfterFailedOp", func() { tr.BeforeOp(opInner); tr.AfterFailedOp(opInner, known) }, false},
		{"Before/After by name", func() { tr.Before("alloc.op", "alloc"); tr.After("alloc.op", "alloc") }, false},
		{"Enter by name", func() { tr.Enter("alloc.op", "alloc").ExitFailed(known) }, false},
		{"whole trace", func() { mooMonitored(w.StartTrace(), 5) }, true},
		{"disabled", func() {
			Enable(false)
			t2 := w.StartTrace()
			t2.EnterOp(opInner).Exit()
			tr.BeforeOp(opInner)
			Enable(true)
		}, false},
		{"nil trace", func() { var n *Trace; n.EnterOp(opInner).Exit() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f()
			limit := 0.0
			if tc.trace {
				limit = 1
			}
			if n := testing.AllocsPerRun(1000, tc.f); n > limit {
				t.Errorf("%v allocations per run, want at most %v", n, limit)
			}
		})
	}
}
