package reconstruct

import (
	"cmp"
	"container/heap"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

const constructionEvent = record.Prefix + "flow.trace.ConstructionEvent"

// DefaultMaxTraceDuration is Kieker's --max-trace-duration default.
const DefaultMaxTraceDuration = 10 * time.Minute

// Options say what Kieker's tool was asked.
type Options struct {
	// Repair is --repair-event-based-traces, IgnoreAssumed
	// --ignore-assumed-calls.
	Repair, IgnoreAssumed bool
	// MaxTraceDuration is --max-trace-duration (default 10 minutes): an
	// OER trace is handed on once the latest tout is this much past its
	// earliest tin (the records' times taken as ns, as Kieker does).
	MaxTraceDuration time.Duration
	// Dates: keep only records within [Before, After]
	// (--ignore-executions-before/after-date, in the records' time unit).
	Dates         bool
	Before, After int64
	// Select keeps only the traceIds it holds (--select-traces), or with
	// Invert only the others (--filter-traces); nil keeps all.
	Select map[int64]bool
	Invert bool
	// Valid receives each valid execution trace in Kieker's order; the
	// trace and its executions are valid until Valid returns (the
	// entities they point to stay valid).
	Valid func(*sysmodel.ExecutionTrace)
	// Invalid receives what Kieker finds invalid, in Kieker's order; its
	// Trace is valid until Invalid returns.
	Invalid func(*Invalid)
}

// Invalid is a trace Kieker's tool finds invalid.
type Invalid struct {
	ID int64
	// Reason says why, in one line.
	Reason string
	// Trace is the execution trace as far as it was built (Kieker's
	// InvalidExecutionTrace, which --print-invalid-Execution-Traces
	// prints), nil when the events never became one (Kieker's invalid
	// TraceEventRecords, which it only counts).
	Trace *sysmodel.ExecutionTrace
	// Events counts the records of a trace that never became one.
	Events int
	// Fragment: a later part of an OER trace already found invalid.
	Fragment bool
}

// String describes v in one line.
func (v *Invalid) String() string {
	n := v.Events
	what := "records"
	if v.Trace != nil {
		n, what = len(v.Trace.Execs), "executions"
	}
	return "trace " + strconv.FormatInt(v.ID, 10) + " (" + strconv.Itoa(n) + " " + what + "): " + v.Reason
}

// Stats count what a Reconstructor did.
type Stats struct {
	// Records counts the trace records taken (after the filters),
	// Dropped those the date and trace id filters left out.
	Records, Dropped int64
	// Valid and Invalid count traces handed on; Executions the
	// executions of valid traces.
	Valid, Invalid, Executions int64
	// Open is the number of traces being reconstructed now; Buffered
	// their events and executions.
	Open, Buffered int
}

// Reconstructor turns Kieker records into execution traces.
type Reconstructor struct {
	o     Options
	repo  *sysmodel.Repository
	types trace.TypeCache
	ctor  map[*record.Type]bool
	bind  map[bindKey]binding

	events map[int64]*buffer
	nev    int // events buffered

	oers       map[int64]*oerTrace
	queue      oerQueue
	maxTout    int64
	invalidOER map[int64]bool
	noer       int
	oerStopped bool

	pairs   [][2]string // operation and class signatures by number (event.sig)
	pairIDs map[[2]string]uint32

	out     sysmodel.ExecutionTrace // handed to Valid and Invalid
	stats   Stats
	scratch handler
}

// New returns a Reconstructor that numbers entities in repo.
func New(repo *sysmodel.Repository, o Options) *Reconstructor {
	if o.MaxTraceDuration <= 0 {
		o.MaxTraceDuration = DefaultMaxTraceDuration
	}
	if o.Valid == nil {
		o.Valid = func(*sysmodel.ExecutionTrace) {}
	}
	if o.Invalid == nil {
		o.Invalid = func(*Invalid) {}
	}
	return &Reconstructor{o: o, repo: repo, ctor: map[*record.Type]bool{}, bind: map[bindKey]binding{},
		events: map[int64]*buffer{}, oers: map[int64]*oerTrace{}, invalidOER: map[int64]bool{}, maxTout: -1,
		pairs: [][2]string{{}}, pairIDs: map[[2]string]uint32{{}: 0}}
}

// Stats returns the counts so far.
func (r *Reconstructor) Stats() Stats {
	s := r.stats
	s.Open = len(r.events) + len(r.oers)
	s.Buffered = r.nev + r.noer
	return s
}

// bindKey is how an execution names its entities before they are parsed:
// Kieker's execution container, assembly component (execution context)
// and operation signature as logged.
type bindKey struct {
	host, context, op string
	ctor              bool
}

type binding struct {
	alloc *sysmodel.Allocation
	op    *sysmodel.Operation
}

// lookup returns the entities of an execution, numbering what is new in
// Kieker's order (AbstractTraceAnalysisStage.createExecutionByEntityNames):
// the execution context is the class signature, else the class of the
// operation signature.
func (r *Reconstructor) lookup(host, class, op string, ctor bool) binding {
	k := bindKey{host, class, op, ctor}
	if b, ok := r.bind[k]; ok {
		return b
	}
	sig := analysis.ParseSignatureAs(op, ctor)
	context := class
	if context == "" {
		context = sig.Class
	}
	var b binding
	b.alloc, b.op = r.repo.LookupNames(host, context, &sig, sig.String())
	r.bind[k] = b
	return b
}

// isCtor reports whether t is one of Kieker's constructor event types.
func (r *Reconstructor) isCtor(t *record.Type) bool {
	c, ok := r.ctor[t]
	if !ok {
		c = strings.Contains(t.Name, ".constructor.")
		r.ctor[t] = c
	}
	return c
}

// inDates is Kieker's TimestampFilter for one time.
func (r *Reconstructor) inDates(ts int64) bool {
	return !r.o.Dates || (ts >= r.o.Before && ts <= r.o.After)
}

func (r *Reconstructor) selected(id int64) bool {
	return r.o.Select == nil || r.o.Select[id] != r.o.Invert
}

// Add takes the records of b in order; the reconstructor keeps what it
// needs (strings are shared, not copied).
func (r *Reconstructor) Add(b *record.Batch) {
	for i := range b.Records {
		rec := &b.Records[i]
		ti := r.types.Get(rec.Type)
		v := rec.Values
		switch ti.Role {
		case trace.RoleMeta:
			id := v[ti.TraceID].Int()
			if (rec.LoggingTimestamp != record.NoTimestamp && !r.inDates(rec.LoggingTimestamp)) || !r.selected(id) {
				r.stats.Dropped++
				continue
			}
			r.stats.Records++
			host, session := hostSession(ti, v)
			r.meta(id, host, session)
		case trace.RoleBefore, trace.RoleAfter, trace.RoleEvent:
			if ti.Timestamp < 0 {
				continue // not one of Kieker's AbstractTraceEvents
			}
			id := v[ti.TraceID].Int()
			e := event{ts: v[ti.Timestamp].Int(), order: int32(v[ti.OrderIndex].Int())}
			if !r.inDates(e.ts) || !r.selected(id) {
				r.stats.Dropped++
				continue
			}
			r.stats.Records++
			switch ti.Role {
			case trace.RoleBefore:
				e.kind = kBefore
			case trace.RoleAfter:
				e.kind, e.failed = kAfter, ti.Failed
			default:
				e.kind = kOther
				if rec.Type.Name == constructionEvent {
					e.kind = kConstruction
				}
				if ti.CalleeOp >= 0 && ti.CalleeClass >= 0 && ti.Op >= 0 && ti.Class >= 0 {
					e.kind = kCall
					e.callee = r.pair(v[ti.CalleeOp].Str(), v[ti.CalleeClass].Str())
				}
			}
			if e.kind != kOther && e.kind != kConstruction {
				op := ""
				if ti.Op >= 0 {
					op = v[ti.Op].Str()
				}
				e.sig = r.pair(op, v[ti.Class].Str())
				e.ctor = r.isCtor(rec.Type)
			}
			r.event(id, e)
		case trace.RoleOER:
			if ti.Tin < 0 || ti.Tout < 0 {
				continue
			}
			id := v[ti.TraceID].Int()
			tin, tout := v[ti.Tin].Int(), v[ti.Tout].Int()
			if !r.inDates(tin) || !r.inDates(tout) || !r.selected(id) {
				r.stats.Dropped++
				continue
			}
			r.stats.Records++
			host, session := hostSession(ti, v)
			op := v[ti.Op].Str()
			r.oer(id, host, session, op, int(v[ti.EOI].Int()), int(v[ti.ESS].Int()), tin, tout)
		}
	}
}

// Finish hands on every trace left, as Kieker's stages do when the log
// ends.
func (r *Reconstructor) Finish() {
	ids := make([]int64, 0, len(r.events))
	for id := range r.events {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := r.events[id]
		delete(r.events, id)
		r.nev -= len(b.events)
		if r.o.Repair && len(b.stack) > 0 {
			b.repairAtEnd()
		}
		if reason := b.invalid(); reason != "" {
			r.stats.Invalid++
			r.o.Invalid(&Invalid{ID: id, Reason: reason, Events: len(b.events)})
			continue
		}
		r.convert(b)
	}
	for r.queue.Len() > 0 {
		r.pollOER()
	}
}

// ---------------------------------------------------------------------------
// Execution traces out

// emit checks r.out as ExecutionTrace.toMessageTrace does and hands it on
// as valid (unless invalid is set) or invalid.
func (r *Reconstructor) emit(invalidOER bool) {
	t := &r.out
	if len(t.Execs) > 0 {
		t.Session = t.Execs[0].Session
	}
	if reason := check(t.Execs); reason != "" {
		r.invalidTrace(reason)
		if t.Source == trace.FromExecution {
			r.invalidOER[t.KID] = true
		}
		return
	}
	if invalidOER {
		r.stats.Invalid++
		r.o.Invalid(&Invalid{ID: t.KID, Reason: "a later part of a trace found invalid", Trace: t, Fragment: true})
		return
	}
	r.stats.Valid++
	r.stats.Executions += int64(len(t.Execs))
	r.o.Valid(t)
}

func (r *Reconstructor) invalidTrace(reason string) {
	r.stats.Invalid++
	r.o.Invalid(&Invalid{ID: r.out.KID, Reason: reason, Trace: &r.out})
}

// check is ExecutionTrace.toMessageTrace's test of executions in eoi
// order: the first at ess 0, eois 0, 1, 2, …, and no ess more than one
// deeper than the one before.
func check(execs []sysmodel.Execution) string {
	for i := range execs {
		e := &execs[i]
		if i == 0 && e.ESS != 0 {
			return "First execution must have ess 0 (found " + strconv.Itoa(e.ESS) + ")"
		}
		if e.EOI != i {
			return "Eois must increment by 1 -- but found sequence <" + strconv.Itoa(i-1) + "," + strconv.Itoa(e.EOI) + ">"
		}
		if i > 0 && e.ESS > execs[i-1].ESS+1 {
			return "Ess are only allowed to increment by 1 --but found sequence <" + strconv.Itoa(execs[i-1].ESS) + "," + strconv.Itoa(e.ESS) + ">"
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// OperationExecutionRecords

type oerTrace struct {
	id       int64
	execs    []sysmodel.Execution
	firstEOI int   // the lowest eoi
	firstTin int64 // its tin: the trace's place in the queue
	minTin   int64
	version  uint32
}

// oerQueue orders pending OER traces as TraceReconstructionStage's
// timeoutMap does (tin of the lowest eoi, then traceId); entries whose
// version is not their trace's are stale and skipped.
type oerQueue []oerEntry

type oerEntry struct {
	tin     int64
	id      int64
	version uint32
	t       *oerTrace
}

func (q oerQueue) Len() int { return len(q) }
func (q oerQueue) Less(i, j int) bool {
	if q[i].tin != q[j].tin {
		return q[i].tin < q[j].tin
	}
	return q[i].id < q[j].id
}
func (q oerQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *oerQueue) Push(x any)   { *q = append(*q, x.(oerEntry)) }
func (q *oerQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// top returns the live entry first in the queue (dropping stale ones), or
// nil.
func (r *Reconstructor) top() *oerEntry {
	for r.queue.Len() > 0 {
		e := &r.queue[0]
		if r.oers[e.id] == e.t && e.t.version == e.version {
			return e
		}
		heap.Pop(&r.queue)
	}
	return nil
}

func (r *Reconstructor) oer(id int64, host, session, op string, eoi, ess int, tin, tout int64) {
	b := r.lookup(host, "", op, strings.Contains(op, "<init>"))
	if r.oerStopped {
		return
	}
	r.maxTout = max(r.maxTout, tout)
	t := r.oers[id]
	if t == nil {
		t = &oerTrace{id: id, firstEOI: eoi, firstTin: tin, minTin: tin}
		r.oers[id] = t
		heap.Push(&r.queue, oerEntry{tin: tin, id: id, t: t})
	} else if eoi < t.firstEOI || (eoi == t.firstEOI && tin < t.firstTin) {
		t.firstEOI, t.firstTin = eoi, tin
		t.version++
		heap.Push(&r.queue, oerEntry{tin: tin, id: id, version: t.version, t: t})
	}
	t.minTin = min(t.minTin, tin)
	t.execs = append(t.execs, sysmodel.Execution{Alloc: b.alloc, Op: b.op, EOI: eoi, ESS: ess, Tin: tin, Tout: tout, Session: session})
	r.noer++
	limit := r.o.MaxTraceDuration.Nanoseconds()
	for {
		e := r.top()
		if e == nil || r.maxTout-e.t.minTin <= limit {
			return
		}
		r.pollOER()
	}
}

// pollOER hands on the first trace of the queue.
func (r *Reconstructor) pollOER() {
	e := r.top()
	if e == nil {
		return
	}
	t := e.t
	heap.Pop(&r.queue)
	delete(r.oers, t.id)
	r.noer -= len(t.execs)
	// Kieker's sorted set: by eoi, then ess; an execution equal in every
	// field to one in the set is not added again.
	slices.SortStableFunc(t.execs, func(a, b sysmodel.Execution) int {
		return cmp.Or(cmp.Compare(a.EOI, b.EOI), cmp.Compare(a.ESS, b.ESS))
	})
	t.execs = slices.CompactFunc(t.execs, func(a, b sysmodel.Execution) bool {
		return a.EOI == b.EOI && a.ESS == b.ESS && a.Alloc == b.Alloc && a.Op == b.Op && a.Tin == b.Tin && a.Tout == b.Tout && a.Session == b.Session
	})
	r.out = sysmodel.ExecutionTrace{ID: strconv.FormatInt(t.id, 10), KID: t.id, Source: trace.FromExecution, Execs: t.execs}
	r.emit(r.invalidOER[t.id])
}

// ---------------------------------------------------------------------------
// Event traces

type kind uint8

const (
	kBefore kind = iota + 1
	kAfter
	kCall
	kOther
	kConstruction // a ConstructionEvent: the repair passes it on
)

// event is one buffered trace event, 24 bytes: its operation and class
// signatures (and a call's callee's) are one number of a pair
// (Reconstructor.pair), so a long trace costs no more per event.
type event struct {
	ts           int64
	order        int32
	sig          uint32 // operation and class signature
	callee       uint32 // a call's callee's
	kind         kind
	ctor, failed bool
}

// pair returns the number of the signatures op and class.
func (r *Reconstructor) pair(op, class string) uint32 {
	k := [2]string{op, class}
	id, ok := r.pairIDs[k]
	if !ok {
		id = uint32(len(r.pairs))
		r.pairs = append(r.pairs, k)
		r.pairIDs[k] = id
	}
	return id
}

// buffer is Kieker's TraceBuffer: the events of one traceId.
type buffer struct {
	id            int64
	meta          bool
	damaged       string
	host, session string
	events        []event
	sorted        bool               // events are in orderIndex order
	orders        map[int32]struct{} // the orderIndexes, once events came out of order
	closeable     bool               // a Before with orderIndex 0 came
	open          int                // Befores without their After
	maxOrder      int32              // -1 at first
	stack         []event            // repair: the Befores without their After
	endRepair     bool               // repairAtEnd ran
}

func (r *Reconstructor) buffer(id int64) *buffer {
	b := r.events[id]
	if b == nil {
		b = &buffer{id: id, maxOrder: -1, sorted: true}
		r.events[id] = b
	}
	return b
}

func (r *Reconstructor) meta(id int64, host, session string) {
	b := r.buffer(id)
	if b.meta {
		if b.damaged == "" {
			b.damaged = "Duplicate Trace entry for traceId " + strconv.FormatInt(id, 10)
		}
	} else {
		b.meta, b.host, b.session = true, host, session
	}
	r.finished(b)
}

func (r *Reconstructor) event(id int64, e event) {
	b := r.buffer(id)
	n := len(b.events)
	if r.o.Repair && e.kind != kCall && e.kind != kConstruction && !b.endRepair {
		b.repair(e, r.pairs)
	} else {
		b.insert(e)
	}
	r.nev += len(b.events) - n
	r.finished(b)
}

// finished hands b on if Kieker's TraceBuffer.isFinished says so.
func (r *Reconstructor) finished(b *buffer) {
	if !b.closeable || b.invalid() != "" {
		return
	}
	delete(r.events, b.id)
	r.nev -= len(b.events)
	r.convert(b)
}

// insert is TraceBuffer.insertEvent without the repair.
func (b *buffer) insert(e event) {
	b.maxOrder = max(b.maxOrder, e.order)
	switch e.kind {
	case kBefore:
		if e.order == 0 {
			b.closeable = true
		}
		b.open++
	case kAfter:
		b.open--
	}
	if b.sorted && (len(b.events) == 0 || e.order > b.events[len(b.events)-1].order) {
		b.events = append(b.events, e)
		return
	}
	if b.orders == nil {
		b.orders = make(map[int32]struct{}, len(b.events)+1)
		for i := range b.events {
			b.orders[b.events[i].order] = struct{}{}
		}
	}
	if _, dup := b.orders[e.order]; dup {
		if b.damaged == "" {
			b.damaged = "Duplicate entry for orderIndex " + strconv.Itoa(int(e.order))
		}
		return
	}
	b.orders[e.order] = struct{}{}
	b.sorted = false
	b.events = append(b.events, e)
}

// invalid is TraceBuffer.isInvalid: a reason, or "".
func (b *buffer) invalid() string {
	switch {
	case !b.meta:
		return "no TraceMetadata"
	case b.damaged != "":
		return b.damaged
	case b.open != 0:
		return strconv.Itoa(b.open) + " calls without their After event"
	case len(b.events) == 0:
		return "no events"
	case int(b.maxOrder)+1 != len(b.events):
		return "orderIndexes up to " + strconv.Itoa(int(b.maxOrder)) + " but " + strconv.Itoa(len(b.events)) + " events (a gap)"
	}
	return ""
}

// repair is TraceBuffer.checkIfAfterEventsMissingThenRepair: an After
// event closes the Befores above its own, with After events of their own
// at its time.
func (b *buffer) repair(e event, pairs [][2]string) {
	order, prevMax := e.order, b.maxOrder
	already := order <= b.maxOrder
	if already {
		order = b.maxOrder + 1
	}
	switch e.kind {
	case kBefore:
		b.stack = append(b.stack, e)
		b.insert(e)
	case kAfter:
		if len(b.stack) == 0 {
			return // Kieker logs "AfterEvent on empty BeforeEvent queue" and drops it
		}
		for len(b.stack) > 0 {
			top := &b.stack[len(b.stack)-1]
			if pairs[top.sig][0] == pairs[e.sig][0] || pairs[top.sig][1] == pairs[e.sig][1] {
				break
			}
			b.insert(event{ts: e.ts, order: order, kind: kAfter, ctor: top.ctor, sig: top.sig})
			b.stack = b.stack[:len(b.stack)-1]
			order++
		}
		if len(b.stack) == 0 {
			return // Kieker fails here (no Before left); the After is lost
		}
		b.stack = b.stack[:len(b.stack)-1]
		if !already && order-1 == prevMax {
			b.insert(e)
		} else {
			e.order = order
			b.insert(e)
		}
	default:
		// Kieker's repair passes on only Before and After events (and
		// Call and Construction events, handled by the caller).
	}
}

// repairAtEnd is TraceBuffer.repairAllBeforeEventsLeftInStackAtTermination:
// each Before left open gets an After at its own time.
func (b *buffer) repairAtEnd() {
	b.endRepair = true
	for len(b.stack) > 0 {
		top := &b.stack[len(b.stack)-1]
		b.insert(event{ts: top.ts, order: b.maxOrder + 1, kind: kAfter, ctor: top.ctor, sig: top.sig})
		b.stack = b.stack[:len(b.stack)-1]
	}
}

// hostSession is a record's hostname and session id ("" where its type
// has none).
func hostSession(ti *trace.TypeInfo, v []record.Value) (host, session string) {
	if ti.Host >= 0 {
		host = v[ti.Host].Str()
	}
	if ti.Session >= 0 {
		session = v[ti.Session].Str()
	}
	return host, session
}
