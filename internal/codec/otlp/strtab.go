package otlp

import (
	"hash/maphash"
	"sync"
)

// strtab interns strings in a table of fixed size: two-way sets chosen
// by a hash of the bytes, the most recently used way first. A string that
// is used again and again (keys, names, services, common values) stays
// and is allocated once; one that never comes back (an id in a path)
// costs its allocation and, in time, the place of another. Unlike a map
// it never grows or has to be emptied, and it stays small enough to
// remain in the processor's cache, which is where its speed comes from.
type strtab struct {
	slots []strslot // a power of two of them
}

// Table sizes: a decoder's own table is small (several decoders run at
// once and their tables should stay in the processor's caches together);
// the shared one holds more.
const (
	localStrings  = 2048
	sharedStrings = 16384
)

func newStrtab(n int) strtab { return strtab{slots: make([]strslot, n)} }

type strslot struct {
	h uint64
	s string
}

// maxIntern: longer strings are copied, not interned (they rarely
// repeat, and would crowd the table).
const maxIntern = 256

// seed hashes every table, so that a hash computed for one serves all.
var seed = maphash.MakeSeed()

// get returns a string equal to b, and whether it was in the table; a
// string not in the table comes from shared (nil: it is allocated) and is
// put in. The result never aliases b.
func (t *strtab) get(b []byte, shared *Strings) (string, bool) {
	if len(b) == 0 {
		return "", true
	}
	if len(b) > maxIntern {
		return string(b), false
	}
	h := maphash.Bytes(seed, b)
	if s, ok := t.lookup(h, b); ok {
		return s, true
	}
	var s string
	seen := false
	if shared != nil {
		s, seen = shared.get(h, b)
	} else {
		s = string(b)
	}
	t.put(h, s)
	return s, seen
}

// lookup finds b of hash h, making it the first way of its set.
func (t *strtab) lookup(h uint64, b []byte) (string, bool) {
	i := h & uint64(len(t.slots)-2) // the set's first way
	s0 := &t.slots[i]
	if s0.h == h && s0.s == string(b) {
		return s0.s, true
	}
	s1 := &t.slots[i+1]
	if s1.h == h && s1.s == string(b) {
		*s0, *s1 = *s1, *s0
		return s0.s, true
	}
	return "", false
}

// put makes s of hash h the first way of its set.
func (t *strtab) put(h uint64, s string) {
	i := h & uint64(len(t.slots)-2)
	t.slots[i+1] = t.slots[i]
	t.slots[i] = strslot{h, s}
}

// Strings is a table of interned strings that the decoders of one
// receiver share behind their own (Options.Strings), so that a string
// sent by many clients has one copy in the process, whichever decoder
// read it — sinks that cache by a string's address (the Kieker log's
// registry) find it again. It is safe for concurrent use; a decoder
// consults it only when its own table does not hold a string.
type Strings struct {
	mu sync.Mutex
	t  strtab
}

// NewStrings returns an empty shared table.
func NewStrings() *Strings { return &Strings{t: newStrtab(sharedStrings)} }

func (s *Strings) get(h uint64, b []byte) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if str, ok := s.t.lookup(h, b); ok {
		return str, true
	}
	str := string(b)
	s.t.put(h, str)
	return str, false
}

// len counts the strings held.
func (t *strtab) len() int {
	n := 0
	for i := range t.slots {
		if t.slots[i].s != "" {
			n++
		}
	}
	return n
}

// attrtab remembers span attributes by their bytes (a KeyValue message),
// so that an attribute sent again — most are: methods, routes, status
// codes, database statements — costs one look-up instead of reading its
// value and interning its key and value. Only attributes whose key and
// value were interned before are taken in, so values that never repeat
// do not displace the ones that do.
type attrtab struct {
	slots [attrtabSize]attrslot
}

const attrtabSize = 1024

type attrslot struct {
	h   uint64
	raw string
	a   attr
}

func newAttrtab() *attrtab { return &attrtab{} }

// get returns the attribute whose KeyValue bytes are raw, and the hash
// for put.
func (t *attrtab) get(raw []byte) (attr, uint64, bool) {
	if len(raw) > maxIntern {
		return attr{}, 0, false
	}
	h := maphash.Bytes(seed, raw)
	i := h & (attrtabSize - 2)
	s0 := &t.slots[i]
	if s0.h == h && s0.raw == string(raw) {
		return s0.a, h, true
	}
	s1 := &t.slots[i+1]
	if s1.h == h && s1.raw == string(raw) {
		*s0, *s1 = *s1, *s0
		return s0.a, h, true
	}
	return attr{}, h, false
}

// put remembers a, read from raw whose hash get returned.
func (t *attrtab) put(raw []byte, h uint64, a attr) {
	if len(raw) > maxIntern {
		return
	}
	i := h & (attrtabSize - 2)
	t.slots[i+1] = t.slots[i]
	t.slots[i] = attrslot{h, string(raw), a}
}
