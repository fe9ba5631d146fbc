package trace

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"
)

// Kieker events, held compactly --------------------------------------------
//
// A thread trace buffers its events until its trace completes (or a part
// is cut): events arrive in any order and a Call event is read with the
// one after it. A buffered event holds no pointers (its strings are
// numbers in a symbol table), so an open trace costs 16 bytes per event
// (kevc) and nothing to the garbage collector's marking; the calls
// (Spans) are built once, when the trace or part is emitted.

// kevc is a buffered event, 16 bytes: its time as the difference to the
// thread's event that arrived before it (the first: to thread.firstTS;
// kevWide: the index of its time in the thread's wides, for a
// difference beyond 2.1 s), its
// orderIndex, its (operation, class) pair (symtab.sig), and in one word
// 1 + the index of its kextra (the low kevExtraBits bits; 0: none), its
// role and its flags. A thread's events are at most maxEventPart (a part
// is cut then), far fewer than the extra bits number.
type kevc struct {
	dts   int32
	order int32
	sig   uint32
	x     uint32
}

const (
	kevExtraBits = 24
	kevRoleShift = kevExtraBits     // 3 bits of role
	kevFlagShift = kevExtraBits + 3 // kev.flags, then kevWide
	kevWide      = 1 << 3           // (a flag of kevc only)
)

// push buffers e, taking a buffer from free for the thread's first.
func (th *thread) push(e kev, free *evBuffers) {
	if cap(th.evs) == 0 {
		th.evs = free.take()
	}
	if len(th.evs) == 0 {
		th.firstTS, th.lastTS = e.ts, e.ts
	}
	flags := e.flags
	d := e.ts - th.lastTS
	if d != int64(int32(d)) {
		flags |= kevWide
		d = int64(len(th.wides))
		th.wides = append(th.wides, e.ts)
	}
	th.lastTS = e.ts
	if e.order != th.next+int32(len(th.evs)) {
		th.shuffled = true
	}
	th.evs = append(th.evs, kevc{dts: int32(d), order: e.order, sig: e.sig,
		x: e.extra | uint32(e.role)<<kevRoleShift | uint32(flags)<<kevFlagShift})
}

// events returns th's buffered events, in arrival order, as kevs in dst's
// memory (grown when short), and empties th's buffer (the events after
// it are in order again until one is not).
func (th *thread) events(dst []kev) []kev {
	dst = slices.Grow(dst[:0], len(th.evs))
	ts := th.firstTS
	for _, c := range th.evs {
		flags := uint8(c.x >> kevFlagShift)
		if flags&kevWide != 0 {
			ts = th.wides[c.dts]
		} else {
			ts += int64(c.dts)
		}
		dst = append(dst, kev{ts: ts, order: c.order, sig: c.sig, extra: c.x & (1<<kevExtraBits - 1),
			role: Role(c.x>>kevRoleShift) & 7, flags: flags &^ kevWide})
	}
	th.evs, th.wides, th.shuffled = nil, th.wides[:0], false
	return dst
}

// kev is one Kieker event of a thread trace as replay reads it (sorted
// by orderIndex), 24 bytes: its operation and class are one symbol of a
// pair (symtab.sig); what few events have (a failed call's cause, a Call
// event's callee) is in the thread's extras.
type kev struct {
	ts    int64
	order int32
	sig   uint32 // the (operation, class) pair
	extra uint32 // 1 + the index of the event's kextra in thread.extras (0: none)
	role  Role
	flags uint8 // kevFailed, kevSplit, kevJoin
}

// The flags of a kev.
const (
	kevFailed = 1 << iota
	kevSplit
	kevJoin
)

// evBuffers keeps the event buffers of replayed threads for new threads:
// a thread's buffer grows by doubling to its trace's size (48 KiB for a
// trace of 1,000 calls), and the garbage collector clears every new
// large one, so traces of the same shape reuse a few buffers instead.
// Bounded: at most evBuffersMax buffers, none above evBufferMax events.
// When none is kept, a new buffer starts at the typical size of the
// threads replayed before (the geometric mean of their events: traces of
// one shape get a buffer of their size at once, and a few huge traces do
// not make every small one large), at most evBufferStart events.
type evBuffers struct {
	free [][]kevc
	// log2x16 is the recent average of log2(events per replayed
	// thread) ×16 (an exponential average over ~16 threads).
	log2x16 int
}

const (
	evBuffersMax  = 16
	evBufferMax   = 1 << 14 // 256 KiB: 4 MiB kept at most
	evBufferStart = 1 << 12 // 64 KiB
)

// take returns an empty buffer.
func (b *evBuffers) take() []kevc {
	n := len(b.free)
	if n == 0 {
		if b.log2x16 < 16*4 {
			return nil // a few events: append's own growth
		}
		return make([]kevc, 0, min(1<<(b.log2x16/16), evBufferStart))
	}
	evs := b.free[n-1]
	b.free[n-1] = nil
	b.free = b.free[:n-1]
	return evs
}

// put keeps evs (read no more) for take, n of its events replayed.
func (b *evBuffers) put(evs []kevc, n int) {
	if n > 0 {
		b.log2x16 += bits.Len(uint(n)) - b.log2x16/16
	}
	if cap(evs) == 0 || cap(evs) > evBufferMax || len(b.free) >= evBuffersMax {
		return
	}
	b.free = append(b.free, evs[:0])
}

// kextra is what an event has beyond a kev: symbols of the cause of a
// failed call and of a Call event's callee.
type kextra struct{ cause, cop, cclas uint32 }

// kevent is a buffered event with every symbol, as replay reads it.
type kevent struct {
	order       int32
	role        Role
	failed      bool
	split, join bool
	ts          int64
	op, class   uint32
	cause       uint32
	cop, cclas  uint32 // CallOperationEvent's callee
}

// expand returns e with every symbol; extras are the thread's.
func (t *symtab) expand(e *kev, extras []kextra) kevent {
	sig := t.sigs[e.sig]
	x := kevent{order: e.order, role: e.role, failed: e.flags&kevFailed != 0, split: e.flags&kevSplit != 0, join: e.flags&kevJoin != 0,
		ts: e.ts, op: sig[0], class: sig[1]}
	if e.extra > 0 {
		ex := extras[e.extra-1]
		x.cause, x.cop, x.cclas = ex.cause, ex.cop, ex.cclas
	}
	return x
}

// maxSymbols bounds a symbol table: past it the assembler begins a new
// one for the threads that begin afterwards (a thread keeps its table
// until it has nothing buffered), so distinct strings without end (an
// operation name with an id in it) do not grow one table without end.
const maxSymbols = 1 << 18

// symtab numbers the strings of buffered events. Strings are interned per
// connection by the decoders, so the same string mostly comes with the
// same bytes: a small cache keyed by the string's address answers most
// lookups without hashing it.
type symtab struct {
	names []string // names[0] == ""
	ids   map[string]uint32
	cache [256]symCached

	// sigs are the (operation, class) pairs of events (sigs[0]: both
	// ""), sigIDs their numbers, sigCache the recent ones.
	sigs     [][2]uint32
	sigIDs   map[[2]uint32]uint32
	sigCache [256]sigCached
}

type sigCached struct{ op, class, id uint32 }

type symCached struct {
	s  string
	id uint32
}

func newSymtab() *symtab {
	return &symtab{names: []string{""}, ids: map[string]uint32{"": 0}, sigs: [][2]uint32{{}}, sigIDs: map[[2]uint32]uint32{{}: 0}}
}

// sig returns the number of the pair (op, class), adding it when new.
func (t *symtab) sig(op, class uint32) uint32 {
	slot := &t.sigCache[(op*0x9e3779b1^class)%uint32(len(t.sigCache))]
	if slot.op == op && slot.class == class {
		return slot.id
	}
	k := [2]uint32{op, class}
	id, ok := t.sigIDs[k]
	if !ok {
		id = uint32(len(t.sigs))
		t.sigs = append(t.sigs, k)
		t.sigIDs[k] = id
	}
	*slot = sigCached{op, class, id}
	return id
}

// id returns the number of s, adding it when new.
func (t *symtab) id(s string) uint32 {
	if s == "" {
		return 0
	}
	p := unsafe.StringData(s)
	slot := &t.cache[(uintptr(unsafe.Pointer(p))>>4^uintptr(len(s)))%uintptr(len(t.cache))]
	if unsafe.StringData(slot.s) == p && len(slot.s) == len(s) {
		return slot.id
	}
	id, ok := t.ids[s]
	if !ok {
		id = uint32(len(t.names))
		t.names = append(t.names, s)
		t.ids[s] = id
	}
	*slot = symCached{s, id}
	return id
}

// full reports whether new threads should get a new table.
func (t *symtab) full() bool { return len(t.names) >= maxSymbols || len(t.sigs) >= maxSymbols }

// symbols returns the table a thread that begins now uses.
func (a *Assembler) symbols() *symtab {
	if a.syms == nil || a.syms.full() {
		a.syms = newSymtab()
	}
	return a.syms
}

// name returns the string of symbol id of th's table.
func (th *thread) name(id uint32) string { return th.syms.names[id] }

// sortEvents puts evs in orderIndex order, keeping the arrival order of
// events with the same orderIndex (mostly they arrive in order already).
func sortEvents(evs []kev) {
	if !slices.IsSortedFunc(evs, compareOrder) {
		slices.SortStableFunc(evs, compareOrder)
	}
}

func compareOrder(a, b kev) int { return cmp.Compare(a.order, b.order) }

// inTreeOrder reports whether t's spans are already in the order tree
// gives them (a single Kieker thread's calls are created in that order:
// each after its caller, callees in orderIndex order) with unique span ids
// and every parent present; then it fills Parent and Depth and reports
// negative durations as tree does, so tree need not run. It checks
// without a map: a span's parent must be on the path from the root to
// the span before it, and a span must sort after its previous sibling.
// Unique ids: the calls of one thread have ids derived from distinct,
// rising orderIndexes (kiekerSpanID), so it asks for rising orderIndexes
// of one Kieker trace and no id 1 (what an id of 0 becomes). The parents
// named in missing (the calls a part leaves open for the next) are not in
// the trace: their children are roots, reported as tree reports them.
func inTreeOrder(t *Trace, missing []SpanID) bool {
	if len(t.Spans) == 0 {
		return true
	}
	kid := t.Spans[0].KiekerTrace
	type frame struct {
		id   SpanID
		i    int32
		last int32 // the last child so far (-1: none)
	}
	path := make([]frame, 0, 16)
	lastRoot := int32(-1)
	for i := range t.Spans {
		s := &t.Spans[i]
		if s.Source != FromEvents || s.KiekerTrace != kid || s.SpanID == 1 || s.SpanID == 0 || len(s.Links) > 0 ||
			i > 0 && s.OrderIndex <= t.Spans[i-1].OrderIndex || slices.Contains(missing, s.SpanID) {
			return false
		}
		var prev int32
		root := s.ParentID == 0 || slices.Contains(missing, s.ParentID)
		if root {
			path, prev = path[:0], lastRoot
		} else {
			for len(path) > 0 && path[len(path)-1].id != s.ParentID {
				path = path[:len(path)-1]
			}
			if len(path) == 0 {
				return false
			}
			prev = path[len(path)-1].last
		}
		if prev >= 0 && !spanBefore(&t.Spans[prev], s) {
			return false
		}
		if root {
			lastRoot = int32(i)
		} else {
			path[len(path)-1].last = int32(i)
		}
		path = append(path, frame{id: s.SpanID, i: int32(i), last: -1})
	}
	// The order holds: fill in what tree fills in.
	path = path[:0]
	for i := range t.Spans {
		s := &t.Spans[i]
		if s.End < s.Start {
			t.Broken = append(t.Broken, fmt.Sprintf("span %s (%s) ends %d ns before it starts", s.SpanID, s.Operation, s.Start-s.End))
		}
		switch {
		case s.ParentID == 0 || slices.Contains(missing, s.ParentID):
			if s.ParentID != 0 {
				t.Broken = append(t.Broken, fmt.Sprintf("span %s (%s): parent %s missing", s.SpanID, s.Operation, s.ParentID))
			}
			path = path[:0]
			s.Parent = -1
		default:
			for path[len(path)-1].id != s.ParentID {
				path = path[:len(path)-1]
			}
			s.Parent = path[len(path)-1].i
		}
		s.Depth = int32(len(path))
		path = append(path, frame{id: s.SpanID, i: int32(i)})
	}
	return true
}

// spanBefore reports whether a (earlier in Spans) sorts before b among
// siblings as tree sorts them: by start, then orderIndex, then eoi.
func spanBefore(a, b *Span) bool {
	switch {
	case a.Start != b.Start:
		return a.Start < b.Start
	case a.OrderIndex != b.OrderIndex:
		return a.OrderIndex < b.OrderIndex
	case a.EOI != b.EOI:
		return a.EOI < b.EOI
	}
	return true
}

// held returns what the assembler holds of Kieker thread traces: the
// capacity of their buffered events and of their calls not yet emitted
// (what their memory is).
func (a *Assembler) held() (events, calls int) {
	for _, th := range a.threads {
		events += cap(th.evs)
		calls += cap(th.spans)
	}
	return events, calls
}

// checkTreeOrder makes finish compare what inTreeOrder gives with what
// tree gives (tests set it).
var checkTreeOrder bool

// treeOrdered is inTreeOrder, checked against tree when checkTreeOrder is
// set (it panics when they differ).
func treeOrdered(t *Trace, missing []SpanID) bool {
	if !checkTreeOrder {
		return inTreeOrder(t, missing)
	}
	ref := &Trace{Spans: slices.Clone(t.Spans), Broken: slices.Clone(t.Broken)}
	if !inTreeOrder(t, missing) {
		return false
	}
	if dups := tree(ref); dups != 0 || !slices.EqualFunc(ref.Spans, t.Spans, func(a, b Span) bool {
		return sameSpan(&a, &b) && a.Parent == b.Parent && a.Depth == b.Depth
	}) || !slices.Equal(ref.Broken, t.Broken) {
		panic(fmt.Sprintf("inTreeOrder differs from tree: %v / %v", ref.Broken, t.Broken))
	}
	return true
}
