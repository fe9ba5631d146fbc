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
	nodes []node
	offs  []int32 // the pending spans' offsets (pack)
	ints  []int32
	state []uint8
	path  []int32
	kids  []int32
	first []int32
	// After order: newAt[i] is span i's place in tree order, place[i]
	// the place of its parent (-1: a root), depth[i] its depth.
	newAt, place, depth []int32
}

// node is what the tree's order is computed on: a span's ids, times and
// Kieker positions.
type node struct {
	id, parent SpanID
	start, end int64
	oi, eoi    int32
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

// begin readies the index of ids for a trace of n spans; end forgets
// them.
func (sc *treeScratch) begin(n int) {
	sc.ids = sc.ids[:0]
	if n > smallTree {
		if sc.idx == nil {
			sc.idx = make(map[SpanID]int32, n)
		}
	} else {
		sc.idx = nil
	}
}

func (sc *treeScratch) end() {
	if len(sc.idx) > 4096 {
		sc.idx = nil // do not keep a huge trace's map
	} else {
		clear(sc.idx)
	}
}

func (sc *treeScratch) tree(t *Trace) (dups int) {
	sc.begin(len(t.Spans))
	defer sc.end()
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
	nodes := sc.nodes[:0]
	for i := range t.Spans {
		s := &t.Spans[i]
		nodes = append(nodes, node{id: s.SpanID, parent: s.ParentID, start: s.Start, end: s.End, oi: s.OrderIndex, eoi: s.EOI})
	}
	sc.nodes = nodes
	sc.order(nodes, func(i int32) string { return t.Spans[i].Operation }, &t.Broken)
	for i := range t.Spans {
		t.Spans[i].Parent, t.Spans[i].Depth = sc.place[i], sc.depth[i]
	}
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

// order computes the tree of nodes, whose ids are in sc's index (each
// once, node i's at i): the place of each in tree order (sc.newAt), the
// place of its parent (sc.place) and its depth (sc.depth), and appends
// to broken what is wrong (name(i) names node i's operation).
func (sc *treeScratch) order(nodes []node, name func(int32) string, broken *[]string) {
	n := len(nodes)
	if cap(sc.ints) < 6*n+2 {
		sc.ints = make([]int32, 6*n+2)
	}
	ints := sc.ints[:6*n+2]
	parent := ints[:n]
	sc.kids, sc.first, sc.newAt = ints[n:2*n], ints[2*n:3*n+2], ints[3*n+2:4*n+2]
	sc.place, sc.depth = ints[4*n+2:5*n+2], ints[5*n+2:]
	for i := range nodes {
		s := &nodes[i]
		parent[i] = -1
		if s.end < s.start {
			*broken = append(*broken, fmt.Sprintf("span %s (%s) ends %d ns before it starts", s.id, name(int32(i)), s.start-s.end))
		}
		if s.parent == 0 {
			continue
		}
		if s.parent == s.id {
			*broken = append(*broken, fmt.Sprintf("span %s (%s) is its own parent", s.id, name(int32(i))))
			continue
		}
		j := sc.find(s.parent)
		if j < 0 {
			*broken = append(*broken, fmt.Sprintf("span %s (%s): parent %s missing", s.id, name(int32(i)), s.parent))
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
			*broken = append(*broken, fmt.Sprintf("span %s (%s) is its own ancestor", nodes[j].id, name(j)))
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
		sa, sb := &nodes[a], &nodes[b]
		switch {
		case sa.start != sb.start:
			return cmp.Compare(sa.start, sb.start)
		case sa.oi != sb.oi:
			return cmp.Compare(int64(sa.oi), int64(sb.oi))
		case sa.eoi != sb.eoi:
			return cmp.Compare(int64(sa.eoi), int64(sb.eoi))
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
	next := int32(0)
	for _, r := range sc.kids[first[n]:first[n+1]] {
		next = sc.walk(r, 0, -1, next)
	}
}

// walk gives span i (at depth, under the span placed at p) the place
// next, then its children the places after it; it returns the next free
// place.
func (sc *treeScratch) walk(i, depth, p, next int32) int32 {
	sc.place[i], sc.depth[i] = p, depth
	me := next
	sc.newAt[i] = me
	next++
	for _, c := range sc.kids[sc.first[i]:sc.first[i+1]] {
		next = sc.walk(c, depth+1, me, next)
	}
	return next
}
