package analysis

import "github.com/tracebridge/tracebridge/internal/trace"

// Tree holds what the views of a trace need about its shape, computed in
// one pass (spans are in tree order: a parent before its subtree, so a
// subtree is the contiguous run [i, i+Size(i))). A Tree is read-only
// once made: goroutines may share it.
type Tree struct {
	t         *trace.Trace
	size      []int32 // spans in the subtree, the span included
	errs      []int32 // spans in error in the subtree
	children  []int32 // direct children
	childTime []int64 // the children's durations summed
	first     []int32 // first child (-1: none)
	next      []int32 // next sibling (-1: none)
}

// NewTree computes the shape of t.
func NewTree(t *trace.Trace) *Tree {
	n := len(t.Spans)
	tr := &Tree{t: t, size: make([]int32, n), errs: make([]int32, n), children: make([]int32, n),
		childTime: make([]int64, n), first: make([]int32, n), next: make([]int32, n)}
	for i := range n {
		tr.first[i], tr.next[i] = -1, -1
	}
	for i := n - 1; i >= 0; i-- {
		s := &t.Spans[i]
		tr.size[i]++
		if s.Error {
			tr.errs[i]++
		}
		if p := tr.Parent(i); p >= 0 {
			tr.size[p] += tr.size[i]
			tr.errs[p] += tr.errs[i]
			tr.children[p]++
			tr.childTime[p] += s.Duration()
			tr.next[i] = tr.first[p]
			tr.first[p] = int32(i)
		}
	}
	return tr
}

// Parent returns the index of span i's parent (-1 for a root, or a
// parent that is missing or, in a malformed trace, not before it).
func (tr *Tree) Parent(i int) int {
	p := int(tr.t.Spans[i].Parent)
	if p < 0 || p >= i {
		return -1
	}
	return p
}

// Self returns span i's time outside its children (never below 0).
func (tr *Tree) Self(i int) int64 {
	return max(tr.t.Spans[i].Duration()-tr.childTime[i], 0)
}

// Size returns the number of spans in span i's subtree, the span included.
func (tr *Tree) Size(i int) int { return int(tr.size[i]) }

// Children returns the indexes of span i's direct children, in tree
// order.
func (tr *Tree) Children(i int) []int {
	out := make([]int, 0, tr.children[i])
	for c := tr.first[i]; c >= 0; c = tr.next[c] {
		out = append(out, int(c))
	}
	return out
}

// mergePaths merges the spans of a trace by call path: it calls merge
// for every span in tree order with the node of its parent's path (root
// for a root span), and merge returns the span's node. A span whose
// parent got no node (merge returned nil) is skipped with its subtree.
func mergePaths[N comparable](tr *Tree, root N, merge func(parent N, i int) N) {
	var none N
	nodes := make([]N, len(tr.t.Spans))
	for i := range tr.t.Spans {
		parent := root
		if p := tr.Parent(i); p >= 0 {
			parent = nodes[p]
		}
		if parent == none {
			continue
		}
		nodes[i] = merge(parent, i)
	}
}
