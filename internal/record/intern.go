package record

// Interner turns byte slices into strings, returning the same string for
// the same bytes so that repeated values (operation signatures, host names)
// are allocated once per connection instead of once per record.
//
// It is bounded: strings longer than MaxLen are not interned, and when the
// table holds MaxEntries strings it is emptied and starts over. An Interner
// is not safe for concurrent use; give each connection its own.
type Interner struct {
	MaxEntries int // default 65536
	MaxLen     int // default 1024

	m map[string]string
}

// Bytes returns a string equal to b. The result never aliases b.
func (in *Interner) Bytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	maxLen := in.MaxLen
	if maxLen == 0 {
		maxLen = 1024
	}
	if len(b) > maxLen {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok { // the compiler does not allocate for this lookup
		return s
	}
	maxEntries := in.MaxEntries
	if maxEntries == 0 {
		maxEntries = 65536
	}
	if in.m == nil {
		in.m = make(map[string]string)
	} else if len(in.m) >= maxEntries {
		clear(in.m)
	}
	s := string(b)
	in.m[s] = s
	return s
}

// Len returns the number of interned strings.
func (in *Interner) Len() int { return len(in.m) }
