package zico

import (
	"errors"
	"strconv"
)

// Default limits of a SymbolMap.
const (
	DefaultMaxSymbols     = 1 << 20
	DefaultMaxSymbolBytes = 64 << 20
)

// ErrSymbolLimit: a connection announced more symbols, or more bytes of
// symbol names, than its SymbolMap allows.
var ErrSymbolLimit = errors.New("symbol limit exceeded")

// maxDense bounds the ids kept in the dense table (agents number their
// symbols from 1 upwards).
const maxDense = 1 << 22

// SymbolMap is the symbol table of one connection: agent symbol id →
// name, filled from the Symbol objects of its DATA packets and kept
// across them, emptied by a new HELLO (zico starts a new ReceiverContext
// then, and the agent re-announces its symbols). A redefined id takes the
// new name, as in zico.
//
// A SymbolMap is not safe for concurrent use.
type SymbolMap struct {
	maxSymbols, maxBytes int

	dense  []symbol // ids 0 .. len-1
	sparse map[int32]string
	n      int // symbols held
	bytes  int // bytes of their names
}

type symbol struct {
	name string
	ok   bool
}

// NewSymbolMap returns an empty map holding at most maxSymbols symbols
// whose names total at most maxBytes (zero or less: the defaults).
func NewSymbolMap(maxSymbols, maxBytes int) *SymbolMap {
	if maxSymbols <= 0 {
		maxSymbols = DefaultMaxSymbols
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxSymbolBytes
	}
	return &SymbolMap{maxSymbols: maxSymbols, maxBytes: maxBytes}
}

// Len returns the number of symbols held.
func (m *SymbolMap) Len() int { return m.n }

// Reset empties the map.
func (m *SymbolMap) Reset() {
	clear(m.dense)
	m.dense = m.dense[:0]
	clear(m.sparse)
	m.n, m.bytes = 0, 0
}

// Lookup returns the name of id.
func (m *SymbolMap) Lookup(id int32) (string, bool) {
	if id >= 0 && int(id) < len(m.dense) {
		s := m.dense[id]
		return s.name, s.ok
	}
	name, ok := m.sparse[id]
	return name, ok
}

// Put maps id to name. It fails with ErrSymbolLimit when the map would
// grow over its limits.
func (m *SymbolMap) Put(id int32, name string) error {
	old, had := m.Lookup(id)
	n, b := m.n, m.bytes+len(name)-len(old)
	if !had {
		n++
	}
	if n > m.maxSymbols || b > m.maxBytes {
		return errors.Join(ErrSymbolLimit, errors.New("symbol "+strconv.Itoa(int(id))+": over "+
			strconv.Itoa(m.maxSymbols)+" symbols or "+strconv.Itoa(m.maxBytes)+" bytes of names"))
	}
	m.n, m.bytes = n, b
	switch {
	case id >= 0 && int(id) < len(m.dense):
		m.dense[id] = symbol{name, true}
	case id >= 0 && id < maxDense && int(id) <= 2*len(m.dense)+1024:
		for int(id) >= len(m.dense) {
			m.dense = append(m.dense, symbol{})
		}
		// Ids that were sparse move in.
		for k, v := range m.sparse {
			if k >= 0 && int(k) < len(m.dense) {
				m.dense[k] = symbol{v, true}
				delete(m.sparse, k)
			}
		}
		m.dense[id] = symbol{name, true}
	default:
		if m.sparse == nil {
			m.sparse = make(map[int32]string)
		}
		m.sparse[id] = name
	}
	return nil
}
