package probe

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Kinds of an event. A TraceMetadata takes two events: kindMeta, then
// kindMetaExt with the fields that do not fit one; so do a JoinEvent
// (kindJoin, kindJoinExt with the joined trace's id) and an
// InvocationRecord (kindInv, kindInvExt; see invocation.go).
const (
	kindBefore uint8 = iota + 1
	kindAfter
	kindFailed
	kindMeta
	kindMetaExt
	kindSplit
	kindJoin
	kindJoinExt
	kindInv
	kindInvExt
)

// paired reports whether an event of kind is the first half of a record
// that takes two events.
func paired(kind uint8) bool { return kind == kindMeta || kind == kindJoin || kind == kindInv }

// second reports whether an event of kind is the second half of a record
// (whose kind is always the first half's plus one).
func second(kind uint8) bool { return kind == kindMetaExt || kind == kindJoinExt || kind == kindInvExt }

// event is one record, or half of a TraceMetadata, as the probes hand it
// to the writer: 32 bytes, no pointers, so that two share a cache line and
// the ring is one allocation the garbage collector never scans.
type event struct {
	ts    int64  // timestamp in clock ticks (kindMeta: the logging timestamp; kindMetaExt: threadId; kindInv: creationTime; kindInvExt: runnableId)
	trace int64  // traceId (kindMetaExt: parentTraceId; kindJoinExt: joinedTraceId; kindInvExt: parentInvocationId)
	order int32  // orderIndex (kindMeta: parentOrderId; kindInv: parentOrderId; kindInvExt: parentProcessId)
	op    uint32 // operation id (kindInvExt: bits 32 and up of the invocationId)
	str   uint32 // string id of the cause (kindMeta: of the sessionId; kindInv: of the parentNodeId; kindInvExt: bits 0–31 of the invocationId)
	kind  uint8
}

// opBits is the width of an operation id in a slot; the kind takes the
// bits above.
const opBits = 28

// slot is one cell of a ring, 32 bytes.
type slot struct {
	seq   atomic.Uint32 // uint32(position+1) once the event at position is written
	word  uint32        // kind<<opBits | op
	order int32
	str   uint32
	ts    int64
	trace int64
}

// blockEvents is the number of events a trace collects before it hands
// them to the ring in one go.
const blockEvents = 32

// block holds the events a trace has recorded but not yet published. It
// belongs to the trace's goroutine until published, then returns to a
// pool; pooled blocks are per processor, so a busy program reuses a few
// blocks per processor and allocates none.
type block struct {
	n  int
	ev [blockEvents]event
}

var blocks = sync.Pool{New: func() any { return new(block) }}

// shard is a bounded multi-producer single-consumer ring. A producer
// claims a run of positions with one compare-and-swap on tail (as many as
// are free, up to its block), copies its events into their slots and
// publishes each by storing position+1 in the slot's sequence. The consumer
// takes slots in order while published and hands them back by moving head
// once per batch. A producer never waits: what does not fit is rejected and
// counted.
type shard struct {
	// read-mostly
	slots    []slot
	mask     uint64
	wake     chan struct{} // pokes the writer goroutine
	wakeMask uint64        // poke when a claim crosses a multiple of wakeMask+1
	closed   atomic.Bool
	_        [64 - 8*6 - 4]byte

	tail atomic.Uint64 // next position to claim (producers)
	_    [56]byte

	rejected atomic.Uint64 // records rejected: ring full or writer closed
	_        [56]byte

	head atomic.Uint64 // positions below head are free again (consumer)
	next uint64        // next position to take (consumer only)
	_    [48]byte
}

func (s *shard) init(size int, wake chan struct{}) {
	s.slots = make([]slot, size)
	// Touch every page now, so that probes do not take the page faults of
	// a fresh allocation.
	for i := 0; i < size; i += 4096 / int(unsafe.Sizeof(slot{})) {
		s.slots[i].seq.Store(0)
	}
	s.mask = uint64(size - 1)
	s.wake = wake
	s.wakeMask = uint64(size/4 - 1)
}

// push publishes evs, as many as fit, and counts the rest as rejected. The
// two events of a TraceMetadata or JoinEvent are never split.
func (s *shard) push(evs []event) {
	n := uint64(len(evs))
	if n == 0 {
		return
	}
	if s.closed.Load() {
		s.reject(evs)
		return
	}
	size := s.mask + 1
	for {
		head := s.head.Load() // before tail, so that head ≤ tail
		tail := s.tail.Load()
		if tail-head > size {
			// The consumer freed positions and producers claimed them
			// between the two loads: head is stale, and size-(tail-head)
			// would wrap around to a huge number of free positions (the
			// claim would overwrite events not yet taken). Read both
			// again.
			continue
		}
		k := min(n, size-(tail-head))
		if k > 0 && k < n && paired(evs[k-1].kind) {
			k--
		}
		if k == 0 {
			s.reject(evs)
			return
		}
		if !s.tail.CompareAndSwap(tail, tail+k) {
			continue
		}
		for i := range evs[:k] {
			ev := &evs[i]
			pos := tail + uint64(i)
			sl := &s.slots[pos&s.mask]
			sl.word = uint32(ev.kind)<<opBits | ev.op
			sl.order = ev.order
			sl.str = ev.str
			sl.ts = ev.ts
			sl.trace = ev.trace
			sl.seq.Store(uint32(pos + 1))
		}
		if k < n {
			s.reject(evs[k:])
		}
		if tail&^s.wakeMask != (tail+k)&^s.wakeMask { // crossed a quarter of the ring
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
		return
	}
}

// reject counts the records of evs as rejected.
func (s *shard) reject(evs []event) {
	n := uint64(0)
	for i := range evs {
		if !second(evs[i].kind) {
			n++
		}
	}
	s.rejected.Add(n)
}

// pop takes the next published event into ev. Only the consumer calls it;
// the slot is handed back by release.
func (s *shard) pop(ev *event) bool {
	sl := &s.slots[s.next&s.mask]
	if sl.seq.Load() != uint32(s.next+1) {
		return false
	}
	*ev = event{
		kind:  uint8(sl.word >> opBits),
		op:    sl.word & (1<<opBits - 1),
		order: sl.order,
		str:   sl.str,
		ts:    sl.ts,
		trace: sl.trace,
	}
	s.next++
	return true
}

// unpop gives back the event pop took last (not yet released).
func (s *shard) unpop() { s.next-- }

// release hands the slots taken by pop back to the producers.
func (s *shard) release() { s.head.Store(s.next) }

// buffered returns the number of events claimed but not yet released (a
// TraceMetadata or JoinEvent is two).
func (s *shard) buffered() uint64 {
	head := s.head.Load()
	tail := s.tail.Load()
	if tail < head {
		return 0
	}
	return tail - head
}
