package trace

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Clock says what time the assembler's window counts in.
type Clock uint8

const (
	// WallClock: a trace is complete Window after its last record arrived
	// (a running bridge).
	WallClock Clock = iota
	// RecordClock: time is the latest timestamp in the records seen so
	// far, so reading a log gives the same traces however fast it is read.
	RecordClock
)

// Defaults of Options.
const (
	DefaultWindow        = 2 * time.Second
	DefaultMaxOpenTraces = 100_000
	DefaultMaxSpans      = 200_000
	// DefaultMaxHeldEvents: 4 Mi Kieker events, 64 MiB.
	DefaultMaxHeldEvents = 1 << 22
)

// Options configure an Assembler. Zero values mean the defaults.
type Options struct {
	// Window: a trace is complete Window after its last record (default
	// 2 s).
	Window time.Duration
	// OpenWindow: a trace with calls that have begun and not returned is
	// complete OpenWindow after its last record (default 30 × Window).
	OpenWindow time.Duration
	Clock      Clock
	// MaxOpenTraces bounds the traces assembled at once: beyond it the
	// trace idle longest is emitted early (counted in Stats.Evicted).
	MaxOpenTraces int
	// MaxSpans bounds the spans (calls, executions) held for one trace:
	// a trace that grows beyond it is emitted in parts (Trace.Part), each
	// marked broken, so a huge trace streams through in bounded memory.
	MaxSpans int
	// MaxHeldEvents bounds the Kieker events buffered at once (16 bytes
	// each; default DefaultMaxHeldEvents): beyond it the traces idle
	// longest, for at least an eighth of Window, that look whole (each
	// thread's events came in orderIndex order from 0, none waits for a
	// parent, every call returned) are completed before their window
	// ends (counted in Stats.Early), so a fast stream of events holds
	// less than a window's worth. What comes afterwards for such a trace
	// (a thread trace naming it as its parentTraceId, another root call
	// of its thread) is then a trace of its own. The bound is the
	// Assembler's: sharded assemblers hold Kieker events on one shard
	// (RouteKey).
	MaxHeldEvents int
	// Now is the wall clock (tests); nil means time.Now.
	Now func() time.Time
	// Emit receives every assembled trace; the trace belongs to it. It is
	// called on the goroutine that calls Add, Tick or Flush.
	Emit func(*Trace)
	// Sources limits what is assembled (zero: AllSources); records of the
	// other kinds are ignored at the cost of a type check.
	Sources Sources
	// Lean: spans from span records keep their shape only (no attributes,
	// events or links), for consumers that need no more.
	Lean bool
	// Packed: a trace made of span records only is emitted packed (its
	// Spans are not made: see Trace.Packed, Unpacker), for consumers
	// that read each trace once and keep nothing of its Spans (the
	// store).
	Packed bool
}

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.OpenWindow < o.Window {
		o.OpenWindow = 30 * o.Window
	}
	if o.MaxOpenTraces <= 0 {
		o.MaxOpenTraces = DefaultMaxOpenTraces
	}
	if o.MaxSpans <= 0 {
		o.MaxSpans = DefaultMaxSpans
	}
	if o.MaxHeldEvents <= 0 {
		o.MaxHeldEvents = DefaultMaxHeldEvents
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Emit == nil {
		o.Emit = func(*Trace) {}
	}
	if o.Sources == 0 {
		o.Sources = AllSources
	}
	return o
}

// Stats count what an Assembler did.
type Stats struct {
	// Records counts the trace records taken (events, metadata, OERs,
	// span records).
	Records int64
	// Traces counts the traces emitted (parts count one each), Spans
	// their spans, Broken those marked broken.
	Traces, Spans, Broken int64
	// Untraced counts OperationExecutionRecords with traceId -1, which
	// ran outside any trace (Kieker counts them too).
	Untraced int64
	// Duplicates counts records dropped as copies of one already in their
	// trace: a Kieker event with the same orderIndex, an
	// OperationExecutionRecord with the same eoi, a span with the same
	// span id, each with the same content (a log replayed twice, a
	// message delivered twice). The same key with other content is a
	// conflict, listed in Trace.Broken.
	Duplicates int64
	// Evicted counts traces emitted early because of MaxOpenTraces,
	// Early those because of MaxHeldEvents, Parts the parts emitted
	// because of MaxSpans.
	Evicted, Early, Parts int64
	// Open is the number of traces being assembled now.
	Open int
}

// Assembler builds traces from records arriving in any order: Kieker
// trace events (TraceMetadata with parentTraceId/parentOrderId for thread
// hops, Before/After/AfterFailed, Split, Join and Call events),
// OperationExecutionRecords (eoi/ess, one traceId across processes) and
// span records (SpanType: parent span ids across services). A trace is
// complete Window after its last record; it is never rejected for being
// incomplete: what is wrong with it is listed in Trace.Broken and it is
// assembled as far as possible. Memory is bounded by MaxOpenTraces and
// MaxSpans.
//
// An Assembler is used by one goroutine.
type Assembler struct {
	opt   Options
	types TypeCache
	st    Stats

	fams    map[ID]*family
	threads map[int64]*thread // Kieker thread traces by traceId
	lru     family            // sentinel: most recently touched first
	clock   int64             // RecordClock: latest record time (ns)

	complete []*family // traces whose records said they are whole (FlagComplete)
	batchNow int64     // WallClock: the time AddBatch read for its records
	// pos is the input position of the records added now (SetPosition),
	// reach the least position at which a trace the records added since
	// the last Reach began (math.MaxUint64: none touched).
	pos, reach uint64
	// spansPer is the recent average of spans per trace from span
	// records (×16), the capacity a new trace's spans start with.
	spansPer int64

	// codec keeps the span records waiting for their traces compact.
	codec spanCodec
	trees treeScratch

	// recent holds the resources and scopes of recent traces, so that
	// the traces of a resource share one copy (made once, not per trace).
	recent recentOrigins
	// batchOrigin is the origin of the last span record of the batch
	// AddBatch adds.
	batchOrigin batchOrigin

	// Invocation identifiers (InvocationType): the Kieker trace each
	// invocation ran, and the tasks waiting for their parent's.
	invs    map[invKey]int64
	waiting map[invKey][]int64

	// syms numbers the strings of the Kieker events threads buffer
	// (kevents.go).
	syms *symtab
	// last is the thread of the last event (nil when its trace ended).
	last *thread
	// kept are the calls replayThreads kept open for the next part.
	kept []SpanID
	// freeEvs are event buffers of replayed threads, for the next
	// threads' events (kevents.go: evBuffers).
	freeEvs evBuffers
	// replay holds the events of the thread being replayed (thread.events).
	replay []kev
	// heldEvs counts the Kieker events buffered (every thread's evs);
	// shedAt is the trace shed looks at first (nil: the idlest).
	heldEvs int
	shedAt  *family
}

// NewAssembler returns an assembler.
func NewAssembler(o Options) *Assembler {
	a := &Assembler{opt: o.withDefaults(), fams: map[ID]*family{}, threads: map[int64]*thread{}, reach: math.MaxUint64}
	a.lru.prev, a.lru.next = &a.lru, &a.lru
	return a
}

// family is one trace being assembled: Kieker thread traces linked by
// their metadata, OperationExecutionRecords, span records.
type family struct {
	id         ID
	prev, next *family
	touched    int64  // clock value at the last record (ns)
	born       uint64 // input position of its first record (SetPosition; see OldestOpen)
	size       int    // events, executions and spans held
	limit      int    // the bound that cut the last part (0: none yet)

	threads []*thread
	oers    []oer
	// spans: span records decoded before they were due (a merge).
	spans []Span
	// The span records waiting, as bytes (pending.go): pending of them
	// in buf, with nattrs attributes, whose strings refer to dict;
	// inline of buf's bytes are strings written inline.
	buf     []byte
	pending int
	nattrs  int
	inline  int
	dict    *spanDict
	part    int
	broken  []string
	// complete: a span record said the trace is whole (FlagComplete).
	complete bool
	// resources and scopes: the distinct ones of the spans held, which
	// point at them (the trace's tables).
	resources []*Resource
	scopes    []*Scope
	// open counts the calls begun and not yet returned (Before minus
	// After events seen): a trace with open calls waits OpenWindow, not
	// Window, for more records (a long-running call is not an idle trace).
	open int
	// awaiting counts its threads whose metadata came and no event yet
	// (meta and not evented). Kieker writes a trace's TraceMetadata just
	// before its first event, so such a trace has begun and waits
	// OpenWindow too: a transport that holds the events up for longer
	// than Window (a cluster's publisher waiting out a JetStream leader
	// election) must not part the metadata from them. (Apart from open,
	// which a repeated After takes below its true count.)
	awaiting int
}

// thread is one Kieker thread trace (one TraceMetadata's traceId).
type thread struct {
	kid  int64
	fam  *family
	meta bool
	// evented: an event of this trace arrived (in this part or an
	// earlier one). A trace with neither metadata, events nor an
	// invocation identifier is only named as another's parent.
	evented bool
	parent  int64 // parentTraceId (its own id or -1: a root)
	porder  int32 // parentOrderId
	tid     string
	host    string
	sess    string
	evs     []kevc   // buffered events (kevents.go)
	extras  []kextra // what some of them have beyond a kev
	wides   []int64  // times of buffered events far from the one before
	firstTS int64    // the time of the first event buffered
	lastTS  int64    // the time of the last event buffered
	// shuffled: an event came out of orderIndex order (one other than
	// next + the events buffered) since the last replay.
	shuffled bool
	syms     *symtab // the table of evs' strings

	// Invocation identifiers: this trace's invocation, the parent
	// invocation it waits for, and whether one names its parent (then
	// parent and porder are the invocation's, not the metadata's).
	inv, waitFor    invKey
	hasInv, waiting bool
	byInv           bool

	// Replay state, kept across parts.
	next     int32 // the orderIndex expected next
	stack    []int32
	assumed  []int32 // calls into uninstrumented code, innermost last
	spans    []Span  // calls of this thread, open and closed, not yet emitted
	attached bool    // the thread's roots have been hung under the parent
	maxTS    int64
}

// oer is one OperationExecutionRecord.
type oer struct {
	eoi, ess         int32
	tin, tout        int64
	op, host, sess   string
	loggingTimestamp int64
}

// Stats returns the counts so far.
func (a *Assembler) Stats() Stats {
	s := a.st
	s.Open = len(a.fams)
	return s
}

// SetPosition sets the input position of the records added from now on
// (a cluster's partition owner: the stream sequence of the message they
// came in; positions never decrease). A trace begun by them remembers it
// (OldestOpen, Reach). Positions are the caller's count, not a clock, so
// a clock stepped back or forward changes nothing. Without SetPosition
// every position is 0.
func (a *Assembler) SetPosition(pos uint64) { a.pos = pos }

// OldestOpen returns the least input position (SetPosition) at which a
// trace still held began (its first record was added; a part already
// emitted does not make it younger, and traces linked into one take the
// earlier of their positions), and false when none is held. Every record
// added before that position is in a trace already emitted. It walks the
// open traces.
func (a *Assembler) OldestOpen() (uint64, bool) {
	var oldest uint64
	ok := false
	for _, f := range a.fams {
		if !ok || f.born < oldest {
			oldest, ok = f.born, true
		}
	}
	return oldest, ok
}

// Reach returns the least input position (SetPosition) at which a trace
// touched by the records added since the last call began, and resets it;
// math.MaxUint64 when no trace was touched. A record that joins a trace
// begun earlier — a thread's events, a child thread's TraceMetadata or an
// invocation identifier linking it to its parent — reaches back to that
// trace's first position: input cut between the two positions would give
// a reader starting at the cut part of a trace without the rest (a
// cluster's partition owner checkpoints only where nothing reaches
// across, internal/cluster).
func (a *Assembler) Reach() uint64 {
	r := a.reach
	a.reach = math.MaxUint64
	return r
}

// AddBatch adds every record of b; origin supplies the host of records
// that do not name one.
func (a *Assembler) AddBatch(b *record.Batch) {
	if a.opt.Clock == WallClock {
		a.batchNow = a.opt.Now().UnixNano() // one clock reading per batch
		defer func() { a.batchNow = 0 }()
	}
	a.batchOrigin = batchOrigin{on: true}
	for i := range b.Records {
		a.Add(&b.Records[i], &b.Origin)
	}
	a.batchOrigin = batchOrigin{} // the batch's lists are reused after it
	a.finishComplete()
	a.limit()
}

// finishComplete emits the traces whose records said they are whole.
func (a *Assembler) finishComplete() {
	for _, f := range a.complete {
		if a.fams[f.id] == f {
			a.finish(f, true)
		}
	}
	clear(a.complete)
	a.complete = a.complete[:0]
}

// Add adds one record (the assembler keeps what it needs; strings are
// shared). Records that are not part of a trace are ignored.
func (a *Assembler) Add(r *record.Record, origin *record.Origin) {
	if r.Type == nil {
		return
	}
	ti := a.types.Get(r.Type)
	src := a.opt.Sources
	switch ti.Role {
	case RoleMeta:
		if src.Has(FromEvents) {
			a.meta(r, ti)
		}
	case RoleBefore, RoleAfter, RoleEvent:
		if src.Has(FromEvents) {
			a.event(r, ti)
		}
	case RoleOER:
		if src.Has(FromExecution) {
			a.oer(r, ti, origin)
		}
	case RoleInvocation:
		if src.Has(FromEvents) {
			a.invocation(r)
		}
	default:
		if ti.Span && src.Has(FromSpan) {
			a.span(r, origin)
		}
	}
}

func (a *Assembler) now(recordTime int64) int64 {
	if a.opt.Clock == WallClock {
		if a.batchNow != 0 {
			return a.batchNow
		}
		return a.opt.Now().UnixNano()
	}
	if recordTime > a.clock {
		a.clock = recordTime
	}
	return a.clock
}

// family returns the open trace id (creating it) and marks it touched.
func (a *Assembler) family(id ID, recordTime int64) *family {
	f := a.fams[id]
	if f == nil {
		f = &family{id: id}
		a.fams[id] = f
		f.prev, f.next = f, f // (unlinked)
		f.born = a.pos
		a.touch(f, recordTime)
		return f
	}
	a.touch(f, recordTime)
	return f
}

// touch marks f touched: the most recent in the LRU list.
func (a *Assembler) touch(f *family, recordTime int64) {
	f.touched = a.now(recordTime)
	a.reach = min(a.reach, f.born)
	if a.lru.next == f {
		return
	}
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = &a.lru, a.lru.next
	a.lru.next.prev = f
	a.lru.next = f
}

// thread returns Kieker thread trace kid, creating it (and its own
// trace) when new.
func (a *Assembler) thread(kid int64, recordTime int64) *thread {
	if th := a.last; th != nil && th.kid == kid {
		// (Events come in runs of one thread.)
		a.touch(th.fam, recordTime)
		return th
	}
	th := a.threads[kid]
	if th == nil {
		th = &thread{kid: kid, parent: -1, porder: -1, next: 0, syms: a.symbols()}
		th.fam = a.family(KiekerID(kid), recordTime)
		th.fam.threads = append(th.fam.threads, th)
		a.threads[kid] = th
	} else {
		a.touch(th.fam, recordTime)
	}
	a.last = th
	return th
}

func (a *Assembler) meta(r *record.Record, ti *TypeInfo) {
	a.st.Records++
	v := r.Values
	kid := v[ti.TraceID].Int()
	th := a.thread(kid, 0)
	if !th.meta && !th.evented {
		th.fam.awaiting++
	}
	th.meta = true
	if parent := v[ti.ParentTraceID].Int(); !th.byInv || parent != -1 && parent != kid {
		// (An invocation identifier's parent stands where the metadata
		// names none.)
		th.parent = parent
		th.porder = int32(v[ti.ParentOrderID].Int())
	}
	if ti.ThreadID >= 0 {
		th.tid = strconv.FormatInt(v[ti.ThreadID].Int(), 10)
	}
	if ti.Host >= 0 {
		th.host = v[ti.Host].Str()
	}
	if ti.Session >= 0 {
		th.sess = v[ti.Session].Str()
	}
	if th.parent == kid || th.parent == -1 {
		return
	}
	// A thread (or sub-trace) of another trace: one tree with it.
	pt := a.thread(th.parent, 0)
	a.merge(pt.fam, th.fam)
}

// merge moves trace src into dst (src's records belong to dst's trace).
func (a *Assembler) merge(dst, src *family) {
	if dst == src {
		return
	}
	for _, th := range src.threads {
		th.fam = dst
	}
	// Pending spans refer to their own trace's dictionary and tables:
	// both traces' are decoded first, in the order they came.
	dst.spans = a.pendingSpans(dst, dst.spans)
	dst.dict = nil
	src.spans = a.pendingSpans(src, src.spans)
	dst.threads = append(dst.threads, src.threads...)
	dst.oers = append(dst.oers, src.oers...)
	dst.spans = append(dst.spans, src.spans...)
	dst.resources = append(dst.resources, src.resources...)
	dst.scopes = append(dst.scopes, src.scopes...)
	dst.broken = append(dst.broken, src.broken...)
	dst.size += src.size
	dst.open += src.open
	dst.awaiting += src.awaiting
	if src.touched > dst.touched {
		dst.touched = src.touched
	}
	dst.born = min(dst.born, src.born)
	a.reach = min(a.reach, dst.born) // (src may not have been touched now)
	src.prev.next, src.next.prev = src.next, src.prev
	delete(a.fams, src.id)
}

// strField returns field i of v, "" when the type has no such field
// (i < 0).
func strField(v []record.Value, i int) string {
	if i < 0 {
		return ""
	}
	return v[i].Str()
}

// intField returns field i of v, 0 when the type has no such field
// (i < 0).
func intField(v []record.Value, i int) int64 {
	if i < 0 {
		return 0
	}
	return v[i].Int()
}

func (a *Assembler) event(r *record.Record, ti *TypeInfo) {
	a.st.Records++
	v := r.Values
	ts := intField(v, ti.Timestamp)
	th := a.thread(v[ti.TraceID].Int(), ts)
	sy := th.syms
	e := kev{order: int32(v[ti.OrderIndex].Int()), role: ti.Role, ts: ts, sig: sy.sig(sy.id(strField(v, ti.Op)), sy.id(strField(v, ti.Class)))}
	if ti.Failed {
		e.flags |= kevFailed
	}
	if ti.Split {
		e.flags |= kevSplit
	}
	if ti.Join {
		e.flags |= kevJoin
	}
	if ti.Cause >= 0 || ti.CalleeOp >= 0 {
		var x kextra
		if ti.Cause >= 0 {
			x.cause = sy.id(v[ti.Cause].Str())
		}
		if ti.CalleeOp >= 0 {
			x.cop, x.cclas = sy.id(v[ti.CalleeOp].Str()), sy.id(strField(v, ti.CalleeClass))
		}
		if x != (kextra{}) {
			th.extras = append(th.extras, x)
			e.extra = uint32(len(th.extras))
		}
	}
	if th.meta && !th.evented {
		th.fam.awaiting--
	}
	th.evented = true
	th.push(e, &a.freeEvs)
	a.heldEvs++
	th.fam.size++
	switch e.role {
	case RoleBefore:
		th.fam.open++
	case RoleAfter:
		th.fam.open--
	}
	if limit := min(a.opt.MaxSpans, maxEventPart); th.fam.size >= limit {
		a.part(th.fam, limit)
	}
}

// maxEventPart bounds the Kieker events a trace holds before a part is
// cut, whatever Options.MaxSpans says when it says more: 65,536 events
// are at most 32,768 calls, about 25 MB of Spans while the part is built
// and stored, where MaxSpans' 200,000 made 100,000 calls (70 MB), and a
// trace of ten million events would keep several such parts in the
// sinks' queues at once.
const maxEventPart = 1 << 16

func (a *Assembler) oer(r *record.Record, ti *TypeInfo, origin *record.Origin) {
	v := r.Values
	kid := v[ti.TraceID].Int()
	if kid == -1 {
		a.st.Untraced++
		return
	}
	a.st.Records++
	o := oer{
		eoi: int32(v[ti.EOI].Int()), ess: int32(v[ti.ESS].Int()), op: v[ti.Op].Str(), loggingTimestamp: r.LoggingTimestamp,
		tin: intField(v, ti.Tin), tout: intField(v, ti.Tout), host: strField(v, ti.Host), sess: strField(v, ti.Session),
	}
	if o.host == "" && origin != nil {
		o.host = origin.Host
	}
	var f *family
	if th := a.threads[kid]; th != nil {
		f = a.family(th.fam.id, o.tout)
	} else {
		f = a.family(KiekerID(kid), o.tout)
	}
	f.oers = append(f.oers, o)
	f.size++
	if f.size >= a.opt.MaxSpans {
		a.part(f, a.opt.MaxSpans)
	}
}

func (a *Assembler) span(r *record.Record, origin *record.Origin) {
	if r.Type != SpanType && (r.Type.Name != SpanTypeName || !r.Type.SameFields(SpanType)) || len(r.Values) != spanFields {
		return
	}
	a.st.Records++
	f := a.addSpan(r, origin)
	f.size++
	if IsComplete(r) && !f.complete {
		f.complete = true
		a.complete = append(a.complete, f)
	}
	if f.size >= a.opt.MaxSpans {
		a.part(f, a.opt.MaxSpans)
	}
}

// maxTableScan bounds the entries of a trace's table compared with a
// span's resource or scope (a trace of more distinct resources than that
// may hold one twice: its tables stay correct, only larger).
const maxTableScan = 16

// origin returns the entries of f's tables for o, adding them when new:
// the spans of one resource (or scope) share one copy of it, taken from
// the recent ones when another trace had it. The tables are short (a
// trace touches a few services), so they are searched in order, the last
// entry, the most likely, first.
func (f *family) origin(o *origin, recent *recentOrigins) (*Resource, *Scope) {
	var res *Resource
	if len(o.res) > 0 {
		for i := len(f.resources) - 1; i >= max(len(f.resources)-maxTableScan, 0); i-- {
			if o.resourceIs(f.resources[i]) {
				res = f.resources[i]
				break
			}
		}
		if res == nil {
			res = recent.resource(o)
			f.resources = append(f.resources, res)
		}
	}
	var sc *Scope
	if o.hasScope {
		for i := len(f.scopes) - 1; i >= max(len(f.scopes)-maxTableScan, 0); i-- {
			if o.scopeIs(f.scopes[i]) {
				sc = f.scopes[i]
				break
			}
		}
		if sc == nil {
			sc = recent.scope(o)
			f.scopes = append(f.scopes, sc)
		}
	}
	return res, sc
}

// recentOrigins holds the resources and scopes made lately, in tables
// of sets of entries chosen by a hash of their content: a bridge
// receives from a bounded set of processes, whose resources recur in
// every trace, so the traces of one process share one Resource (and the
// store's filter hashes its pairs once a block). A site of more
// processes than a table holds shares less, never wrongly: an entry is
// used only when its content is the origin's.
type recentOrigins struct {
	res    *originTable[Resource]
	scopes *originTable[Scope]
}

// An originTable holds originSets × originWays entries (136 KiB; the
// entries themselves a few hundred bytes each), the oldest of a set
// replaced first.
type originTable[T any] struct {
	sets [originSets]struct {
		ways [originWays]originEntry[T]
		next uint8
	}
}

type originEntry[T any] struct {
	h uint64
	v *T
}

const (
	originSets = 1 << 10
	originWays = 8
)

// find returns the entry of hash h for which is(entry), making one with
// newT when there is none.
func (t *originTable[T]) find(h uint64, is func(*T) bool, newT func() *T) *T {
	set := &t.sets[h%originSets]
	for i := range set.ways {
		if e := &set.ways[i]; e.v != nil && e.h == h && is(e.v) {
			return e.v
		}
	}
	v := newT()
	set.ways[set.next] = originEntry[T]{h, v}
	set.next = (set.next + 1) % originWays
	return v
}

// resource returns the recent resource o has, making it when none.
func (c *recentOrigins) resource(o *origin) *Resource {
	if c.res == nil {
		c.res = new(originTable[Resource])
	}
	return c.res.find(itemsHash(0, o.res, o.resTypes), o.resourceIs, o.resource)
}

// scope returns the recent scope o has, making it when none.
func (c *recentOrigins) scope(o *origin) *Scope {
	if c.scopes == nil {
		c.scopes = new(originTable[Scope])
	}
	h := maphash.String(dictSeed, o.scopeName) ^ maphash.String(dictSeed, o.scopeVersion)*prime64
	return c.scopes.find(itemsHash(h, o.scope, o.scopeTypes), o.scopeIs, o.scopeCopy)
}

// prime64 mixes the hashes itemsHash combines.
const prime64 = 0x9e3779b97f4a7c15

// itemsHash returns h combined with the hash of key/value items and
// their types (what itemsEqual compares).
func itemsHash(h uint64, kv, ts []record.Value) uint64 {
	for i := 0; i+1 < len(kv); i += 2 {
		h = (h^maphash.String(dictSeed, kv[i].Str()))*prime64 ^ maphash.String(dictSeed, kv[i+1].Str())
		h = (h ^ uint64(pairType(ts, i/2))) * prime64
	}
	return h ^ h>>29
}

// limit emits the traces idle longest while more than MaxOpenTraces are
// open.
func (a *Assembler) limit() {
	for len(a.fams) > a.opt.MaxOpenTraces {
		a.st.Evicted++
		a.finish(a.lru.prev, true)
	}
	if a.heldEvs > a.opt.MaxHeldEvents {
		a.shed()
	}
}

// shed completes the traces idle longest (for at least an eighth of
// Window) that look whole (wholeEvents) until the events held are a
// 64th below MaxHeldEvents. It looks at shedScan traces at most a call,
// going on the next call where it stopped (traces with calls still open
// or events missing wait for their window, and would otherwise stop it
// for good once there are shedScan of them).
func (a *Assembler) shed() {
	target := a.opt.MaxHeldEvents - a.opt.MaxHeldEvents/64
	now := a.now(0)
	idle := int64(a.opt.Window) / 8
	f := a.lru.prev
	if c := a.shedAt; c != nil && a.fams[c.id] == c {
		f = c
	}
	for seen := 0; f != &a.lru && a.heldEvs > target && seen < shedScan; seen++ {
		if now-f.touched < idle {
			// (The list is in the order traces were touched: the others
			// are more recent still.)
			f = &a.lru
			break
		}
		prev := f.prev
		if wholeEvents(f) {
			a.st.Early++
			a.finish(f, true)
		}
		f = prev
	}
	a.shedAt = nil
	if f != &a.lru {
		a.shedAt = f
	}
}

// shedScan bounds the traces shed looks at a call.
const shedScan = 256

// wholeEvents reports whether f is a trace of Kieker events only whose
// threads all look whole: each had events (a thread only named as
// another's parent has none), waits for no invocation and had its events
// in orderIndex order from 0 (none missing, none twice), and no call is
// open.
func wholeEvents(f *family) bool {
	if f.open != 0 || f.awaiting != 0 || len(f.threads) == 0 || f.pending > 0 || len(f.spans) > 0 || len(f.oers) > 0 {
		return false
	}
	for _, th := range f.threads {
		if !th.evented || th.waiting || th.shuffled {
			return false
		}
	}
	return true
}

// Tick emits the traces idle for Window. A bridge calls it periodically;
// with RecordClock the records' time decides.
func (a *Assembler) Tick() { a.TickBudget(math.MaxInt) }

// TickBudget is Tick emitting traces of about budget spans at most, the
// oldest first (none when budget ≤ 0): the others wait, compact, for a
// later call. A bridge whose trace consumers are behind so does not make
// more traces than they take (a waiting span costs a fraction of an
// assembled one).
func (a *Assembler) TickBudget(budget int) {
	a.finishComplete()
	a.limit()
	now := a.clock
	if a.opt.Clock == WallClock {
		now = a.opt.Now().UnixNano()
	}
	w, ow := int64(a.opt.Window), int64(a.opt.OpenWindow)
	// Oldest first; a trace with open calls waits longer and is passed
	// over (the scan stops at the first trace within the plain window).
	for f := a.lru.prev; f != &a.lru && now-f.touched >= w && budget > 0; {
		prev := f.prev
		if f.open <= 0 && f.awaiting == 0 || now-f.touched >= ow {
			budget -= max(f.size, 1)
			a.finish(f, true)
		}
		f = prev
	}
}

// Flush emits every trace (the end of the input).
func (a *Assembler) Flush() {
	a.finishComplete()
	for f := a.lru.prev; f != &a.lru; f = a.lru.prev {
		a.finish(f, true)
	}
}

// part emits what a trace over limit (MaxSpans, or maxEventPart) holds
// so far, as one part; the trace goes on (its open calls stay open).
func (a *Assembler) part(f *family, limit int) {
	a.st.Parts++
	f.part++
	f.limit = limit
	f.broken = append(f.broken, fmt.Sprintf("part %d of a trace with more than %d spans (emitted in parts to bound memory)", f.part, limit))
	a.finish(f, false)
}

// finish assembles f and emits it; final ends the trace (open calls are
// closed and reported), otherwise f keeps its open calls for the next
// part.
func (a *Assembler) finish(f *family, final bool) {
	t := &Trace{ID: f.id, Broken: f.broken, Part: f.part}
	if final && f.part > 0 {
		t.Part = f.part + 1
		t.Broken = append(t.Broken, fmt.Sprintf("last part (%d) of a trace with more than %d spans", f.part+1, f.limit))
	}
	if n := int64(len(f.spans) + f.pending); n > 0 {
		a.spansPer += n - a.spansPer/16 // an exponential average over ~16 traces, ×16
	}
	t.Resources, t.Scopes = f.resources, f.scopes
	if a.opt.Packed && f.pending > 0 && len(f.spans) == 0 && len(f.threads) == 0 && len(f.oers) == 0 && a.pack(f, t) {
		// Span records only, each id once: their bytes are the trace's.
		f.buf, f.pending, f.nattrs, f.inline = nil, 0, 0, 0
	} else {
		spans := a.pendingSpans(f, f.spans)
		records := len(spans) > 0 // span records (not Kieker events or OERs)
		calls := a.replayThreads(f, final, &t.Broken)
		if !records && len(f.oers) == 0 {
			// Kieker event traces: the calls as replayThreads made them (no
			// copy), mostly in tree order already.
			spans = calls
		} else {
			spans = append(spans, calls...)
			spans = append(spans, executions(f.id, f.oers, &t.Broken, &a.st.Duplicates)...)
		}
		t.Spans = spans
		if records || len(f.oers) > 0 || !treeOrdered(t, a.kept) {
			a.st.Duplicates += int64(a.trees.tree(t))
		}
	}
	a.st.Traces++
	a.st.Spans += int64(t.SpanCount())
	if len(t.Broken) > 0 {
		a.st.Broken++
	}
	// Reset what was emitted.
	f.spans, f.oers, f.broken, f.size, f.dict = nil, nil, nil, 0, nil
	f.resources, f.scopes = nil, nil
	if final {
		f.prev.next, f.next.prev = f.next, f.prev
		delete(a.fams, f.id)
		for _, th := range f.threads {
			if a.threads[th.kid] == th {
				delete(a.threads, th.kid)
			}
			if a.last == th {
				a.last = nil
			}
			a.forget(th, &t.Broken)
		}
	} else {
		for _, th := range f.threads {
			f.size += len(th.stack)
		}
	}
	a.opt.Emit(t)
}

// Kieker thread traces ------------------------------------------------

// kiekerSpanID derives a call's span id from its thread trace and the
// Before event's orderIndex (SplitMix64's finaliser of both).
func kiekerSpanID(kid int64, order int32) SpanID {
	x := Mix(uint64(kid)*0x9e3779b97f4a7c15 ^ uint64(uint32(order)) ^ 0x6a09e667f3bcc909)
	if x == 0 {
		x = 1
	}
	return SpanID(x)
}

// replayThreads turns the buffered events of f's threads into calls,
// parents first so that a child thread's roots hang under the call open
// at its split point. It returns the calls to emit.
func (a *Assembler) replayThreads(f *family, final bool, broken *[]string) []Span {
	a.kept = a.kept[:0]
	if len(f.threads) == 0 {
		return nil
	}
	var byKid map[int64]*thread
	order := f.threads
	if len(f.threads) > 1 {
		byKid = make(map[int64]*thread, len(f.threads))
		for _, th := range f.threads {
			byKid[th.kid] = th
		}
		// Parents before children.
		done := map[int64]bool{}
		order = make([]*thread, 0, len(f.threads))
		var visit func(th *thread, depth int)
		visit = func(th *thread, depth int) {
			if done[th.kid] || depth > len(f.threads) {
				return
			}
			done[th.kid] = true
			if p := byKid[th.parent]; p != nil && p != th {
				visit(p, depth+1)
			}
			order = append(order, th)
		}
		for _, th := range f.threads {
			visit(th, 0)
		}
	}
	var out []Span
	for _, th := range order {
		evs := th.evs
		a.heldEvs -= len(evs)
		a.replay = th.events(a.replay)
		a.st.Duplicates += int64(th.replay(a.replay, broken))
		a.freeEvs.put(evs, len(evs))
		if cap(a.replay) > evBufferMax {
			a.replay = nil // (a huge thread's)
		}
		th.syms = a.symbols() // (nothing buffered refers to the old one)
		a.attach(th, byKid, broken)
	}
	for _, th := range order {
		// The calls that stay open (a part is emitted, the trace goes
		// on) move to a slice of their own; the others are handed on in
		// th.spans' array (compacted in place), copied only when another
		// thread's calls came first.
		var keep []Span
		if !final && len(th.stack) > 0 {
			keep = make([]Span, 0, len(th.stack))
		}
		closed := th.spans[:0]
		next := 0 // the next entry of th.stack (its indexes rise)
		for i := range th.spans {
			s := &th.spans[i]
			if next < len(th.stack) && th.stack[next] == int32(i) {
				next++
				if !final {
					keep = append(keep, *s)
					a.kept = append(a.kept, s.SpanID)
					continue
				}
				s.End = max(th.maxTS, s.Start)
				s.Error = true
				*broken = append(*broken, fmt.Sprintf("call %s (orderIndex %d of trace %d) never returned", s.Operation, s.OrderIndex, th.kid))
			}
			closed = append(closed, *s)
		}
		clear(th.spans[len(closed):]) // (what moved to keep)
		if len(out) == 0 {
			out = closed
		} else {
			out = append(out, closed...)
		}
		if final {
			th.spans, th.stack, th.assumed = nil, nil, nil
			a.forgetThread(th, out, broken)
			continue
		}
		// Open calls stay, renumbered (the stack lists them in order).
		th.spans = keep
		th.assumed = th.assumed[:0]
		for i := range th.stack {
			th.stack[i] = int32(i)
		}
	}
	return out
}

// forgetThread reports, when th's trace ends, a thread of which only its
// name came (as another's parent) or that had no metadata; out is what
// the trace's threads gave so far.
func (a *Assembler) forgetThread(th *thread, out []Span, broken *[]string) {
	if !th.meta && !th.evented && !th.hasInv {
		// Named as a parent (parentTraceId) by a thread of this
		// trace, and nothing of it came within the window.
		*broken = append(*broken, fmt.Sprintf("parent trace %d never arrived", th.kid))
	} else if !th.meta && len(th.evs) == 0 && len(out) > 0 {
		*broken = append(*broken, fmt.Sprintf("no TraceMetadata for trace %d", th.kid))
	}
}

// replay consumes evs, the thread's buffered events (thread.events), in
// orderIndex order. It returns the number of events dropped as
// duplicates: an event equal to an earlier one with its orderIndex
// (another with the same orderIndex is a conflict, reported in broken).
func (th *thread) replay(evs []kev, broken *[]string) (dups int) {
	extras := th.extras
	th.extras = nil
	sortEvents(evs)
	// Room for the calls at once (about half the events begin one): a
	// part's calls appended to the few a previous part left open would
	// otherwise grow the slice by doubling, copying and clearing spans
	// of 600 bytes each time.
	th.spans = slices.Grow(th.spans, len(evs)/2+1)
	seen := -1
	run := 0 // the first event of evs with orderIndex seen
	for i := range evs {
		ev := th.syms.expand(&evs[i], extras)
		e := &ev
		if e.ts > th.maxTS {
			th.maxTS = e.ts
		}
		if int(e.order) != seen {
			run = i
		} else if slices.ContainsFunc(evs[run:i], func(x kev) bool { return th.syms.expand(&x, extras) == *e }) {
			dups++
			continue
		}
		switch {
		case int(e.order) == seen:
			*broken = append(*broken, fmt.Sprintf("orderIndex %d of trace %d used twice", e.order, th.kid))
		case e.order < th.next:
			*broken = append(*broken, fmt.Sprintf("event orderIndex %d of trace %d arrived after its part was emitted", e.order, th.kid))
			continue
		case e.order > th.next:
			*broken = append(*broken, fmt.Sprintf("orderIndex %d to %d of trace %d missing", th.next, e.order-1, th.kid))
		}
		seen = int(e.order)
		th.next = e.order + 1
		if e.role == RoleBefore || e.role == RoleAfter {
			th.assumed = th.assumed[:0]
		}
		switch e.role {
		case RoleBefore:
			s := Span{
				SpanID:    kiekerSpanID(th.kid, e.order),
				Parent:    -1,
				Operation: th.name(e.op), Component: th.name(e.class),
				Host: th.host, Thread: th.tid, Session: th.sess,
				Start: e.ts, End: e.ts,
				OrderIndex: e.order, EOI: -1, ESS: -1, KiekerTrace: th.kid,
				Kind: KindInternal, Source: FromEvents,
			}
			if e.class == 0 {
				s.Component = componentOf(s.Operation)
			}
			if n := len(th.stack); n > 0 {
				s.ParentID = th.spans[th.stack[n-1]].SpanID
			}
			th.spans = append(th.spans, s)
			th.stack = append(th.stack, int32(len(th.spans)-1))
		case RoleAfter:
			n := len(th.stack)
			if n == 0 {
				*broken = append(*broken, fmt.Sprintf("%s at orderIndex %d of trace %d returns from no open call", th.name(e.op), e.order, th.kid))
				continue
			}
			s := &th.spans[th.stack[n-1]]
			th.stack = th.stack[:n-1]
			if op, class := th.name(e.op), th.name(e.class); s.Operation != op || class != "" && s.Component != class {
				*broken = append(*broken, fmt.Sprintf("return from %s (class %s) at orderIndex %d of trace %d, but %s (class %s, orderIndex %d) is the open call", op, class, e.order, th.kid, s.Operation, s.Component, s.OrderIndex))
			}
			s.End = e.ts
			if e.failed {
				cause := th.name(e.cause)
				s.Error = true
				s.Status = StatusError
				s.StatusMessage = cause
				s.Events = append(s.Events, Event{Name: "exception", Time: e.ts, Attributes: []Attr{{Key: "exception.type", Value: cause, Type: TypeString}}})
			}
			s.afterOrder = e.order
		default:
			if e.cop != 0 && !th.calledNext(evs[i+1:], e) {
				// A call into code that is not instrumented: a call of
				// no duration under the open call. (When the callee is
				// instrumented, its Before follows and is the call.)
				s := Span{
					SpanID:    kiekerSpanID(th.kid, e.order),
					Parent:    -1,
					Operation: th.name(e.cop), Component: th.name(e.cclas),
					Host: th.host, Thread: th.tid, Session: th.sess,
					Start: e.ts, End: e.ts,
					OrderIndex: e.order, EOI: -1, ESS: -1, KiekerTrace: th.kid,
					Kind: KindInternal, Source: FromEvents,
					Attributes: []Attr{{Key: "kieker.caller.operation", Value: th.name(e.op), Type: TypeString}, {Key: "kieker.caller.class", Value: th.name(e.class), Type: TypeString}},
					afterOrder: e.order,
				}
				if s.Component == "" {
					s.Component = componentOf(s.Operation)
				}
				// The caller is the innermost assumed call of the caller's
				// operation (Kieker's assumed executions nest), else the
				// open call.
				for len(th.assumed) > 0 && th.spans[th.assumed[len(th.assumed)-1]].Operation != th.name(e.op) {
					th.assumed = th.assumed[:len(th.assumed)-1]
				}
				switch {
				case len(th.assumed) > 0:
					s.ParentID = th.spans[th.assumed[len(th.assumed)-1]].SpanID
				case len(th.stack) > 0:
					s.ParentID = th.spans[th.stack[len(th.stack)-1]].SpanID
				}
				th.spans = append(th.spans, s)
				th.assumed = append(th.assumed, int32(len(th.spans)-1))
				continue
			}
			n := len(th.stack)
			if n == 0 {
				continue
			}
			s := &th.spans[th.stack[n-1]]
			ev := Event{Time: e.ts, Attributes: []Attr{{Key: "kieker.orderIndex", Value: strconv.Itoa(int(e.order)), Type: TypeInt}}}
			switch {
			case e.split:
				ev.Name = "split"
			case e.join:
				ev.Name = "join"
			case e.cop != 0:
				ev.Name = "call"
				ev.Attributes = append(ev.Attributes, Attr{Key: "callee.operation", Value: th.name(e.cop), Type: TypeString}, Attr{Key: "callee.class", Value: th.name(e.cclas), Type: TypeString})
			default:
				ev.Name = th.name(e.op)
			}
			s.Events = append(s.Events, ev)
		}
	}
	return dups
}

// calledNext reports whether the event after call event e is the Before
// of its callee.
func (th *thread) calledNext(rest []kev, e *kevent) bool {
	return len(rest) > 0 && rest[0].role == RoleBefore && rest[0].order == e.order+1 && th.syms.sigs[rest[0].sig][0] == e.cop
}

// attach hangs the roots of a child thread under the parent's call that
// was open at the split point (parentOrderId), or, when the split point is
// unknown, under the innermost parent call whose time contains the child's
// start. byKid holds the trace's threads (nil: th is its only one).
func (a *Assembler) attach(th *thread, byKid map[int64]*thread, broken *[]string) {
	if th.attached || th.parent == -1 || th.parent == th.kid || !th.meta && !th.byInv {
		return
	}
	var roots []int
	for i := range th.spans {
		if th.spans[i].ParentID == 0 {
			roots = append(roots, i)
		}
	}
	if len(roots) == 0 {
		return
	}
	th.attached = true
	p := byKid[th.parent]
	if p == nil {
		*broken = append(*broken, fmt.Sprintf("trace %d names parent trace %d, which is missing", th.kid, th.parent))
		return
	}
	var parent *Span
	if th.porder >= 0 {
		// The innermost call of p open at the split point: Before before
		// it, After (if any) after it.
		for i := range p.spans {
			s := &p.spans[i]
			if s.OrderIndex >= th.porder {
				continue
			}
			if closedBefore(s, th.porder) {
				continue
			}
			if parent == nil || s.OrderIndex > parent.OrderIndex {
				parent = s
			}
		}
	} else {
		start := th.spans[roots[0]].Start
		for i := range p.spans {
			s := &p.spans[i]
			if s.Start <= start && (s.End >= start || s.End == s.Start) && (parent == nil || s.Start >= parent.Start) {
				parent = s
			}
		}
	}
	if parent == nil {
		// The thread was started while the parent had no call open (a
		// split at the trace's top level): its calls are roots of the
		// same trace, as Kieker has them.
		return
	}
	for _, i := range roots {
		th.spans[i].ParentID = parent.SpanID
	}
}

// closedBefore reports whether call s had returned before orderIndex o.
func closedBefore(s *Span, o int32) bool { return s.afterOrder > 0 && s.afterOrder < o }

// OperationExecutionRecords ------------------------------------------

// executions turns the OERs of a trace into calls: eoi orders them, ess
// gives the depth, so a call's caller is the last call one level up. An
// OER equal to an earlier one with its eoi (but for the logging timestamp,
// the time a copy was logged) is dropped and counted in dups.
func executions(id ID, oers []oer, broken *[]string, dups *int64) []Span {
	if len(oers) == 0 {
		return nil
	}
	sort.SliceStable(oers, func(i, j int) bool { return oers[i].eoi < oers[j].eoi })
	kept, run := 0, 0 // run: the first kept OER with the last kept eoi
	for i := range oers {
		o := oers[i]
		if kept > 0 && o.eoi == oers[kept-1].eoi {
			if slices.ContainsFunc(oers[run:kept], func(p oer) bool { return sameExecution(&p, &o) }) {
				*dups++
				continue
			}
		} else {
			run = kept
		}
		oers[kept] = o
		kept++
	}
	oers = oers[:kept]
	kid, _ := id.Kieker()
	out := make([]Span, 0, len(oers))
	var stack []int // index in out at each depth
	for i, o := range oers {
		if i > 0 && o.eoi == oers[i-1].eoi {
			*broken = append(*broken, fmt.Sprintf("eoi %d used twice", o.eoi))
		} else if int(o.eoi) != i && (i == 0 || o.eoi != oers[i-1].eoi+1) {
			*broken = append(*broken, fmt.Sprintf("eoi %d where %d was expected", o.eoi, i))
		}
		s := Span{
			SpanID:    kiekerSpanID(kid, o.eoi) ^ 0x5555555555555555,
			Parent:    -1,
			Operation: o.op, Component: componentOf(o.op),
			Host: o.host, Session: o.sess,
			Start: o.tin, End: o.tout,
			OrderIndex: -1, EOI: o.eoi, ESS: o.ess, KiekerTrace: kid,
			Kind: KindInternal, Source: FromExecution,
		}
		if s.SpanID == 0 {
			s.SpanID = 1
		}
		d := int(o.ess)
		switch {
		case d < 0:
			*broken = append(*broken, fmt.Sprintf("eoi %d has ess %d", o.eoi, o.ess))
			d = 0
		case d > len(stack):
			*broken = append(*broken, fmt.Sprintf("eoi %d has ess %d below no call at ess %d", o.eoi, o.ess, d-1))
			d = len(stack)
		}
		stack = stack[:d]
		if d > 0 {
			s.ParentID = out[stack[d-1]].SpanID
		}
		out = append(out, s)
		stack = append(stack, len(out)-1)
	}
	return out
}

// sameSpan reports whether a and b are one span: every field equal but
// those tree derives (Parent, Depth). TestSameSpanFields keeps it in step
// with Span.
func sameSpan(a, b *Span) bool {
	return a.SpanID == b.SpanID && a.ParentID == b.ParentID &&
		a.Operation == b.Operation && a.Component == b.Component &&
		a.Host == b.Host && a.Service == b.Service && a.Process == b.Process && a.Thread == b.Thread && a.Session == b.Session &&
		a.Start == b.Start && a.End == b.End && a.Kind == b.Kind && a.Status == b.Status &&
		a.Error == b.Error && a.StatusMessage == b.StatusMessage &&
		slices.Equal(a.Attributes, b.Attributes) &&
		slices.EqualFunc(a.Events, b.Events, func(x, y Event) bool {
			return x.Name == y.Name && x.Time == y.Time && slices.Equal(x.Attributes, y.Attributes)
		}) &&
		slices.EqualFunc(a.Links, b.Links, func(x, y Link) bool {
			return x.TraceID == y.TraceID && x.SpanID == y.SpanID && x.Kind == y.Kind && x.TraceState == y.TraceState && slices.Equal(x.Attributes, y.Attributes)
		}) &&
		a.OrderIndex == b.OrderIndex && a.EOI == b.EOI && a.ESS == b.ESS && a.KiekerTrace == b.KiekerTrace &&
		a.Source == b.Source && a.Resource.Equal(b.Resource) && a.Scope.Equal(b.Scope) && a.afterOrder == b.afterOrder
}

// sameExecution reports whether a and b are one execution (every field
// but the logging timestamp equal).
func sameExecution(a, b *oer) bool {
	x, y := *a, *b
	x.loggingTimestamp, y.loggingTimestamp = 0, 0
	return x == y
}
