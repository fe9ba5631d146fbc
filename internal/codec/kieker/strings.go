package kieker

import (
	"fmt"
	"iter"
	"strings"
	"unsafe"
)

// DefaultMaxRegistryEntries is the default limit on the entries of a Strings
// table.
const DefaultMaxRegistryEntries = 1_000_000

// DefaultMaxRegistryBytes is the default limit on the string bytes of the
// table a Decoder creates for itself (an inline TCP connection's registry).
const DefaultMaxRegistryBytes = 16 << 20

// denseLimit bounds the ids kept in the dense slice of a Strings table; the
// slice grows only as far as the ids actually used, and only while it stays
// within a small multiple of the number of entries, so a stray huge id
// costs a map entry instead of a huge slice.
const denseLimit = 1 << 22

// Strings is the decoding side of a Kieker string registry: the id → string
// table of one writer (one log directory, one connection). Ids are int32.
// Kieker ≥1.13 numbers from 0 per writer, ≤1.12 used a global registry (ids
// may start anywhere and skip), the Python pack starts at 1; small ids live
// in a dense slice so the hot path is one index, the rest in a map.
//
// A Strings table is not safe for concurrent use.
type Strings struct {
	max      int
	n        int
	maxBytes int64 // 0: no limit
	bytes    int64
	dense    []stringEntry
	sparse   map[int32]string
}

type stringEntry struct {
	s  string
	ok bool
}

// NewStrings returns an empty table holding at most maxEntries strings
// (DefaultMaxRegistryEntries when maxEntries <= 0).
func NewStrings(maxEntries int) *Strings {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxRegistryEntries
	}
	return &Strings{max: maxEntries}
}

// SetMaxBytes bounds the total byte length of the registered strings;
// n <= 0 removes the bound (a new table has none).
func (t *Strings) SetMaxBytes(n int) { t.maxBytes = int64(max(n, 0)) }

// Bytes returns the total byte length of the registered strings.
func (t *Strings) Bytes() int64 { return t.bytes }

// Len returns the number of registered strings.
func (t *Strings) Len() int { return t.n }

// Get returns the string registered under id.
func (t *Strings) Get(id int32) (string, bool) {
	if uint32(id) < uint32(len(t.dense)) {
		if e := &t.dense[id]; e.ok {
			return e.s, true
		}
	}
	if t.sparse == nil {
		return "", false
	}
	s, ok := t.sparse[id]
	return s, ok
}

// stringsView is a frames-only batch's view of a Strings table
// (record.FrameStrings): the dense entries as they were when it was made.
// Later registrations write entries it does not read (ids that were not
// registered then, or a grown copy of the slice), so it is safe to read
// from another goroutine while the table's owner goes on; the ids of the
// batch's frames were registered before it was made.
type stringsView struct {
	dense []stringEntry
	n     int // the table's Len when the view was made
}

func (t *Strings) view() *stringsView {
	return &stringsView{dense: t.dense[:len(t.dense):len(t.dense)], n: t.n}
}

// String returns the string registered under id when the view was made.
func (v *stringsView) String(id int32) (string, bool) {
	if uint32(id) < uint32(len(v.dense)) {
		e := &v.dense[id]
		return e.s, e.ok
	}
	return "", false
}

// Set registers s under id. Registering the same string again is harmless;
// registering a different string under a known id is an error wrapping
// ErrConflict, and exceeding the entry or byte limit an error wrapping
// ErrLimit.
func (t *Strings) Set(id int32, s string) error {
	if old, ok := t.Get(id); ok {
		if old == s {
			return nil
		}
		return fmt.Errorf("string id %d already registered as %q, not %q: %w", id, clip(old), clip(s), ErrConflict)
	}
	if t.max == 0 {
		t.max = DefaultMaxRegistryEntries
	}
	if t.n >= t.max {
		return fmt.Errorf("string id %d: registry holds %d entries, the limit: %w", id, t.n, ErrLimit)
	}
	if t.maxBytes > 0 && t.bytes+int64(len(s)) > t.maxBytes {
		return fmt.Errorf("string id %d: registry holds %d bytes of strings, %d more exceed the limit %d (max_registry_bytes): %w", id, t.bytes, len(s), t.maxBytes, ErrLimit)
	}
	t.n++
	t.bytes += int64(len(s))
	if id >= 0 && int(id) < len(t.dense) {
		t.dense[id] = stringEntry{s: s, ok: true}
		return nil
	}
	if id >= 0 && id < denseLimit && int(id) < 2*t.n+1024 {
		need := int(id) + 1
		if need > cap(t.dense) {
			c := 2 * cap(t.dense)
			if c < 64 {
				c = 64
			}
			for c < need {
				c *= 2
			}
			grown := make([]stringEntry, len(t.dense), c)
			copy(grown, t.dense)
			t.dense = grown
		}
		t.dense = t.dense[:need]
		t.dense[id] = stringEntry{s: s, ok: true}
		return nil
	}
	if t.sparse == nil {
		t.sparse = make(map[int32]string)
	}
	t.sparse[id] = s
	return nil
}

// All yields every registered id and string: the dense ids in increasing
// order, then the others in no particular order.
func (t *Strings) All() iter.Seq2[int32, string] {
	return func(yield func(int32, string) bool) {
		for i, e := range t.dense {
			if e.ok && !yield(int32(i), e.s) {
				return
			}
		}
		for id, s := range t.sparse {
			if !yield(id, s) {
				return
			}
		}
	}
}

// clip shortens a string for an error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// Entry is one registry entry: a string and the id assigned to it.
type Entry struct {
	ID    int32
	Value string
}

// Registry is the encoding side of a Kieker string registry: it assigns ids
// from 0 in order of first use, as Kieker's WriterRegistry does. A Registry
// is not safe for concurrent use.
type Registry struct {
	ids map[string]int32
	// recent caches ids by the string's data pointer and length: decoders
	// intern strings, so the same value arrives as the same Go string again
	// and again, and a pointer compare is much cheaper than hashing it.
	// Each slot keeps its string, so its memory cannot be reused for
	// another value while cached.
	recent [registryCache]cached
}

const registryCache = 1024

type cached struct {
	s  string
	id int32
}

// ID returns the id of s, assigning the next one when s is new (isNew).
func (r *Registry) ID(s string) (id int32, isNew bool) {
	p := unsafe.StringData(s)
	slot := &r.recent[(uintptr(unsafe.Pointer(p))>>4^uintptr(len(s)))%registryCache]
	if len(s) > 0 && unsafe.StringData(slot.s) == p && len(slot.s) == len(s) {
		return slot.id, false
	}
	if id, ok := r.ids[s]; ok {
		if len(s) > 0 {
			*slot = cached{s, id}
		}
		return id, false
	}
	if r.ids == nil {
		r.ids = make(map[string]int32)
	}
	id = int32(len(r.ids))
	// A copy: s may point into a larger buffer (a packed trace's bytes,
	// a read buffer) that the registry must not keep.
	r.ids[strings.Clone(s)] = id
	return id, true
}

// Lookup returns the id of s without assigning one.
func (r *Registry) Lookup(s string) (int32, bool) {
	id, ok := r.ids[s]
	return id, ok
}

// Len returns the number of assigned ids.
func (r *Registry) Len() int { return len(r.ids) }
