package block

import (
	"encoding/binary"
	"math"
)

// Bloom is a Bloom filter over 64-bit hashes: m bits, k probes by double
// hashing. Blocks carry one over the attribute pairs and the trigrams of
// their strings, so a search skips blocks that cannot match without
// decompressing them, and one over their trace ids.
type Bloom struct {
	k    uint32
	bits []uint64
}

// bloomBitsPerItem gives a false-positive rate of about 1 %.
const bloomBitsPerItem = 10

// HashString hashes s for the filters. The hash must be the same in every
// process that reads the store, so it is FNV-1a based, not seeded.
func HashString(s string) uint64 { return hashMix(fnv(fnvOffset, s)) }

// HashPair is HashString(key + "\x00" + value), without building the
// string.
func HashPair(key, value string) uint64 {
	return hashMix(fnv(fnv(fnvOffset, key)*fnvPrime, value)) // the 0 byte: h ^= 0; h *= fnvPrime
}

const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

// fnv continues FNV-1a hash h over s.
func fnv(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// hashMix is the final mix: it spreads FNV's low-entropy low bits.
func hashMix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// NewBloom returns a filter sized for items at about 1 % false positives.
func NewBloom(items int) *Bloom {
	if items < 1 {
		items = 1
	}
	m := uint64(items) * bloomBitsPerItem
	words := (m + 63) / 64
	return &Bloom{k: 7, bits: make([]uint64, words)}
}

// Add adds a hash.
func (b *Bloom) Add(h uint64) {
	m := uint64(len(b.bits)) * 64
	h1, h2 := h, h>>32|h<<32
	for i := uint32(0); i < b.k; i++ {
		p := (h1 + uint64(i)*h2) % m
		b.bits[p/64] |= 1 << (p % 64)
	}
}

// Has reports whether the filter may hold h (a nil or empty filter holds
// everything).
func (b *Bloom) Has(h uint64) bool {
	if b == nil || len(b.bits) == 0 {
		return true
	}
	m := uint64(len(b.bits)) * 64
	h1, h2 := h, h>>32|h<<32
	for i := uint32(0); i < b.k; i++ {
		p := (h1 + uint64(i)*h2) % m
		if b.bits[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// Size returns the filter's bytes in memory.
func (b *Bloom) Size() int64 { return 8 * int64(len(b.bits)) }

// HasAll reports whether the filter may hold every one of hs.
func (b *Bloom) HasAll(hs []uint64) bool {
	for _, h := range hs {
		if !b.Has(h) {
			return false
		}
	}
	return true
}

// Marshal appends the filter: k (uvarint), words (uvarint), the words
// (little-endian u64 each).
func (b *Bloom) Marshal(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(b.k))
	dst = binary.AppendUvarint(dst, uint64(len(b.bits)))
	for _, w := range b.bits {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// UnmarshalBloom reads a filter Marshal wrote and returns the bytes after
// it.
func UnmarshalBloom(p []byte) (*Bloom, []byte, bool) {
	k, n := binary.Uvarint(p)
	if n <= 0 || k == 0 || k > 32 {
		return nil, nil, false
	}
	p = p[n:]
	words, n := binary.Uvarint(p)
	if n <= 0 || words > math.MaxInt32 || uint64(len(p)-n) < words*8 {
		return nil, nil, false
	}
	p = p[n:]
	b := &Bloom{k: uint32(k), bits: make([]uint64, words)}
	for i := range b.bits {
		b.bits[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	return b, p[8*words:], true
}
