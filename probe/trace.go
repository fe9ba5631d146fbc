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
// is not synchronised). For work that continues on other goroutines, start
// them with Go, or Fork a child trace for each.
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
	named   bool  // its invocation was handed to another process (InvocationHeader)
	inv     int64 // its invocation id, 0 until it needs one (invocation.go)
}

// TraceOptions describe a trace for Writer.Start.
type TraceOptions struct {
	// SessionID is Kieker's sessionId (Config.SessionID when empty), for
	// example the id of a web session.
	SessionID string
	// ThreadID is Kieker's threadId; Go programs may number their worker
	// goroutines with it (0 when not set).
	ThreadID int64
	// Parent, when set, makes the trace a child of Parent split off here,
	// as Fork does: Start records a SplitEvent in Parent (so it is called
	// on Parent's goroutine), and the trace's parentTraceId is Parent's
	// traceId and its parentOrderId the SplitEvent's orderIndex.
	// (A Parent already ended gets no SplitEvent: the child's
	// parentOrderId is then -1, Kieker's mark of an unknown split point.)
	// Otherwise the trace is a root, with parentTraceId its own traceId
	// and parentOrderId -1 (Kieker's Java convention).
	//
	// Either way the child records an InvocationRecord naming Parent's
	// invocation (see InvocationHeader), so that the bridge links it also
	// where Kieker's metadata cannot.
	Parent *Trace
	// Remote, when Parent is nil, is the InvocationHeader of a caller in
	// another process (or on another node) on whose behalf this trace
	// runs, as a request carried it (InvocationHeaderName): the trace is
	// a root for Kieker (its TraceMetadata names no parent) and records an
	// InvocationRecord naming the caller's invocation and orderIndex, by
	// which the bridge hangs it under the caller's call. A header that
	// does not parse (ParseInvocationHeader) is ignored.
	Remote string
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
func (w *Writer) startRoot(t *Trace) { w.start(t, w.sessionID, 0, 0, -1) }

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
	var parent int64
	porder := int32(-1)
	pinv, ppid, pnode := int64(0), int32(0), uint32(0)
	if p := o.Parent; p != nil && p.w != nil {
		parent = p.id
		pinv, ppid, pnode = p.inv, pid, p.w.hostID
		if !p.ended { // else a sub-trace without a known split point
			if !p.w.cfg.NoInvocations {
				pinv = p.invocation()
			}
			porder = p.point(kindSplit, 0)
		}
	} else if o.Remote != "" && o.Parent == nil && !w.cfg.NoInvocations {
		if h, ok := ParseInvocationHeader(o.Remote); ok {
			pinv, ppid, pnode, porder = h.ID, h.PID, names.intern(h.Node), h.Order
		}
	}
	t := new(Trace)
	w.start(t, session, o.ThreadID, parent, porder)
	if pinv != 0 && !w.cfg.NoInvocations {
		t.invoke(pinv, ppid, pnode, porder)
	}
	return t
}

// start makes t a new trace and puts its TraceMetadata in t's block: a
// root when parent is 0, else a child of trace parent split off at its
// orderIndex porder.
func (w *Writer) start(t *Trace, session uint32, thread int64, parent int64, porder int32) {
	id := traceIDs.Add(1)
	t.w = w
	t.s = &w.shards[uint64(id)&w.shardMask]
	t.id = id
	t.thread = thread
	t.session = session
	if parent == 0 {
		parent, porder = id, -1
	}
	b := blocks.Get().(*block)
	b.ev[0] = event{kind: kindMeta, ts: stamp(), trace: id, str: session, order: porder}
	b.ev[1] = event{kind: kindMetaExt, ts: thread, trace: parent}
	b.n = 2
	t.blk = b
}

// Fork begins a child trace of t for work that continues on another
// goroutine, as Kieker's probes do for a thread started from a traced
// thread: t records a SplitEvent, taking t's next orderIndex, and the
// child's TraceMetadata names t's traceId and that orderIndex as its
// parentTraceId and parentOrderId. The child keeps t's session and
// thread ids; its order indexes start at 0, and its TraceMetadata is sent
// with its first events (a child that records nothing sends nothing),
// followed by its InvocationRecord naming t's invocation and the same
// orderIndex (t records its own first, if it has none yet).
//
// Fork is called on t's goroutine; the child then belongs to the goroutine
// that records its events. Go and the package function Fork do the same
// for a context.
func (t *Trace) Fork() *Trace {
	if t == nil || t.w == nil || t.ended || disabled.Load() {
		return nil
	}
	if t.w.cfg.NoInvocations {
		order := t.point(kindSplit, 0)
		c := new(Trace)
		t.w.start(c, t.session, t.thread, t.id, order)
		return c
	}
	inv := t.invocation()
	order := t.point(kindSplit, 0)
	c := new(Trace)
	t.w.start(c, t.session, t.thread, t.id, order)
	c.invoke(inv, pid, t.w.hostID, order)
	return c
}

// Join records a JoinEvent in t: the work of the child trace with id
// child (a Fork of t, or what Go returned) has been waited for here. It
// takes t's next orderIndex, as the SplitEvent did. Join does nothing
// when child is 0.
func (t *Trace) Join(child int64) {
	if t == nil || t.w == nil || t.ended || child == 0 || disabled.Load() {
		return
	}
	t.point(kindJoin, child)
}

// point records a SplitEvent, or a JoinEvent naming trace joined, and
// returns its orderIndex. Neither opens nor closes an operation; the
// block is published as after any event that leaves no operation open.
func (t *Trace) point(kind uint8, joined int64) int32 {
	b := t.blk
	if b != nil && b.n+2 > len(b.ev) { // a JoinEvent takes two events
		t.publish()
		b = nil
	}
	if b == nil {
		b = blocks.Get().(*block)
		t.blk = b
	}
	order := t.order
	t.order++
	b.ev[b.n] = event{kind: kind, ts: stamp(), trace: t.id, order: order}
	b.n++
	if kind == kindJoin {
		b.ev[b.n] = event{kind: kindJoinExt, trace: joined}
		b.n++
	}
	if b.n == len(b.ev) || t.depth <= 0 {
		t.publish()
	}
	return order
}

// Go runs f on a new goroutine in a child trace of the trace ctx carries
// (Trace.Fork: a SplitEvent here, the child's TraceMetadata naming it):
// f gets a copy of ctx carrying the child, and the child ends (Trace.End)
// when f returns. Go returns the child's traceId, for Trace.Join once the
// goroutine's work has been waited for, or 0 when there is no child (ctx
// carries no trace, or the probes are off; f then gets a ctx without a
// trace, so it never shares the caller's). Call Go on the goroutine that
// owns ctx's trace.
//
//	var wg sync.WaitGroup
//	wg.Add(1)
//	id := probe.Go(ctx, func(ctx context.Context) {
//		defer wg.Done()
//		mailer.Notify(ctx, order) // its calls form the child trace
//	})
//	wg.Wait()
//	probe.FromContext(ctx).Join(id)
func Go(ctx context.Context, f func(context.Context)) int64 {
	t := FromContext(ctx)
	if t == nil {
		go f(ctx)
		return 0
	}
	c := t.Fork()
	cctx := WithTrace(ctx, c)
	go func() {
		defer c.End()
		f(cctx)
	}()
	return c.ID()
}

// Fork returns a copy of ctx carrying a child trace of ctx's trace, forked
// here (Trace.Fork), for work that one other goroutine does: a worker
// pool's job, an errgroup function. Call it on the goroutine that owns
// ctx's trace and hand the result to the other goroutine. Without a trace
// in ctx it returns ctx; when no child can be made (the probes are off)
// the copy carries no trace, so the other goroutine never shares the
// caller's.
func Fork(ctx context.Context) context.Context {
	t := FromContext(ctx)
	if t == nil {
		return ctx
	}
	return WithTrace(ctx, t.Fork())
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
		if t.bare() { // no events: no trace
			t.blk.n = 0
			blocks.Put(t.blk)
			t.blk = nil
			return
		}
		t.publish()
	}
}

// Publish hands the trace's unpublished events to the writer now, for a
// trace whose outermost operation runs for a long time.
func (t *Trace) Publish() {
	if t != nil && !t.bare() {
		t.publish()
	}
}

// bare reports whether t has recorded nothing but its TraceMetadata and
// InvocationRecord, and named its invocation to no other process.
func (t *Trace) bare() bool {
	b := t.blk
	return b != nil && b.ev[0].kind == kindMeta && (b.n == 2 || b.n == 4 && b.ev[2].kind == kindInv && !t.named)
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
