package split

import (
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// output collects the records a stage passes on, in order. Records go
// straight into the batch handed to the next consumer, except while some
// record is held back (an OperationExecutionRecord whose trace is not
// complete yet): then every record queues behind it in the window, so that
// the output keeps the input's order exactly.
//
// Records passed on unchanged share the caller's values (the batch goes to
// the next consumer before Consume returns); changed ones are copied into
// vals, an arena reused from batch to batch without clearing (every value
// is overwritten when it is handed out).
type output struct {
	batch record.Batch
	vals  []record.Value
	win   window
}

// share appends r itself, unchanged, valid while the caller's batch is.
func (o *output) share(r *record.Record) {
	if o.win.n == 0 {
		c := o.next()
		c.Type, c.LoggingTimestamp, c.Values = r.Type, r.LoggingTimestamp, r.Values
		return
	}
	o.win.push(r)
}

// add appends a copy of r and returns the copy for the caller to patch. It
// is valid until the next add.
func (o *output) add(r *record.Record) *record.Record {
	if o.win.n == 0 {
		c := o.next()
		c.Type, c.LoggingTimestamp = r.Type, r.LoggingTimestamp
		c.Values = o.values(len(r.Values))
		copy(c.Values, r.Values)
		return c
	}
	e := o.win.push(r)
	return &e.rec
}

// next appends a record to the batch and returns it. (Filling it field by
// field is much cheaper than appending a Record value.)
func (o *output) next() *record.Record {
	n := len(o.batch.Records)
	if n == cap(o.batch.Records) {
		o.batch.Records = append(o.batch.Records, record.Record{})
	} else {
		o.batch.Records = o.batch.Records[:n+1]
	}
	return &o.batch.Records[n]
}

// values carves n values out of the arena. A full arena is replaced by a
// bigger one; records already added keep the old one until the batch is
// reset.
func (o *output) values(n int) []record.Value {
	l := len(o.vals)
	if l+n > cap(o.vals) {
		o.vals = make([]record.Value, 0, max(2*cap(o.vals), 4096, n))
		l = 0
	}
	o.vals = o.vals[:l+n]
	return o.vals[l : l+n : l+n]
}

// reset empties the batch after the next consumer returned.
func (o *output) reset() {
	o.batch.Reset()
	o.vals = o.vals[:0]
}

// addNew appends a record of type t for the caller to fill (its values
// are zero).
func (o *output) addNew(t *record.Type, loggingTimestamp int64) *record.Record {
	if o.win.n == 0 {
		c := o.next()
		c.Type, c.LoggingTimestamp = t, loggingTimestamp
		c.Values = o.values(len(t.Fields))
		clear(c.Values)
		return c
	}
	e := o.win.pushNew(t, loggingTimestamp)
	return &e.rec
}

// hold appends a copy of r that waits until g is resolved, and returns
// the window position of the entry.
func (o *output) hold(r *record.Record, g *group) uint64 {
	e := o.win.push(r)
	e.wait = g
	return o.win.end - 1
}

// drain moves the ready records at the head of the window to the batch.
func (o *output) drain() {
	w := &o.win
	for w.n > 0 {
		e := w.at(w.start)
		if e.wait != nil {
			return
		}
		// Copies: the window's values are recycled once popped.
		for i := range e.before {
			o.copyOut(&e.before[i])
		}
		if !e.drop {
			o.copyOut(&e.rec)
		}
		if e.after != nil {
			o.copyOut(e.after)
		}
		w.pop()
	}
}

func (o *output) copyOut(r *record.Record) {
	c := o.next()
	c.Type, c.LoggingTimestamp = r.Type, r.LoggingTimestamp
	c.Values = o.values(len(r.Values))
	copy(c.Values, r.Values)
}

// group is the set of held-back entries that are resolved together: the
// records of one OperationExecutionRecord trace (splitting) or of one
// split trace family (merging).
type group struct {
	root  int64     // the trace's id (the family's root partial trace)
	seqs  []uint64  // window positions of its entries, in arrival order
	since time.Time // when its first record was held back

	// Merging: the ids of the family's partial traces (root first) and
	// where each child hangs in its parent.
	ids  []int64
	kids map[int64]kid
}

// kid links a partial trace to the eoi of its leaf in its parent.
type kid struct {
	parent int64
	leaf   int32
}

// entry is one record in the window, with what resolving its group added:
// records to write before it (the TraceMetadata of partial traces), a
// record to write after it (the leaf copy of a crossing call), or that it
// is dropped (merging).
type entry struct {
	rec    record.Record
	wait   *group
	drop   bool
	before []record.Record
	after  *record.Record
	chunk  uint64 // the value chunk holding rec.Values
}

// window is a FIFO of entries addressed by position (positions count up
// from 0 and are never reused). Values live in chunks that are recycled
// once every entry using them has left, so a window that keeps turning
// over allocates nothing per record.
type window struct {
	ring  []entry
	head  int    // ring index of position start
	n     int    // entries in the window
	start uint64 // position of the first entry
	end   uint64 // position after the last entry

	chunks     []valueChunk // oldest first; the last is being filled
	free       [][]record.Value
	chunkSeq   uint64 // sequence number of the last chunk
	firstChunk uint64 // sequence number of chunks[0]
}

type valueChunk struct {
	vals []record.Value
	used int
}

const chunkValues = 4096

func (w *window) at(pos uint64) *entry {
	return &w.ring[(w.head+int(pos-w.start))%len(w.ring)]
}

func (w *window) grow() {
	size := 2 * len(w.ring)
	if size == 0 {
		size = 256
	}
	ring := make([]entry, size)
	for i := 0; i < w.n; i++ {
		ring[i] = w.ring[(w.head+i)%len(w.ring)]
	}
	w.ring, w.head = ring, 0
}

func (w *window) pushNew(t *record.Type, loggingTimestamp int64) *entry {
	if w.n == len(w.ring) {
		w.grow()
	}
	e := &w.ring[(w.head+w.n)%len(w.ring)]
	w.n++
	w.end++
	vals, seq := w.values(len(t.Fields))
	*e = entry{rec: record.Record{Type: t, LoggingTimestamp: loggingTimestamp, Values: vals}, chunk: seq}
	return e
}

func (w *window) push(r *record.Record) *entry {
	if w.n == len(w.ring) {
		w.grow()
	}
	e := &w.ring[(w.head+w.n)%len(w.ring)]
	w.n++
	w.end++
	vals, seq := w.values(len(r.Values))
	copy(vals, r.Values)
	deepCopyLists(vals)
	*e = entry{rec: record.Record{Type: r.Type, LoggingTimestamp: r.LoggingTimestamp, Values: vals}, chunk: seq}
	return e
}

// deepCopyLists gives array values their own items: a batch's arrays may
// live in its arena, which the batch's owner reuses.
func deepCopyLists(vals []record.Value) {
	for i, v := range vals {
		if l := v.List(); l != nil {
			vals[i] = record.ListValue(l.Elem, append([]record.Value(nil), l.Items...))
		}
	}
}

func (w *window) pop() {
	e := &w.ring[w.head]
	chunk := e.chunk
	*e = entry{}
	w.head = (w.head + 1) % len(w.ring)
	w.n--
	w.start++
	if w.n == 0 {
		w.resetChunks()
		return
	}
	// Chunks older than the new head's are unused now.
	next := w.ring[w.head].chunk
	if next > chunk {
		chunk = next
	}
	for len(w.chunks) > 1 && w.firstChunk < chunk {
		w.recycle(w.chunks[0].vals)
		w.chunks = w.chunks[1:]
		w.firstChunk++
	}
}

func (w *window) recycle(v []record.Value) {
	if cap(v) == chunkValues && len(w.free) < 64 {
		clear(v)
		w.free = append(w.free, v)
	}
}

func (w *window) resetChunks() {
	if len(w.chunks) == 0 {
		return
	}
	for _, c := range w.chunks[:len(w.chunks)-1] {
		w.recycle(c.vals)
	}
	last := w.chunks[len(w.chunks)-1]
	clear(last.vals[:last.used])
	last.used = 0
	w.chunks = append(w.chunks[:0], last)
	w.firstChunk = w.chunkSeq
}

// values carves n values out of the newest chunk, starting a chunk when it
// is full. It returns the values and the chunk's sequence number.
func (w *window) values(n int) ([]record.Value, uint64) {
	if len(w.chunks) > 0 {
		c := &w.chunks[len(w.chunks)-1]
		if c.used+n <= len(c.vals) {
			v := c.vals[c.used : c.used+n : c.used+n]
			c.used += n
			return v, w.chunkSeq
		}
	}
	size := chunkValues
	var vals []record.Value
	switch {
	case n > chunkValues:
		size = n
		vals = make([]record.Value, size)
	case len(w.free) > 0:
		vals = w.free[len(w.free)-1]
		w.free = w.free[:len(w.free)-1]
	default:
		vals = make([]record.Value, size)
	}
	if len(w.chunks) == 0 {
		w.chunkSeq++
		w.firstChunk = w.chunkSeq
	} else {
		w.chunkSeq++
	}
	w.chunks = append(w.chunks, valueChunk{vals: vals, used: n})
	return vals[:n:n], w.chunkSeq
}
