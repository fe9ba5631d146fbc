package block

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"unsafe"
)

// Term is what a trace is found by in a block's term index (version 3):
// an attribute's key and value (of a span, its resource or scope, or an
// exception event), or a span's status message under the key "".
type Term struct {
	Key, Value string
}

// MaxTermValue is the longest value the term index keeps whole: a longer
// one is kept as its first MaxTermValue bytes, marked truncated, so that
// an index of unique long values (statements, messages) stays small. A
// truncated term may hold any text.
const MaxTermValue = 256

// termSet collects the writer's terms and each row's. A block of a
// busy host lists a term for each of its unique values (paths, user
// ids: about one a span), so the terms are kept without pointers: the
// values one after another in bytes, each term an entry of list found
// through an open-addressed table of list indexes by hash.
type termSet struct {
	keys   map[string]uint32 // the keys' ids: indexes in keyStr
	keyStr []string
	// keyAt remembers keys by their bytes' address (a body's keys are
	// its symbols: the same strings trace after trace), 1 + their id (0:
	// none); a key found there is still compared whole.
	keyAt [64]uint32
	bytes []byte    // the values
	list  []termEnt // term id → term
	table []uint32  // 1 + term id by hash (0: empty); len a power of 2
	seed  maphash.Seed
	// Row i's term ids (in Add order) are rowTerms' entries
	// rowEnd[i-1] to rowEnd[i].
	rowTerms termIDs
	rowEnd   []uint32
}

// termIDs is a list of term ids in segments of termSeg: a busy block's
// rows list millions, and one slice grown by doubling would be copied at
// each step (and allocated twice over) while the block is built.
type termIDs struct {
	segs [][]uint32
	n    uint32
}

const (
	termSegShift = 15
	termSeg      = 1 << termSegShift
)

func (l *termIDs) append(id uint32) {
	s := l.n >> termSegShift
	if int(s) == len(l.segs) {
		// The first segment grows as ids come (a small block lists a
		// few hundred), the others are made whole.
		l.segs = append(l.segs, make([]uint32, 0, min(termSeg, max(256, l.n))))
	}
	l.segs[s] = append(l.segs[s], id)
	l.n++
}

// each calls f with the ids from lo to hi, a segment's part at a time.
func (l *termIDs) each(lo, hi uint32, f func([]uint32)) {
	for lo < hi {
		s, o := lo>>termSegShift, lo%termSeg
		end := min(hi-lo, termSeg-o)
		f(l.segs[s][o : o+end])
		lo += end
	}
}

// termEnt is a term: its key's id and its value, bytes[off:off+n].
type termEnt struct {
	off  int
	key  uint32
	hash uint32 // the low bits of its hash
	// row is 1 + the row that listed the term last (a term is listed
	// once a row; the field fits in the entry's padding).
	row       uint32
	n         uint16
	truncated bool
}

// value returns e's value (a view of ts.bytes, valid until the next add).
func (ts *termSet) value(e *termEnt) []byte { return ts.bytes[e.off : e.off+int(e.n)] }

// termHash is the hash of a term in ts.table.
func (ts *termSet) termHash(key uint32, value string, truncated bool) uint64 {
	h := maphash.String(ts.seed, value) ^ uint64(key)*0x9e3779b97f4a7c15
	if truncated {
		h = ^h
	}
	return h
}

// init makes the set's table, with room for about distinct terms.
func (ts *termSet) init(distinct int) {
	ts.keys = map[string]uint32{}
	ts.seed = maphash.MakeSeed()
	size := 1024
	for size < 2*distinct {
		size *= 2
	}
	ts.table = make([]uint32, size)
	ts.list = slices.Grow(ts.list, distinct)
}

func (ts *termSet) add(terms []Term) {
	if ts.keys == nil {
		ts.init(0)
	}
	row := uint32(len(ts.rowEnd)) + 1
	for _, t := range terms {
		value, truncated := t.Value, false
		if len(value) > MaxTermValue {
			value, truncated = value[:MaxTermValue], true
		}
		id := ts.id(ts.key(t.Key), value, truncated)
		// A term once a row (the order of a row's terms does not matter).
		if e := &ts.list[id]; e.row != row {
			e.row = row
			ts.rowTerms.append(id)
		}
	}
	ts.rowEnd = append(ts.rowEnd, ts.rowTerms.n)
}

// key returns the id of key, adding it when new.
func (ts *termSet) key(key string) uint32 {
	slot := &ts.keyAt[(uintptr(unsafe.Pointer(unsafe.StringData(key)))>>3^uintptr(len(key)))%uintptr(len(ts.keyAt))]
	if *slot != 0 && ts.keyStr[*slot-1] == key {
		return *slot - 1
	}
	id, ok := ts.keys[key]
	if !ok {
		id = uint32(len(ts.keyStr))
		k := strings.Clone(key) // the caller's may be reused
		ts.keyStr = append(ts.keyStr, k)
		ts.keys[k] = id
	}
	*slot = id + 1
	return id
}

// id returns the id of the term, adding it when new (its value copied).
func (ts *termSet) id(key uint32, value string, truncated bool) uint32 {
	h := ts.termHash(key, value, truncated)
	mask := uint64(len(ts.table) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		x := ts.table[i]
		if x == 0 {
			id := uint32(len(ts.list))
			ts.list = append(ts.list, termEnt{off: len(ts.bytes), key: key, hash: uint32(h), n: uint16(len(value)), truncated: truncated})
			ts.bytes = append(ts.bytes, value...)
			ts.table[i] = id + 1
			if 2*len(ts.list) > len(ts.table) {
				ts.grow()
			}
			return id
		}
		e := &ts.list[x-1]
		if e.hash == uint32(h) && e.key == key && e.truncated == truncated && string(ts.value(e)) == value {
			return x - 1
		}
	}
}

// grow doubles the table.
func (ts *termSet) grow() {
	ts.table = make([]uint32, 2*len(ts.table))
	mask := uint64(len(ts.table) - 1)
	for id := range ts.list {
		e := &ts.list[id]
		h := ts.termHash(e.key, string(ts.value(e)), e.truncated)
		i := h & mask
		for ts.table[i] != 0 {
			i = (i + 1) & mask
		}
		ts.table[i] = uint32(id) + 1
	}
}

// appendTerms appends the term index: perm[i] is the Add-order number of
// the index's row i.
func (ts *termSet) appendTerms(dst []byte, perm []uint32) []byte {
	// The postings of every term, in row order: counted, then filled.
	n := len(ts.list)
	count := make([]uint32, n+1)
	ts.rowTerms.each(0, ts.rowTerms.n, func(ids []uint32) {
		for _, id := range ids {
			count[id+1]++
		}
	})
	for i := 1; i <= n; i++ {
		count[i] += count[i-1]
	}
	post := make([]uint32, ts.rowTerms.n)
	fill := slices.Clone(count[:n])
	var row uint32
	put := func(ids []uint32) {
		for _, id := range ids {
			post[fill[id]] = row
			fill[id]++
		}
	}
	for i, old := range perm {
		lo := uint32(0)
		if old > 0 {
			lo = ts.rowEnd[old-1]
		}
		row = uint32(i)
		ts.rowTerms.each(lo, ts.rowEnd[old], put)
	}
	order := make([]uint32, n)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		x, y := &ts.list[a], &ts.list[b]
		if c := strings.Compare(ts.keyStr[x.key], ts.keyStr[y.key]); c != 0 {
			return c
		}
		if c := bytes.Compare(ts.value(x), ts.value(y)); c != 0 {
			return c
		}
		switch {
		case x.truncated == y.truncated:
			return 0
		case y.truncated:
			return -1
		}
		return 1
	})
	// Room for the section at once (about: a posting's delta takes 1 to
	// 3 bytes): it grew by doubling, each step a copy.
	est := len(ts.bytes) + 4*n + 2*int(ts.rowTerms.n)
	for _, k := range ts.keyStr {
		est += len(k) + 4
	}
	dst = slices.Grow(dst, est)
	keys := 0
	for i, id := range order {
		if i == 0 || ts.list[id].key != ts.list[order[i-1]].key {
			keys++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(keys))
	for i := 0; i < len(order); {
		kid := ts.list[order[i]].key
		j := i
		for j < len(order) && ts.list[order[j]].key == kid {
			j++
		}
		key := ts.keyStr[kid]
		dst = binary.AppendUvarint(dst, uint64(len(key)))
		dst = append(dst, key...)
		dst = binary.AppendUvarint(dst, uint64(j-i))
		for _, id := range order[i:j] {
			t := &ts.list[id]
			l := uint64(t.n) << 1
			if t.truncated {
				l |= 1
			}
			dst = binary.AppendUvarint(dst, l)
			dst = append(dst, ts.value(t)...)
			rows := post[count[id]:count[id+1]]
			dst = binary.AppendUvarint(dst, uint64(len(rows)))
			prev := uint32(0)
			for k, r := range rows {
				if k == 0 {
					dst = binary.AppendUvarint(dst, uint64(r))
				} else {
					dst = binary.AppendUvarint(dst, uint64(r-prev))
				}
				prev = r
			}
		}
		i = j
	}
	return dst
}

// Terms is a block's term index, read: every term of the block's traces
// with the index rows (numbers in the index's order) that hold it. It
// keeps the section's bytes; rows are decoded when asked for.
type Terms struct {
	raw   []byte
	keys  []termGroup
	terms []termRef
}

type termGroup struct {
	key         string
	first, next uint32 // its terms are terms[first:next]
}

type termRef struct {
	valOff, valLen uint32
	postOff, count uint32 // the rows' uvarints start at raw[postOff]
	truncated      bool
}

// Size returns the memory the index takes, roughly.
func (t *Terms) Size() int64 {
	if t == nil {
		return 0
	}
	n := int64(len(t.raw)) + 20*int64(len(t.terms)) + 48
	for _, g := range t.keys {
		n += int64(len(g.key)) + 24
	}
	return n
}

// Len returns the number of terms.
func (t *Terms) Len() int { return len(t.terms) }

// Term returns term i: its key, its value (a slice of the index's bytes:
// not to be changed) and whether the value is truncated.
func (t *Terms) Term(i int) (key string, value []byte, truncated bool) {
	r := &t.terms[i]
	g := sortSearchGroup(t.keys, uint32(i))
	return t.keys[g].key, t.raw[r.valOff : r.valOff+r.valLen], r.truncated
}

func sortSearchGroup(keys []termGroup, i uint32) int {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if keys[m].next <= i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Key returns the range [first, next) of the terms of key (empty when
// the block has none).
func (t *Terms) Key(key string) (first, next int) {
	i, ok := slices.BinarySearchFunc(t.keys, key, func(g termGroup, k string) int { return strings.Compare(g.key, k) })
	if !ok {
		return 0, 0
	}
	return int(t.keys[i].first), int(t.keys[i].next)
}

// Value returns term i's value and whether it is truncated.
func (t *Terms) Value(i int) ([]byte, bool) {
	r := &t.terms[i]
	return t.raw[r.valOff : r.valOff+r.valLen], r.truncated
}

// Lookup returns the terms a trace with the attribute key=value is listed
// under: the term itself, or, for a value longer than MaxTermValue, the
// truncated term of its first bytes. ok is false when there is none.
func (t *Terms) Lookup(key, value string) (i int, ok bool) {
	first, next := t.Key(key)
	want, trunc := value, false
	if len(want) > MaxTermValue {
		want, trunc = want[:MaxTermValue], true
	}
	j, found := slices.BinarySearchFunc(t.terms[first:next], want, func(r termRef, v string) int {
		return strings.Compare(string(t.raw[r.valOff:r.valOff+r.valLen]), v)
	})
	for j += first; found && j < next; j++ {
		r := &t.terms[j]
		if string(t.raw[r.valOff:r.valOff+r.valLen]) != want {
			break
		}
		if r.truncated == trunc {
			return j, true
		}
	}
	return 0, false
}

// Rows calls f with the index rows of term i, in ascending order.
func (t *Terms) Rows(i int, f func(row uint32)) {
	r := &t.terms[i]
	p := t.raw[r.postOff:]
	row := uint64(0)
	for k := range r.count {
		v, n := binary.Uvarint(p)
		p = p[n:]
		if k == 0 {
			row = v
		} else {
			row += v
		}
		f(uint32(row))
	}
}

// Count returns the number of rows of term i.
func (t *Terms) Count(i int) int { return int(t.terms[i].count) }

// ParseTerms checks and decodes the term index section's stored bytes
// (nil for a block of version 2, which has none): every row number is
// checked against the footer's trace count, so Rows needs no checks.
func (f Footer) ParseTerms(stored []byte) (*Terms, error) {
	if f.Version < 3 {
		return nil, nil
	}
	raw, err := f.Terms.unpack(stored, "term index")
	if err != nil {
		return nil, err
	}
	r := &reader{p: raw}
	t := &Terms{raw: raw}
	nkeys := r.count("term index keys", 2)
	t.keys = make([]termGroup, 0, nkeys)
	for range nkeys {
		kl := r.uvarint("term key length")
		key := string(r.bytes(int(min(kl, math.MaxInt32)), "term key"))
		if r.err == nil && len(t.keys) > 0 && t.keys[len(t.keys)-1].key >= key {
			r.fail("term keys out of order")
		}
		n := r.count("terms of a key", 2)
		g := termGroup{key: key, first: uint32(len(t.terms))}
		var prev []byte
		prevTrunc := false
		for k := range n {
			l := r.uvarint("term value length")
			off := r.off
			v := r.bytes(int(min(l>>1, MaxTermValue+1)), "term value")
			trunc := l&1 != 0
			if r.err == nil && (l>>1 > MaxTermValue || trunc && l>>1 != MaxTermValue) {
				r.fail("term value length")
			}
			if r.err == nil && k > 0 {
				c := bytes.Compare(prev, v)
				if c > 0 || c == 0 && (prevTrunc || !trunc) {
					r.fail("term values out of order")
				}
			}
			prev, prevTrunc = v, trunc
			cnt := r.count("term rows", 1)
			if r.err == nil && (cnt == 0 || cnt > int(f.Traces)) {
				r.fail("term rows count")
			}
			postOff := r.off
			row := uint64(0)
			for j := range cnt {
				d := r.uvarint("term row")
				if j > 0 && d == 0 {
					r.fail("term rows out of order")
				}
				row += d
				if r.err == nil && row >= uint64(f.Traces) {
					r.fail("term row beyond the index")
				}
			}
			if r.err != nil {
				return nil, r.err
			}
			t.terms = append(t.terms, termRef{valOff: uint32(off), valLen: uint32(len(v)), postOff: uint32(postOff), count: uint32(cnt), truncated: trunc})
		}
		if r.err != nil {
			return nil, r.err
		}
		g.next = uint32(len(t.terms))
		if g.next == g.first {
			return nil, corruptf("term index: key %q without terms", key)
		}
		t.keys = append(t.keys, g)
	}
	if r.err == nil && r.off != len(raw) {
		r.fail("term index: trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return t, nil
}
