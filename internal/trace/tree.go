package trace

import (
	"cmp"
	"fmt"
	"slices"
)

// The tree -----------------------------------------------------------------

// tree orders t's spans (roots by start, each followed by its subtree,
// children by start then position), fills Parent and Depth, and reports
// missing parents, duplicate ids, cycles and negative durations. A span
// equal to an earlier one with its id (a span record delivered twice) is
// dropped; tree returns how many were.
func tree(t *Trace) (dups int) {
	var sc treeScratch
	return sc.tree(t)
}

// treeScratch is the memory tree works in, kept by an assembler from one
// trace to the next, so that building a tree allocates nothing once it
// has built one as large.
type treeScratch struct {
	idx   map[SpanID]int32 // span id → index, for traces of more than smallTree spans
	ids   []SpanID         // the span ids, for smaller ones
	ints  []int32
	state []uint8
	path  []int32
	spans []Span // t.Spans while tree runs (walk reads it)
	kids  []int32
	first []int32
	newAt []int32
}

// smallTree: a trace of at most this many spans finds ids by a scan, not
// a map.
const smallTree = 16

// find returns the index of span id, or -1.
func (sc *treeScratch) find(id SpanID) int32 {
	if sc.idx == nil {
		for i, x := range sc.ids {
			if x == id {
				return int32(i)
			}
		}
		return -1
	}
	if i, ok := sc.idx[id]; ok {
		return i
	}
	return -1
}

func (sc *treeScratch) put(id SpanID, i int) {
	if sc.idx == nil {
		sc.ids = append(sc.ids, id)
		return
	}
	sc.idx[id] = int32(i)
}

func (sc *treeScratch) tree(t *Trace) (dups int) {
	n0 := len(t.Spans)
	sc.ids = sc.ids[:0]
	if n0 > smallTree {
		if sc.idx == nil {
			sc.idx = make(map[SpanID]int32, n0)
		}
	} else {
		sc.idx = nil
	}
	defer func() {
		if len(sc.idx) > 4096 {
			sc.idx = nil // do not keep a huge trace's map
		} else {
			clear(sc.idx)
		}
	}()
	kept := t.Spans[:0]
	for i := range t.Spans {
		s := &t.Spans[i] // moved to kept[len(kept)] (≤ i) when kept
		if j := sc.find(s.SpanID); j >= 0 {
			if sameSpan(&kept[j], s) {
				dups++
				continue
			}
			// Span ids are unique within a trace: the second gets one of
			// its own (children name the first).
			id := s.SpanID
			for k := uint64(i + 1); ; k++ {
				s.SpanID = SpanID(uint64(id) ^ k*0x9e3779b97f4a7c15)
				if sc.find(s.SpanID) < 0 && s.SpanID != 0 {
					break
				}
			}
			t.Broken = append(t.Broken, fmt.Sprintf("span id %s used twice (%s, %s; the second is now %s)", id, kept[j].Operation, s.Operation, s.SpanID))
		}
		sc.put(s.SpanID, len(kept))
		if len(kept) == i {
			kept = kept[:i+1] // in place: no copy of a large Span
		} else {
			kept = append(kept, *s)
		}
	}
	clear(t.Spans[len(kept):]) // no strings kept alive past the end
	t.Spans = kept
	n := len(t.Spans)
	if n == 0 {
		return dups
	}
	if cap(sc.ints) < 4*n+2 {
		sc.ints = make([]int32, 4*n+2)
	}
	ints := sc.ints[:4*n+2]
	parent := ints[:n]
	sc.kids, sc.first, sc.newAt = ints[n:2*n], ints[2*n:3*n+2], ints[3*n+2:]
	for i := range t.Spans {
		s := &t.Spans[i]
		parent[i] = -1
		if s.End < s.Start {
			t.Broken = append(t.Broken, fmt.Sprintf("span %s (%s) ends %d ns before it starts", s.SpanID, s.Operation, s.Start-s.End))
		}
		if s.ParentID == 0 {
			continue
		}
		if s.ParentID == s.SpanID {
			t.Broken = append(t.Broken, fmt.Sprintf("span %s (%s) is its own parent", s.SpanID, s.Operation))
			continue
		}
		j := sc.find(s.ParentID)
		if j < 0 {
			t.Broken = append(t.Broken, fmt.Sprintf("span %s (%s): parent %s missing", s.SpanID, s.Operation, s.ParentID))
			continue
		}
		parent[i] = j
	}
	// Break cycles: a span whose ancestors lead back to itself becomes a
	// root.
	if cap(sc.state) < n {
		sc.state = make([]uint8, n)
	}
	state := sc.state[:n] // 0 unvisited, 1 on the path, 2 done
	clear(state)
	for i := range n {
		path := sc.path[:0]
		j := int32(i)
		for j >= 0 && state[j] == 0 {
			state[j] = 1
			path = append(path, j)
			j = parent[j]
		}
		if j >= 0 && state[j] == 1 {
			t.Broken = append(t.Broken, fmt.Sprintf("span %s (%s) is its own ancestor", t.Spans[j].SpanID, t.Spans[j].Operation))
			parent[j] = -1
		}
		for _, k := range path {
			state[k] = 2
		}
		sc.path = path
	}
	// Children in one array: those of span p (n: the roots) are
	// kids[first[p]:first[p+1]], in order of index, then sorted.
	first := sc.first
	clear(first)
	for i := range n {
		p := parent[i]
		if p < 0 {
			p = int32(n)
		}
		first[p+1]++
	}
	for p := 1; p < len(first); p++ {
		first[p] += first[p-1]
	}
	at := sc.newAt // the next free place of each parent's children, for now
	roots := int32(0)
	clear(at)
	for i := range n {
		p := parent[i]
		var k int32
		if p < 0 {
			p, k = int32(n), roots
			roots++
		} else {
			k = at[p]
			at[p]++
		}
		sc.kids[first[p]+k] = int32(i)
	}
	less := func(a, b int32) int {
		sa, sb := &t.Spans[a], &t.Spans[b]
		switch {
		case sa.Start != sb.Start:
			return cmp.Compare(sa.Start, sb.Start)
		case sa.OrderIndex != sb.OrderIndex:
			return cmp.Compare(int64(sa.OrderIndex), int64(sb.OrderIndex))
		case sa.EOI != sb.EOI:
			return cmp.Compare(int64(sa.EOI), int64(sb.EOI))
		}
		return cmp.Compare(a, b)
	}
	for p := range n + 1 {
		if k := sc.kids[first[p]:first[p+1]]; len(k) > 1 {
			slices.SortFunc(k, less)
		}
	}
	// The new place of each span, parents before their children; the
	// recursion is as deep as the tree (Kieker's MaxDepth-like limits keep
	// it sane).
	sc.spans = t.Spans
	next := int32(0)
	for _, r := range sc.kids[first[n]:first[n+1]] {
		next = sc.walk(r, 0, -1, next)
	}
	sc.spans = nil
	// Move every span to its place (each swap puts one where it belongs).
	newAt := sc.newAt
	for i := range int32(n) {
		for newAt[i] != i {
			j := newAt[i]
			t.Spans[i], t.Spans[j] = t.Spans[j], t.Spans[i]
			newAt[i], newAt[j] = newAt[j], newAt[i]
		}
	}
	return dups
}

// walk gives span i (at depth, under the span placed at p) the place
// next, then its children the places after it; it returns the next free
// place.
func (sc *treeScratch) walk(i, depth, p, next int32) int32 {
	s := &sc.spans[i]
	s.Parent, s.Depth = p, depth
	me := next
	sc.newAt[i] = me
	next++
	for _, c := range sc.kids[sc.first[i]:sc.first[i+1]] {
		next = sc.walk(c, depth+1, me, next)
	}
	return next
}
