package reconstruct

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// handler is TraceEventRecords2ExecutionAndMessageTraceStage's
// TraceEventRecordHandler for one trace; its slices are reused.
type handler struct {
	r     *Reconstructor
	b     *buffer
	stack []*event // Kieker's eventStack: Befores and Calls
	execs []place  // its executionStack: the registered executions
	eoi   int
	fails []string
}

// place is an execution's eoi and ess, fixed when it is registered.
type place struct{ eoi, ess int }

// convert turns a finished (or, at the end, valid) buffer into an
// execution trace and hands it on.
func (r *Reconstructor) convert(b *buffer) {
	if !b.sorted {
		slices.SortFunc(b.events, func(x, y event) int { return cmp.Compare(x.order, y.order) })
	}
	h := &r.scratch
	*h = handler{r: r, b: b, stack: h.stack[:0], execs: h.execs[:0], fails: h.fails[:0]}
	r.out = sysmodel.ExecutionTrace{ID: strconv.FormatInt(b.id, 10), KID: b.id, Session: b.session, Source: trace.FromEvents, Execs: r.out.Execs[:0]}
	expected := int32(-1)
	for i := range b.events {
		expected++
		e := &b.events[i]
		if e.order != expected {
			continue // Kieker logs "Found event with wrong orderIndex" and skips it
		}
		switch e.kind {
		case kBefore:
			h.before(e)
		case kAfter:
			h.after(e)
		case kCall:
			h.closeOpenCalls(e)
			h.register(e)
		}
	}
	finishErr := h.finish()
	slices.SortStableFunc(r.out.Execs, func(x, y sysmodel.Execution) int { return cmp.Compare(x.EOI, y.EOI) })
	for _, f := range h.fails {
		r.invalidTrace(f)
	}
	if finishErr != "" {
		r.invalidTrace(finishErr)
		return
	}
	r.emit(false)
}

// op returns the operation signature of the pair sig.
func (h *handler) op(sig uint32) string { return h.r.pairs[sig][0] }

func (h *handler) peek() *event {
	if len(h.stack) == 0 {
		return nil
	}
	return h.stack[len(h.stack)-1]
}

func (h *handler) register(e *event) {
	h.stack = append(h.stack, e)
	h.execs = append(h.execs, place{eoi: h.eoi, ess: len(h.execs)})
	h.eoi++
}

// execution makes an execution of the trace (finishExecution), numbering
// its entities if they are new.
func (h *handler) execution(sig uint32, p place, tin, tout int64, assumed, ctor, failed bool) {
	names := &h.r.pairs[sig]
	b := h.r.lookup(h.b.host, names[1], names[0], ctor)
	h.r.out.Execs = append(h.r.out.Execs, sysmodel.Execution{Alloc: b.alloc, Op: b.op, EOI: p.eoi, ESS: p.ess,
		Tin: tin, Tout: tout, Session: h.b.session, Assumed: assumed, Error: failed})
}

// closeOpenCalls closes the calls on top of the stack up to the first one
// made by last's operation: their callees had no events of their own, so
// Kieker assumes they ran from the call until last.
func (h *handler) closeOpenCalls(last *event) {
	for j := len(h.stack) - 1; j >= 0 && h.stack[j].kind == kCall; j-- {
		if h.op(last.sig) != h.op(h.stack[j].sig) {
			continue
		}
		m := len(h.stack) - j // calls closed, outermost first
		ps := h.execs[len(h.execs)-m:]
		for k, c := range h.stack[j:] {
			h.execution(c.callee, ps[k], c.ts, last.ts, !h.r.o.IgnoreAssumed, c.ctor, false)
		}
		h.stack = h.stack[:j]
		h.execs = h.execs[:len(h.execs)-m]
		return
	}
}

// matchingCall is isPrevEventMatchingCall: prev is the call (a
// constructor's when ctorCall) just before before, of its operation, or,
// guessing, of an operation with the same signature in its class.
func (h *handler) matchingCall(before, prev *event, ctorCall bool) bool {
	if prev == nil || prev.kind != kCall || (ctorCall && !prev.ctor) || prev.order != before.order-1 {
		return false
	}
	if prev.callee == before.sig {
		return true
	}
	callee, bef := &h.r.pairs[prev.callee], &h.r.pairs[before.sig]
	if callee[1] != bef[1] {
		return false
	}
	a, b := analysis.ParseSignatureAs(callee[0], before.ctor), analysis.ParseSignatureAs(bef[0], before.ctor)
	return a.Equal(&b)
}

func (h *handler) before(e *event) {
	if h.matchingCall(e, h.peek(), e.ctor) {
		h.stack = append(h.stack, e)
		return
	}
	h.closeOpenCalls(e)
	h.register(e)
}

func (h *handler) after(e *event) {
	h.closeOpenCalls(e)
	top := h.peek()
	if top == nil || top.kind != kBefore || (e.ctor && !top.ctor) {
		what := "none"
		if top != nil {
			what = "orderIndex " + strconv.Itoa(int(top.order))
		}
		h.fails = append(h.fails, "Didn't find the Before event for the After event at orderIndex "+strconv.Itoa(int(e.order))+" (found: "+what+")")
		return
	}
	if e.sig != top.sig {
		h.fails = append(h.fails, "Components of before (orderIndex "+strconv.Itoa(int(top.order))+") and after (orderIndex "+strconv.Itoa(int(e.order))+") events do not match")
		return
	}
	h.stack = h.stack[:len(h.stack)-1]
	prev := h.peek()
	definite := prev == nil || h.matchingCall(top, prev, e.ctor)
	if definite && len(h.stack) > 0 {
		h.stack = h.stack[:len(h.stack)-1]
	}
	if len(h.execs) == 0 {
		h.fails = append(h.fails, "no execution open for the After event at orderIndex "+strconv.Itoa(int(e.order)))
		return
	}
	p := h.execs[len(h.execs)-1]
	h.execs = h.execs[:len(h.execs)-1]
	h.execution(top.sig, p, top.ts, e.ts, !(definite || h.r.o.IgnoreAssumed), top.ctor, e.failed)
}

// finish closes the calls left open at the end of the trace at the time
// of the last of them, outermost first; anything else left open makes the
// trace invalid.
func (h *handler) finish() string {
	if len(h.stack) == 0 {
		return ""
	}
	if len(h.stack) != len(h.execs) {
		return "Only CallOperationEvents are expected to be remaining, but found a Before event"
	}
	last := h.stack[len(h.stack)-1].ts
	for k, c := range h.stack {
		if c.kind != kCall {
			return "Only CallOperationEvents are expected to be remaining, but found a Before event"
		}
		h.execution(c.callee, h.execs[k], c.ts, last, !h.r.o.IgnoreAssumed, c.ctor, false)
	}
	return ""
}
