package probe

import (
	"context"
	"math/rand/v2"
	"os"
	"sync/atomic"
)

// disabled is the global switch, off (probes enabled) unless
// TRACEBRIDGE_ENABLED is 0 or false at start.
var disabled atomic.Bool

// Enable switches every probe of the process on or off. Switched off, a
// probe costs one atomic load (about a nanosecond); StartTrace returns nil
// and the methods of a nil *Trace do nothing. The switch starts on unless
// the environment variable TRACEBRIDGE_ENABLED is 0, false, no or off.
func Enable(on bool) { disabled.Store(!on) }

// Enabled reports whether the probes are switched on.
func Enabled() bool { return !disabled.Load() }

// traceIDs hands out trace ids, process-wide: from a random 31-bit number
// times 2^32 (so that two processes rarely share ids), one more per trace.
var traceIDs atomic.Int64

func init() {
	switch os.Getenv("TRACEBRIDGE_ENABLED") {
	case "0", "false", "no", "off":
		disabled.Store(true)
	}
	traceIDs.Store(int64(rand.Uint32()>>1) << 32)
}

// Trace is one Kieker trace: a traceId and the orderIndex of its next
// event. Start one per unit of work (a request, a job) and carry it to the
// code that records events, as an argument or in a context (WithTrace,
// FromContext); Go has no thread-local storage to hide it in.
//
// A Trace records the events of one goroutine at a time (its order index
// is not synchronised). For work that continues on other goroutines, Fork a
// child trace for each.
//
// Every method is a no-op on a nil *Trace, so a program may call probes
// on whatever FromContext returns, and on traces started while the probes
// were switched off.
type Trace struct {
	s       *shard
	w       *Writer
	blk     *block // events not yet published
	id      int64
	thread  int64
	session uint32
	order   int32
	depth   int32 // operations begun and not ended
	ended   bool
}

// TraceOptions describe a trace for Writer.Start.
type TraceOptions struct {
	// SessionID is Kieker's sessionId (Config.SessionID when empty), for
	// example the id of a web session.
	SessionID string
	// ThreadID is Kieker's threadId; Go programs may number their worker
	// goroutines with it (0 when not set).
	ThreadID int64
	// Parent, when set, makes the trace a child of Parent: its
	// parentTraceId is Parent's traceId and its parentOrderId the order
	// index Parent's next event will have (the child began after Parent's
	// events up to there; Parent's order indexes stay consecutive).
	// Otherwise the trace is a root, with parentTraceId its own traceId
	// and parentOrderId -1 (Kieker's Java convention).
	Parent *Trace
}

// StartTrace begins a root trace and records its TraceMetadata. It returns
// nil (whose methods do nothing) when w is nil or the probes are switched
// off. A trace costs one small allocation unless it stays on the caller's
// stack.
func (w *Writer) StartTrace() (t *Trace) {
	if w != nil && !disabled.Load() {
		t = new(Trace)
		w.startRoot(t)
	}
	return t
}

// startRoot is kept out of line so that StartTrace inlines, which lets a
// trace that does not escape its caller live on the caller's stack.
//
//go:noinline
func (w *Writer) startRoot(t *Trace) { w.start(t, w.sessionID, 0, nil) }

// Start begins a trace described by o and records its TraceMetadata. It
// returns nil when w is nil or the probes are switched off.
func (w *Writer) Start(o TraceOptions) *Trace {
	if w == nil || disabled.Load() {
		return nil
	}
	session := w.sessionID
	if o.SessionID != "" {
		session = names.intern(o.SessionID)
	} else if o.Parent != nil {
		session = o.Parent.session
	}
	t := new(Trace)
	w.start(t, session, o.ThreadID, o.Parent)
	return t
}

func (w *Writer) start(t *Trace, session uint32, thread int64, parent *Trace) {
	id := traceIDs.Add(1)
	t.w = w
	t.s = &w.shards[uint64(id)&w.shardMask]
	t.id = id
	t.thread = thread
	t.session = session
	meta := event{kind: kindMeta, ts: stamp(), trace: id, str: session, order: -1}
	ext := event{kind: kindMetaExt, ts: thread, trace: id}
	if parent != nil {
		ext.trace = parent.id
		meta.order = parent.order
	}
	b := blocks.Get().(*block)
	b.ev[0] = meta
	b.ev[1] = ext
	b.n = 2
	t.blk = b
}

// Fork begins a child trace of t for work that continues on another
// goroutine (see TraceOptions.Parent); it keeps t's session and thread
// ids. Fork is called on t's goroutine; the child then belongs to the
// goroutine that records its events.
func (t *Trace) Fork() *Trace {
	if t == nil || t.w == nil || t.ended || disabled.Load() {
		return nil
	}
	c := new(Trace)
	t.w.start(c, t.session, t.thread, t)
	return c
}

// ID returns Kieker's traceId of t (0 for a nil trace).
func (t *Trace) ID() int64 {
	if t == nil {
		return 0
	}
	return t.id
}

// End marks the trace finished and hands its unpublished events to the
// writer; later events of the trace are ignored. Kieker has no record for
// the end of a trace.
//
// A trace collects its events and publishes them to the writer's buffer
// when its outermost operation ends (Before and After balance), when it
// holds 32 unpublished events, and at End. A trace whose operations are
// balanced needs no End; one that stops midway (a Before without its After)
// keeps its last events until End.
func (t *Trace) End() {
	if t != nil && !t.ended {
		t.ended = true
		t.publish()
	}
}

// Publish hands the trace's unpublished events to the writer now, for a
// trace whose outermost operation runs for a long time.
func (t *Trace) Publish() {
	if t != nil {
		t.publish()
	}
}

func (t *Trace) publish() {
	b := t.blk
	if b == nil {
		return
	}
	t.blk = nil
	if t.s != nil { // nil for a Trace not made by a Writer
		t.s.push(b.ev[:b.n])
	}
	b.n = 0
	blocks.Put(b)
}

// BeforeOp records a BeforeOperationEvent: the operation op begins.
func (t *Trace) BeforeOp(op Op) {
	if t == nil || disabled.Load() {
		return
	}
	t.emit(kindBefore, op.id, 0)
}

// AfterOp records an AfterOperationEvent: op returned.
func (t *Trace) AfterOp(op Op) {
	if t == nil || disabled.Load() {
		return
	}
	t.emit(kindAfter, op.id, 0)
}

// AfterFailedOp records an AfterOperationFailedEvent: op ended with an
// error or panic described by cause. The cause is interned in the
// process-wide string table (Limits): a cause seen before costs no
// allocation, a new one is copied once.
func (t *Trace) AfterFailedOp(op Op, cause string) {
	if t == nil || disabled.Load() {
		return
	}
	t.emit(kindFailed, op.id, names.intern(cause))
}

// Before is BeforeOp(NewOp(op, cls)): convenient, a map lookup slower than
// a registered Op, and free of allocation once the pair is known.
func (t *Trace) Before(op, cls string) {
	if t == nil || disabled.Load() {
		return
	}
	t.emit(kindBefore, NewOp(op, cls).id, 0)
}

// After is AfterOp(NewOp(op, cls)).
func (t *Trace) After(op, cls string) {
	if t == nil || disabled.Load() {
		return
	}
	t.emit(kindAfter, NewOp(op, cls).id, 0)
}

// AfterFailed is AfterFailedOp(NewOp(op, cls), cause).
func (t *Trace) AfterFailed(op, cls, cause string) {
	if t == nil || disabled.Load() {
		return
	}
	t.emit(kindFailed, NewOp(op, cls).id, names.intern(cause))
}

func (t *Trace) emit(kind uint8, op, str uint32) {
	if t.ended {
		return
	}
	b := t.blk
	if b == nil {
		b = blocks.Get().(*block)
		t.blk = b
	}
	// A full block is published at once, so b.n < blockEvents; the mask
	// only spares the bounds check. The fields are stored one by one: a
	// composite literal would be built on the stack and copied.
	e := &b.ev[b.n&(blockEvents-1)]
	e.ts = stamp()
	e.trace = t.id
	e.order = t.order
	e.op = op
	e.str = str
	e.kind = kind
	b.n++
	t.order++
	if kind == kindBefore {
		t.depth++
	} else {
		t.depth--
	}
	if b.n == len(b.ev) || t.depth <= 0 {
		t.publish()
	}
}

// Call is an operation in progress, returned by Enter; its Exit methods
// record the end. It is a small value: deferring one of its methods does
// not allocate.
//
//	func (c *Catalog) Search(ctx context.Context, q string) (_ []Book, err error) {
//		defer probe.FromContext(ctx).EnterOp(opSearch).ExitErr(&err)
//		…
//	}
type Call struct {
	t  *Trace
	op uint32
}

// EnterOp records a BeforeOperationEvent for op and returns the Call whose
// Exit records the matching After event. When t is nil or the probes are
// off, the Call does nothing; a Call that recorded its Before records its
// After even if the probes were switched off in between, so traces stay
// balanced.
func (t *Trace) EnterOp(op Op) Call {
	if t == nil || disabled.Load() {
		return Call{}
	}
	t.emit(kindBefore, op.id, 0)
	return Call{t, op.id}
}

// Enter is EnterOp(NewOp(op, cls)).
func (t *Trace) Enter(op, cls string) Call {
	if t == nil || disabled.Load() {
		return Call{}
	}
	return t.EnterOp(NewOp(op, cls))
}

// Exit records an AfterOperationEvent for the call.
func (c Call) Exit() {
	if c.t != nil {
		c.t.emit(kindAfter, c.op, 0)
	}
}

// ExitFailed records an AfterOperationFailedEvent with cause.
func (c Call) ExitFailed(cause string) {
	if c.t != nil {
		c.t.emit(kindFailed, c.op, names.intern(cause))
	}
}

// ExitErr records an AfterOperationFailedEvent with the error's text as
// cause when *errp is not nil, an AfterOperationEvent otherwise. Pass the
// address of the function's named error result to a deferred ExitErr.
func (c Call) ExitErr(errp *error) {
	if c.t == nil {
		return
	}
	if errp != nil && *errp != nil {
		c.ExitFailed((*errp).Error())
		return
	}
	c.Exit()
}

type ctxKey struct{}

// WithTrace returns a copy of ctx carrying t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the trace ctx carries, or nil.
func FromContext(ctx context.Context) *Trace {
	t, _ := ctx.Value(ctxKey{}).(*Trace)
	return t
}
