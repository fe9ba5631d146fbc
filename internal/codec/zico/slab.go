package zico

// slab hands out zeroed, contiguous runs of T from blocks it keeps for
// reuse, so that decoding the next payload allocates nothing once the
// blocks have grown to the size of the payloads. Runs never move: a
// pointer into one stays valid until reset.
type slab[T any] struct {
	blocks [][]T
	cur    int // block being filled
	off    int // next free element in it
}

const (
	slabBlock  = 256     // elements of a regular block
	slabRetain = 1 << 16 // elements kept over a reset; more are dropped
)

// alloc returns n zeroed elements (a non-nil empty slice for n = 0).
func (s *slab[T]) alloc(n int) []T {
	if n == 0 {
		return make([]T, 0)
	}
	for s.cur < len(s.blocks) {
		b := s.blocks[s.cur]
		if s.off+n <= len(b) {
			r := b[s.off : s.off+n : s.off+n]
			s.off += n
			clear(r)
			return r
		}
		s.cur++
		s.off = 0
	}
	b := make([]T, max(slabBlock, n))
	s.blocks = append(s.blocks, b)
	s.cur, s.off = len(s.blocks)-1, n
	return b[:n:n]
}

// one returns a pointer to one zeroed element.
func (s *slab[T]) one() *T { return &s.alloc(1)[0] }

// reset makes every block free again, dropping blocks beyond slabRetain
// elements (a huge payload does not pin its memory to the connection).
func (s *slab[T]) reset() {
	kept := 0
	for i, b := range s.blocks {
		if kept+len(b) > slabRetain {
			clear(s.blocks[i:])
			s.blocks = s.blocks[:i]
			break
		}
		kept += len(b)
	}
	s.cur, s.off = 0, 0
}
