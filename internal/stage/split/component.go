package split

import "unsafe"

// comp identifies a component: a 64-bit FNV-1a hash of its name, so no
// table of names has to grow with the data (package:N names come from the
// classes seen). Two names colliding would need a 2^-64 accident.
type comp uint64

func compOf(name string) comp {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return comp(h)
}

// resolver maps signatures to components, caching the answers: decoders
// intern strings, so the same signature arrives as the same string again
// and again, and a direct-mapped cache keyed by the string's address
// answers most lookups without hashing its bytes. Not safe for concurrent
// use.
type resolver struct {
	b            *Boundaries
	classes, ops sigCache
}

// maxCachedSignatures bounds each signature table; when full it starts over.
const maxCachedSignatures = 1 << 16

type sigCache struct {
	direct [256]struct {
		s string
		c comp
	}
	m map[string]comp
}

func newResolver(b *Boundaries) *resolver { return &resolver{b: b} }

// event returns the component of a Before/After event: that of its
// classSignature, or of its operation signature's class when the class
// signature is empty.
func (r *resolver) event(classSig, opSig string) comp {
	if classSig != "" {
		return r.lookup(&r.classes, classSig, false)
	}
	return r.lookup(&r.ops, opSig, true)
}

// operation returns the component of an operation signature's class.
func (r *resolver) operation(opSig string) comp { return r.lookup(&r.ops, opSig, true) }

func (r *resolver) lookup(c *sigCache, s string, isOp bool) comp {
	if s == "" {
		return compOf(r.b.Component(""))
	}
	slot := &c.direct[(uintptr(unsafe.Pointer(unsafe.StringData(s)))>>3^uintptr(len(s)))&255]
	if slot.s == s { // equal addresses compare without reading the bytes
		return slot.c
	}
	id, ok := c.m[s]
	if !ok {
		class := s
		if isOp {
			class = classOfOperation(s)
		}
		id = compOf(r.b.Component(class))
		if c.m == nil || len(c.m) >= maxCachedSignatures {
			c.m = make(map[string]comp)
		}
		c.m[s] = id
	}
	slot.s, slot.c = s, id
	return id
}
