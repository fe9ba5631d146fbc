package jfr

import (
	"bytes"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Limits bound what a recording may make the reader hold. Exceeding one is
// an error for that event, constant pool or chunk.
type Limits struct {
	MaxEventSize    int   // bytes of one event, metadata and checkpoints included (default 64 MiB)
	MaxStringLen    int   // bytes or UTF-16 units of one string (default 1 MiB)
	MaxArrayLen     int   // elements of one array (default 65536)
	MaxPoolBytes    int64 // bytes of a chunk's checkpoint events kept for its constants (default 512 MiB, at most 4 GiB)
	MaxCheckpoints  int   // checkpoint events of one chunk (default 1,000,000)
	ReadBufferSize  int   // bytes read at a time (default 1 MiB)
	MaxMetadataSize int   // bytes of one metadata event (default 16 MiB)
	// MaxHeld bounds the events of a live chunk held back for constants
	// no checkpoint defined yet (default 65536); beyond it such an event
	// is decoded at once, with zero values for what is missing.
	MaxHeld int
}

func (l Limits) withDefaults() Limits {
	if l.MaxEventSize <= 0 {
		l.MaxEventSize = 64 << 20
	}
	if l.MaxStringLen <= 0 {
		l.MaxStringLen = 1 << 20
	}
	if l.MaxArrayLen <= 0 {
		l.MaxArrayLen = 65536
	}
	if l.MaxPoolBytes <= 0 || l.MaxPoolBytes > math.MaxUint32 {
		l.MaxPoolBytes = 512 << 20
	}
	if l.MaxCheckpoints <= 0 {
		l.MaxCheckpoints = 1_000_000
	}
	if l.ReadBufferSize < 4096 {
		l.ReadBufferSize = 1 << 20
	}
	if l.MaxMetadataSize <= 0 {
		l.MaxMetadataSize = 16 << 20
	}
	if l.MaxHeld <= 0 {
		l.MaxHeld = 65536
	}
	return l
}

// maxNest bounds nested structs, arrays and constant references while
// decoding one value.
const maxNest = 32

// Options configure a Stream.
type Options struct {
	// Filter selects event types by name; events of other types are
	// skipped by their size without being decoded, and so are the
	// constants only they refer to. Nil selects every type.
	Filter func(eventType string) bool
	// Types, when set, is shared by streams so that an event type with
	// the same fields gets the same *record.Type in all of them (across
	// JVM restarts, say). Nil: each stream has its own.
	Types  *TypeSet
	Limits Limits
}

// Stats count what a stream read. Counters only grow.
type Stats struct {
	Chunks      int64 // chunks opened
	Events      int64 // events decoded into records
	Filtered    int64 // events skipped by the filter
	Unknown     int64 // events of a type the metadata does not declare
	Metadata    int64 // metadata events passed over in the event stream
	Checkpoints int64 // checkpoint events passed over in the event stream
	BadEvents   int64 // malformed events skipped
	// Unresolved counts constant references (other than key 0) that
	// resolved to nothing and became zero values; Fallbacks those found
	// in the previous chunk's pools instead; BadConstants constants whose
	// bytes were malformed.
	Unresolved   int64
	Fallbacks    int64
	BadConstants int64
}

// Stream decodes the chunks of one recording or one JVM's repository, in
// order. It keeps what spans chunks: the record types, the time base (taken
// from the first chunk, as the JDK does), the previous chunk's constants,
// the last metadata. A Stream and its chunks are used by one goroutine at a
// time.
type Stream struct {
	opts  Options
	lim   Limits
	types *TypeSet
	dec   *decoder
	stats Stats

	clockSet bool
	meta     *Metadata
	metaRaw  []byte // the metadata's id and body (see metadataBody)
	comp     *compiler
	events   eventTable

	prev *poolSet // pools of the last chunk opened

	win          []byte // event read window, shared by the stream's chunks
	scratchEvent []byte
	in           input
}

// NewStream returns a stream with the given options.
func NewStream(o Options) *Stream {
	s := &Stream{opts: o, lim: o.Limits.withDefaults(), types: o.Types}
	if s.types == nil {
		s.types = NewTypeSet()
	}
	s.dec = &decoder{lim: s.lim, stats: &s.stats}
	s.dec.intern.MaxLen = 4096
	return s
}

// Stats returns the stream's counters.
func (s *Stream) Stats() Stats { return s.stats }

// Metadata returns the newest metadata the stream read, or nil.
func (s *Stream) Metadata() *Metadata { return s.meta }

// RecordType returns the record type the stream decodes events of the
// named type into under the current metadata, or nil when the metadata
// has no such event type. It lets a caller declare types before their
// first event (a sink that writes a schema first).
func (s *Stream) RecordType(name string) *record.Type {
	if s.meta == nil {
		return nil
	}
	c := s.meta.ClassByName(name)
	if c == nil || !c.IsEvent() {
		return nil
	}
	et := s.events.lookup(s, c.ID)
	if et == nil {
		return nil
	}
	return et.typ
}

// Chunk is one chunk being read. A finished chunk is read once; a live
// one is read up to the end its header vouches for, and Update extends it.
type Chunk struct {
	s    *Stream
	src  io.ReaderAt
	base int64
	h    Header

	metaOff  int64
	cpNewest int64
	pools    *poolSet

	pos, end int64
	// held: offsets of the events of a live chunk that refer to constants
	// no checkpoint read so far defines, in chunk order. The JVM writes
	// some constants only in a later flush's checkpoint or at the chunk's
	// end (the class loaders of chunk-begin jdk.ClassLoaderStatistics), so
	// Next sets such an event aside, reads on, and decodes it again after
	// each newer checkpoint (a pass over held[retry:], keeping the ones
	// still missing a constant in held[:kept]) until it resolves, the
	// chunk finishes, or Settle. Outside a pass retry == kept == len(held).
	held        []int64
	retry, kept int
	// settled: events before it are decoded even when they refer to
	// constants no checkpoint defines (Settle).
	settled int64
	broken  bool
	winOff  int64 // chunk offset of s.win[0]
}

// Open starts reading a chunk: src reads the chunk (offset 0 is its
// magic), base is where the chunk starts in its file (for messages), h is
// its header as ReadHeader returned it. Open reads the metadata and the
// constant pools; events are read by Next.
func (s *Stream) Open(src io.ReaderAt, base int64, h Header) (*Chunk, error) {
	c := &Chunk{s: s, src: src, base: base, pos: HeaderSize, end: HeaderSize}
	s.win = s.win[:0] // the window belongs to the chunk read last
	s.stats.Chunks++
	if !s.clockSet {
		s.dec.clock = newClock(h)
		s.clockSet = true
	}
	if s.dec.cur != nil {
		s.prev = s.dec.cur
	}
	if err := c.Update(h); err != nil {
		c.broken = true
		return c, err
	}
	return c, nil
}

// Header returns the newest header accepted for the chunk.
func (c *Chunk) Header() Header { return c.h }

// Offset returns the chunk offset of the next event Next reads.
func (c *Chunk) Offset() int64 { return c.pos }

// End returns the chunk offset up to which the chunk is readable.
func (c *Chunk) End() int64 { return c.end }

// Broken reports whether the rest of the chunk could not be framed (a
// damaged chunk: Next reported why and returns io.EOF from then on).
func (c *Chunk) Broken() bool { return c.broken }

// Done reports whether nothing more will come from the chunk: it is
// finished and read to its end, or broken.
func (c *Chunk) Done() bool {
	return c.broken || (c.h.Finished() && c.pos >= c.end && len(c.held) == 0)
}

// Held returns how many events of the chunk Next holds back until a
// checkpoint defines the constants they refer to.
func (c *Chunk) Held() int { return len(c.held) }

// retryHeld starts a pass of Next over the held events (a pass under way
// starts again with what it has not tried yet).
func (c *Chunk) retryHeld() {
	c.held = append(c.held[:c.kept], c.held[c.retry:]...)
	c.retry, c.kept = 0, 0
}

// SkipToEnd makes Next start at the current end: the events readable now
// are not decoded (a follower starting at the newest data).
func (c *Chunk) SkipToEnd() { c.pos = c.end }

// Update accepts a newer header of a live chunk (as ReadHeader returned
// it): it reads new metadata and the checkpoints added since, and makes the
// events up to the new size readable.
func (c *Chunk) Update(h Header) error {
	if h.ChunkSize < c.end {
		c.broken = true
		return at(c.base, 8, "chunk size went down from %d to %d", c.end, h.ChunkSize)
	}
	c.h = h
	c.end = h.ChunkSize
	s := c.s
	if h.MetadataOffset != c.metaOff {
		if err := c.readMetadata(h.MetadataOffset); err != nil {
			c.broken = true
			return err
		}
		c.metaOff = h.MetadataOffset
	}
	if c.pools == nil {
		c.pools = newPoolSet(s.meta)
		s.dec.cur, s.dec.ps = c.pools, c.pools
		s.dec.prev = s.prev
	} else {
		c.pools.meta = s.meta
	}
	if h.CheckpointOffset != c.cpNewest {
		if err := c.addCheckpoints(h.CheckpointOffset, c.cpNewest); err != nil {
			c.broken = true
			return err
		}
		c.cpNewest = h.CheckpointOffset
		c.retryHeld() // the new constants may be theirs
	} else if h.Finished() {
		c.retryHeld() // decoded now, whatever is missing
	}
	return nil
}

// Settle makes Next decode every readable event, the held ones included,
// even when it refers to constants that are not defined yet (they become
// zero values). A reader calls it before giving up on a live chunk that
// will not grow any more (a killed JVM, or a one-time read of a chunk
// still being written).
func (c *Chunk) Settle() {
	c.settled = c.end
	c.retryHeld()
}

func (c *Chunk) readMetadata(off int64) error {
	s := c.s
	raw, err := readEvent(c.src, c.base, off, c.end, s.lim.MaxMetadataSize, s.scratchEvent, "metadata")
	if err != nil {
		return err
	}
	s.scratchEvent = raw
	// Every chunk repeats the metadata; the types stay the same when the
	// metadata id and the body (after the event's times) do.
	body := metadataBody(raw)
	if s.meta != nil && bytes.Equal(body, s.metaRaw) {
		return nil
	}
	m, err := ParseMetadata(raw, c.base+off)
	if err != nil {
		return err
	}
	s.meta = m
	s.metaRaw = append(s.metaRaw[:0], body...)
	s.comp = newCompiler(m)
	s.events.reset()
	return nil
}

// Next decodes events into b (appending) until b holds max records or the
// readable end is reached. It returns io.EOF at the readable end (a live
// chunk may grow: Update, then Next again). A malformed event is skipped
// and reported as a *FormatError; Next may be called again and resumes
// after it. When the rest of the chunk cannot be framed Next reports why
// once and then returns io.EOF.
//
// An event of a live chunk that refers to a constant no checkpoint read so
// far defines is held: Next reads on past it and decodes it first thing
// after an Update that read a newer checkpoint, once the constants are
// there or the chunk finished (or after Settle). So a held event comes
// after events that follow it in the chunk.
func (c *Chunk) Next(b *record.Batch, max int) (int, error) {
	s := c.s
	d := s.dec
	d.cur, d.ps = c.pools, c.pools
	n := 0
	for b.Len() < max {
		retrying := c.retry < len(c.held)
		start := c.pos
		if retrying {
			start = c.held[c.retry]
			c.retry++
		} else {
			if c.kept != c.retry { // a pass ended
				c.held = c.held[:c.kept]
				c.retry = c.kept
			}
			if c.broken || c.pos >= c.end {
				return n, io.EOF
			}
		}
		w, err := c.window(start, min(9, c.end-start))
		if err != nil {
			c.broken = true
			return n, err
		}
		in := &s.in // a field, not a local: the layouts' closures would move it to the heap
		in.reset(w)
		size := int64(in.varint())
		typ := in.i64()
		if !in.ok() || size <= 0 || size > c.end-start {
			c.broken = true
			if !in.ok() || size <= 0 {
				return n, at(c.base, start, "bad event size; the rest of the chunk (%d bytes) is skipped", c.end-start)
			}
			return n, at(c.base, start, "event of %d bytes runs past the chunk's end at %d", size, c.base+c.end)
		}
		if !retrying {
			c.pos += size
		}
		var et *eventType
		switch typ {
		case 0:
			s.stats.Metadata++
			continue
		case 1:
			s.stats.Checkpoints++
			continue
		default:
			et = s.events.lookup(s, typ)
		}
		if et == nil {
			s.stats.Unknown++
			continue
		}
		if et.skip {
			s.stats.Filtered++
			continue
		}
		if et.err != nil {
			s.stats.BadEvents++
			return n, at(c.base, start, "event type %s: %v", et.class.Name, et.err)
		}
		if size > int64(s.lim.MaxEventSize) {
			s.stats.BadEvents++
			return n, at(c.base, start, "%s event of %d bytes exceeds the limit of %d", et.class.Name, size, s.lim.MaxEventSize)
		}
		w, err = c.window(start, size)
		if err != nil {
			c.broken = true
			return n, err
		}
		in.reset(w[:size])
		in.varint()
		in.varint()
		r := b.Add(et.typ, record.NoTimestamp)
		misses, unresolved, fallbacks := d.misses, s.stats.Unresolved, s.stats.Fallbacks
		et.lay.read(d, in, r.Values)
		if !in.ok() {
			b.Truncate(b.Len() - 1)
			s.stats.BadEvents++
			return n, at(c.base, start+int64(in.failAt), "%s event at %d: %s", et.class.Name, c.base+start, in.reason)
		}
		if d.misses != misses && start >= c.settled && !c.h.Finished() && (retrying || len(c.held) < s.lim.MaxHeld) {
			// Wait for a newer checkpoint, which may define them.
			b.Truncate(b.Len() - 1)
			s.stats.Unresolved, s.stats.Fallbacks = unresolved, fallbacks
			if retrying {
				c.held[c.kept] = start
				c.kept++
			} else {
				c.held = append(c.held, start)
				c.retry, c.kept = len(c.held), len(c.held)
			}
			continue
		}
		if et.startTime >= 0 {
			r.LoggingTimestamp = r.Values[et.startTime].Int()
		}
		s.stats.Events++
		n++
	}
	return n, nil
}

// window returns the chunk bytes from off on, at least need of them,
// reading them from src when the window does not hold them.
func (c *Chunk) window(off, need int64) ([]byte, error) {
	s := c.s
	if off >= c.winOff && off+need <= c.winOff+int64(len(s.win)) {
		return s.win[off-c.winOff:], nil
	}
	size := max(need, int64(s.lim.ReadBufferSize))
	size = min(size, c.end-off)
	if size < need {
		return nil, at(c.base, off, "event runs past the chunk's end")
	}
	if int64(cap(s.win)) < size {
		s.win = make([]byte, size)
	}
	s.win = s.win[:size]
	k, err := c.src.ReadAt(s.win, off)
	if int64(k) < need {
		s.win = s.win[:0]
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, readErr(c.base, off, "event", err)
	}
	s.win = s.win[:k]
	c.winOff = off
	return s.win, nil
}

// eventType is how events of one type id are decoded.
type eventType struct {
	class     *Class
	typ       *record.Type
	lay       *layout
	cols      []column
	startTime int // value index of startTime, or -1
	skip      bool
	err       error
}

// eventTable maps type ids to compiled event types, densely for small ids.
type eventTable struct {
	dense  []*eventType
	sparse map[int64]*eventType
	none   eventType // marks ids without an event type in dense
}

func (t *eventTable) reset() {
	clear(t.dense)
	t.dense = t.dense[:0]
	clear(t.sparse)
}

const maxDenseID = 1 << 16

func (t *eventTable) lookup(s *Stream, id int64) *eventType {
	if id >= 0 && id < maxDenseID {
		if id < int64(len(t.dense)) {
			if et := t.dense[id]; et != nil {
				if et == &t.none {
					return nil
				}
				return et
			}
		}
	} else if et, ok := t.sparse[id]; ok {
		return et
	}
	et := s.compile(id)
	if id >= 0 && id < maxDenseID {
		for int64(len(t.dense)) <= id {
			t.dense = append(t.dense, nil)
		}
		if et == nil {
			t.dense[id] = &t.none
		} else {
			t.dense[id] = et
		}
	} else {
		if t.sparse == nil {
			t.sparse = map[int64]*eventType{}
		}
		t.sparse[id] = et
	}
	return et
}

func (s *Stream) compile(id int64) *eventType {
	if s.meta == nil {
		return nil
	}
	c := s.meta.Class(id)
	if c == nil || !c.IsEvent() {
		return nil
	}
	et := &eventType{class: c, startTime: -1}
	if s.opts.Filter != nil && !s.opts.Filter(c.Name) {
		et.skip = true
		return et
	}
	et.lay = s.comp.class(c, MaxDepth)
	et.cols = et.lay.cols
	fields := make([]record.Field, len(et.cols))
	for i, col := range et.cols {
		fields[i] = record.Field{Name: col.name(), Kind: col.kind, Array: col.array}
		if col.name() == "startTime" && col.render == renderTimestamp {
			et.startTime = i
		}
	}
	et.typ, et.err = s.types.get(c.Name, fields)
	if et.err == nil {
		describe(et.typ, c, et.cols)
	}
	return et
}

// decoder holds what decoding values needs: the pools to resolve
// constants in, the time base, the limits, scratch space.
type decoder struct {
	lim    Limits
	clock  clock
	cur    *poolSet // the chunk being read
	prev   *poolSet // the chunk before it
	ps     *poolSet // where constants resolve now (cur, or prev during a fallback)
	stats  *Stats
	nest   int
	misses int // references to constants not found or incomplete (partial), ever
	intern record.Interner
	buf    []byte
	sbuf   []byte
}

func (d *decoder) enter(in *input) bool {
	if d.nest >= maxNest {
		in.fail("values nested too deeply")
		return false
	}
	d.nest++
	return true
}

func (d *decoder) leave() { d.nest-- }

// str reads a string value, resolving references to the string pool. A
// null string (encoding 0, or a pool reference to a null or to no string)
// is record.NullString, an empty one (encoding 1) "".
func (d *decoder) str(in *input) record.Value {
	code, text, ref := in.str(&d.sbuf, d.lim.MaxStringLen)
	switch code {
	case strPool:
		if !in.ok() {
			return record.Value{}
		}
		if c := d.ps.stringClass(); c != nil {
			v := d.resolve(c, 0, ref, stringLayout)
			if len(v) > 0 {
				return v[0]
			}
		}
		return record.NullString()
	case strUTF8, strChars, strLatin1:
		return record.StringValue(d.intern.Bytes(text))
	case strNull:
		return record.NullString()
	}
	return record.Value{}
}

// stringLayout reads the entries of the string pool.
var stringLayout *layout

func init() { stringLayout = primLayout(primString, nil) }

// readFields reads every field of a rendered class c (subs are their
// layouts) and stores the first column of field idx[i] in out[i].
func (d *decoder) readFields(in *input, c *Class, subs []*layout, idx []int, out []record.Value) {
	var tmp [8]record.Value
	for j, s := range subs {
		var dst []record.Value
		if n := len(s.cols); n <= len(tmp) {
			dst = tmp[:n]
			clear(dst)
		} else {
			dst = make([]record.Value, n)
		}
		s.read(d, in, dst)
		for i, k := range idx {
			if k == j && len(dst) > 0 {
				out[i] = dst[0]
			}
		}
	}
}

// skipField skips the wire form of field f.
func (d *decoder) skipField(in *input, f *Field) {
	switch {
	case f.Array:
		min := f.Class.minSize
		if f.ConstantPool {
			min = 1
		}
		n := in.count(min, d.lim.MaxArrayLen)
		if !d.enter(in) {
			return
		}
		for i := 0; i < n && in.ok(); i++ {
			if f.ConstantPool {
				in.varint()
			} else {
				d.skipClass(in, f.Class)
			}
		}
		d.leave()
	case f.ConstantPool:
		in.varint()
	default:
		d.skipClass(in, f.Class)
	}
}

// skipClass skips a value of class c.
func (d *decoder) skipClass(in *input, c *Class) {
	switch c.prim {
	case primBool, primByte:
		in.u8()
		return
	case primChar, primShort, primInt, primLong:
		in.varint()
		return
	case primFloat:
		in.bytes(4)
		return
	case primDouble:
		in.bytes(8)
		return
	case primString:
		in.skipStr(d.lim.MaxStringLen)
		return
	}
	if !d.enter(in) {
		return
	}
	for _, f := range c.Fields {
		if !in.ok() {
			break
		}
		d.skipField(in, f)
	}
	d.leave()
}

// clock converts ticks to nanoseconds with the first chunk's header, as
// the JDK does for every chunk of a file or stream.
type clock struct {
	startNanos, startTicks int64
	exact                  bool // one tick is one nanosecond
	div                    float64
}

func newClock(h Header) clock {
	return clock{
		startNanos: h.StartNanos,
		startTicks: h.StartTicks,
		exact:      h.TicksPerSecond == 1e9,
		div:        float64(h.TicksPerSecond) / 1e9,
	}
}

func (c *clock) timestamp(t int64) int64 {
	if t == math.MinInt64 {
		return t
	}
	if c.exact {
		return c.startNanos + (t - c.startTicks)
	}
	return c.startNanos + int64(float64(t-c.startTicks)/c.div)
}

func (c *clock) span(t int64) int64 {
	if t == math.MinInt64 || c.exact {
		return t
	}
	return int64(float64(t) / c.div)
}

// TypeSet hands out one *record.Type per event type name and field list,
// so that records of the same event type share their type across chunks,
// streams and JVMs. It is safe for concurrent use.
type TypeSet struct {
	mu    sync.Mutex
	types map[string][]*record.Type
}

// NewTypeSet returns an empty set.
func NewTypeSet() *TypeSet { return &TypeSet{types: map[string][]*record.Type{}} }

func (ts *TypeSet) get(name string, fields []record.Field) (*record.Type, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.types[name] {
		if slices.Equal(t.Fields, fields) {
			return t, nil
		}
	}
	t, err := record.NewType(name, fields...)
	if err != nil {
		return nil, err
	}
	ts.types[name] = append(ts.types[name], t)
	return t, nil
}

// Types returns every type handed out, in no particular order.
func (ts *TypeSet) Types() []*record.Type {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []*record.Type
	for _, l := range ts.types {
		out = append(out, l...)
	}
	return out
}

// columns returns how the fields of t were derived (for tests), or nil.
func (s *Stream) columns(t *record.Type) []column {
	for _, et := range s.events.dense {
		if et != nil && et.typ == t {
			return et.cols
		}
	}
	for _, et := range s.events.sparse {
		if et != nil && et.typ == t {
			return et.cols
		}
	}
	return nil
}

// metadataBody returns a metadata event from its metadata id on (the size,
// type and times before it differ from chunk to chunk).
func metadataBody(raw []byte) []byte {
	in := input{b: raw}
	for range 4 {
		in.varint()
	}
	if !in.ok() {
		return raw
	}
	return raw[in.pos:]
}
