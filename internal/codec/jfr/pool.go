package jfr

import (
	"io"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// poolSet holds a chunk's constant pools: the bytes of its checkpoint
// events and, per type and key, where the entry's value starts. Values are
// decoded when an event first refers to them and cached.
type poolSet struct {
	meta    *Metadata
	buf     []byte                     // checkpoint events, one after the other
	entries map[int64]map[int64]uint32 // class id → key → offset in buf
	cache   map[cacheKey][]record.Value
	partial map[cacheKey][]record.Value // values with references to missing constants
	frames  map[frameKey]string
	methods map[methodKey]string
	str     *Class    // java.lang.String in strMeta
	strMeta *Metadata // the metadata str was looked up in
}

func (ps *poolSet) stringClass() *Class {
	if ps.strMeta != ps.meta {
		ps.str, ps.strMeta = ps.meta.ClassByName("java.lang.String"), ps.meta
	}
	return ps.str
}

type cacheKey struct {
	class  int64
	key    int64
	budget int
}

type frameKey struct {
	method string
	line   int64
}

type methodKey struct{ class, name, descriptor string }

func newPoolSet(m *Metadata) *poolSet {
	return &poolSet{
		meta:    m,
		entries: map[int64]map[int64]uint32{},
		cache:   map[cacheKey][]record.Value{},
		partial: map[cacheKey][]record.Value{},
		frames:  map[frameKey]string{},
		methods: map[methodKey]string{},
	}
}

// readEvent reads the event at chunk offset off whose bytes are complete
// up to end: its size, then its bytes into dst.
// what names the event in messages.
func readEvent(src io.ReaderAt, base, off, end int64, limit int, dst []byte, what string) ([]byte, error) {
	var head [9]byte
	n := min(int64(len(head)), end-off)
	if n <= 0 {
		return nil, at(base, off, "%s beyond the chunk's end %d", what, end)
	}
	if _, err := src.ReadAt(head[:n], off); err != nil {
		return nil, readErr(base, off, what, err)
	}
	in := input{b: head[:n]}
	size := in.varint()
	if !in.ok() || size == 0 {
		return nil, at(base, off, "%s: bad event size", what)
	}
	if size > uint64(end-off) {
		return nil, at(base, off, "%s of %d bytes runs past the chunk's end at %d", what, size, base+end)
	}
	if size > uint64(limit) {
		return nil, at(base, off, "%s of %d bytes exceeds the limit of %d", what, size, limit)
	}
	dst = append(dst[:0], make([]byte, size)...)
	if _, err := src.ReadAt(dst, off); err != nil {
		return nil, readErr(base, off, what, err)
	}
	return dst, nil
}

func readErr(base, off int64, what string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return at(base, off, "%s: chunk is truncated", what)
	}
	return &FormatError{Offset: base + off, Reason: what, Err: err}
}

// addCheckpoints reads the checkpoint events from newest back along the
// chain to stop (exclusive; 0 for the whole chain), then indexes them
// oldest first, so the oldest definition of a key wins as in the JDK.
func (c *Chunk) addCheckpoints(newest, stop int64) error {
	if newest == 0 || newest == stop {
		return nil
	}
	var chain []int64
	var sizes []int64
	for off := newest; off != stop; {
		if len(chain) >= c.s.lim.MaxCheckpoints {
			return at(c.base, off, "more than %d checkpoint events", c.s.lim.MaxCheckpoints)
		}
		ev, err := readEvent(c.src, c.base, off, c.end, c.s.lim.MaxEventSize, c.s.scratchEvent, "checkpoint")
		if err != nil {
			return err
		}
		c.s.scratchEvent = ev
		in := input{b: ev}
		in.varint()
		if typ := in.varint(); in.ok() && typ != 1 {
			return at(c.base, off, "checkpoint chain leads to an event of type %d", typ)
		}
		in.varint()
		in.varint()
		delta := in.i64()
		if !in.ok() {
			return at(c.base, off+int64(in.failAt), "checkpoint: %s", in.reason)
		}
		chain = append(chain, off)
		sizes = append(sizes, int64(len(ev)))
		if delta == 0 {
			break
		}
		next := off + delta
		if delta > 0 || next < HeaderSize || (stop != 0 && next < stop) {
			return at(c.base, off, "checkpoint refers to a previous one at %d", c.base+next)
		}
		off = next
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if err := c.indexCheckpoint(chain[i], sizes[i]); err != nil {
			return err
		}
	}
	clear(c.pools.partial)
	return nil
}

// indexCheckpoint copies one checkpoint event into the pool buffer and
// records where each entry's value starts.
func (c *Chunk) indexCheckpoint(off, size int64) error {
	ps := c.pools
	if int64(len(ps.buf))+size > c.s.lim.MaxPoolBytes {
		return at(c.base, off, "constant pools exceed the limit of %d bytes", c.s.lim.MaxPoolBytes)
	}
	start := len(ps.buf)
	ps.buf = append(ps.buf, make([]byte, size)...)
	if _, err := c.src.ReadAt(ps.buf[start:], off); err != nil {
		ps.buf = ps.buf[:start]
		return readErr(c.base, off, "checkpoint", err)
	}
	in := input{b: ps.buf[:start+int(size)], pos: start}
	in.varint() // size
	in.varint() // type id
	in.varint() // start ticks
	in.varint() // duration ticks
	in.varint() // delta
	in.u8()     // checkpoint type
	npools := in.count(2, 1<<20)
	d := c.s.dec
	for i := 0; i < npools && in.ok(); i++ {
		id := in.i64()
		if !in.ok() {
			break
		}
		cls := ps.meta.Class(id)
		if cls == nil {
			return at(c.base, off+int64(in.pos-start), "constant pool of unknown type id %d", id)
		}
		n := in.count(1, 1<<30)
		m := ps.entries[id]
		if m == nil {
			m = make(map[int64]uint32, n)
			ps.entries[id] = m
		}
		for j := 0; j < n && in.ok(); j++ {
			key := in.i64()
			pos := in.pos
			d.skipClass(&in, cls)
			if _, dup := m[key]; !dup && in.ok() {
				m[key] = uint32(pos)
			}
		}
		if !in.ok() {
			return at(c.base, off+int64(in.failAt-start), "constant pool %s: %s", cls.Name, in.reason)
		}
	}
	if !in.ok() {
		return at(c.base, off+int64(in.failAt-start), "checkpoint: %s", in.reason)
	}
	return nil
}

// resolve returns the values (the columns of l) of the constant with the
// given key in the pool of class c, decoding it on first use. A key that
// the chunk does not define is looked up in the previous chunk's pools (a
// long event that began before the chunk rotated refers to them); a key
// found nowhere gives zero values (JFR's null).
func (d *decoder) resolve(c *Class, budget int, key int64, l *layout) []record.Value {
	ps := d.ps
	ck := cacheKey{c.ID, key, budget}
	if v, ok := ps.cache[ck]; ok {
		return v
	}
	if v, ok := ps.partial[ck]; ok {
		d.misses++ // still incomplete: what refers to it waits too
		return v
	}
	pos, ok := ps.entries[c.ID][key]
	if !ok {
		if key != 0 {
			d.misses++
		}
		if ps == d.cur && d.prev != nil {
			// Within one recording type ids keep their meaning; the check
			// guards against a recording made of several JVMs' chunks.
			if _, ok := d.prev.entries[c.ID][key]; ok && sameClass(d.prev.meta.Class(c.ID), c) {
				d.stats.Fallbacks++
				d.ps = d.prev
				v := d.resolve(c, budget, key, l)
				d.ps = ps
				return v
			}
		}
		if key != 0 {
			d.stats.Unresolved++
		}
		return nil
	}
	v := make([]record.Value, len(l.cols))
	if d.nest >= maxNest {
		d.stats.BadConstants++
		return v
	}
	d.nest++
	misses := d.misses
	in := input{b: ps.buf, pos: int(pos)}
	l.read(d, &in, v)
	d.nest--
	if !in.ok() {
		d.stats.BadConstants++
		clear(v)
	}
	if d.misses == misses {
		ps.cache[ck] = v
	} else {
		// It refers to constants not (yet) defined: a live chunk's later
		// checkpoints may define them, so it is decoded again then.
		ps.partial[ck] = v
	}
	return v
}

// className renders a class name as Class.getName() does.
func (d *decoder) className(s string) string {
	if strings.IndexByte(s, '/') < 0 {
		return s
	}
	d.buf = append(d.buf[:0], s...)
	for i, c := range d.buf {
		if c == '/' {
			d.buf[i] = '.'
		}
	}
	return d.intern.Bytes(d.buf)
}

func (d *decoder) method(class, name, descriptor string) string {
	k := methodKey{class, name, descriptor}
	if s, ok := d.ps.methods[k]; ok {
		return s
	}
	d.buf = formatMethod(d.buf[:0], class, name, descriptor)
	s := d.intern.Bytes(d.buf)
	d.ps.methods[k] = s
	return s
}

func (d *decoder) frame(method string, line int64) string {
	k := frameKey{method, line}
	if s, ok := d.ps.frames[k]; ok {
		return s
	}
	d.buf = appendFrame(d.buf[:0], method, line)
	s := d.intern.Bytes(d.buf)
	d.ps.frames[k] = s
	return s
}

func sameClass(a, b *Class) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.Name != b.Name || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i, f := range a.Fields {
		g := b.Fields[i]
		if f.Name != g.Name || f.Class.Name != g.Class.Name || f.ConstantPool != g.ConstantPool || f.Array != g.Array {
			return false
		}
	}
	return true
}
