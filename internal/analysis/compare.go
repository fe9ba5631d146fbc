package analysis

import "github.com/tracebridge/tracebridge/internal/trace"

// maxCompareNodes bounds a comparison's merged tree.
const maxCompareNodes = 100_000

// CallStats are the calls of one path of a call tree.
type CallStats struct {
	Calls   int64 `json:"calls"`
	Errors  int64 `json:"errors"`
	TotalNs int64 `json:"totalNs"`
	SelfNs  int64 `json:"selfNs"`
}

// CompareNode is one call path of the merged call trees of two traces:
// the operations from a root to here. A and B are its calls in each
// trace (null where the path does not occur). Status: same (the same
// calls and errors), changed, added (only in b) or removed (only in a).
type CompareNode struct {
	Parent    int        `json:"parent"` // index in nodes, -1 for a root path
	Depth     int        `json:"depth"`
	Operation string     `json:"operation"`
	Component string     `json:"component"`
	A         *CallStats `json:"a"`
	B         *CallStats `json:"b"`
	Status    string     `json:"status"`
	// DeltaNs is B's total time minus A's.
	DeltaNs int64 `json:"deltaNs"`
}

// CompareSide describes one of the traces compared.
type CompareSide struct {
	TraceID    string `json:"traceId"`
	Spans      int    `json:"spans"`
	Errors     int    `json:"errors"`
	DurationNs int64  `json:"durationNs"`
}

// Comparison is a structural diff of two traces.
type Comparison struct {
	// Nodes are in tree order (a node before its subtree).
	Nodes   []CompareNode  `json:"nodes"`
	Counts  map[string]int `json:"counts"`
	Limited bool           `json:"limited"` // more than 100,000 paths: the rest are left out
	SideA   CompareSide    `json:"a"`
	SideB   CompareSide    `json:"b"`
}

type cmpNode struct {
	op, comp string
	a, b     *CallStats
	kids     []*cmpNode
	index    map[[2]string]*cmpNode
}

func (n *cmpNode) child(op, comp string, count *int) *cmpNode {
	k := [2]string{op, comp}
	if c := n.index[k]; c != nil {
		return c
	}
	if *count >= maxCompareNodes {
		return nil
	}
	*count++
	c := &cmpNode{op: op, comp: comp, index: map[[2]string]*cmpNode{}}
	n.index[k] = c
	n.kids = append(n.kids, c)
	return c
}

// Compare merges the call trees of a and b by path: a structural diff
// of two traces.
func Compare(a, b *trace.Trace) Comparison {
	root := &cmpNode{index: map[[2]string]*cmpNode{}}
	count := 0
	limited := false
	add := func(t *trace.Trace, side func(*cmpNode) **CallStats) {
		tr := NewTree(t)
		mergePaths(tr, root, func(parent *cmpNode, i int) *cmpNode {
			s := &t.Spans[i]
			n := parent.child(s.Operation, s.Component, &count)
			if n == nil {
				limited = true
				return nil
			}
			st := side(n)
			if *st == nil {
				*st = &CallStats{}
			}
			(*st).Calls++
			(*st).TotalNs += s.Duration()
			(*st).SelfNs += tr.Self(i)
			if s.Error {
				(*st).Errors++
			}
			return n
		})
	}
	add(a, func(n *cmpNode) **CallStats { return &n.a })
	add(b, func(n *cmpNode) **CallStats { return &n.b })
	out := Comparison{Nodes: []CompareNode{}, Counts: map[string]int{"same": 0, "changed": 0, "added": 0, "removed": 0}, Limited: limited,
		SideA: side(a), SideB: side(b)}
	type item struct {
		n      *cmpNode
		parent int
		depth  int
	}
	stack := []item{}
	for i := len(root.kids) - 1; i >= 0; i-- {
		stack = append(stack, item{root.kids[i], -1, 0})
	}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := it.n
		cn := CompareNode{Parent: it.parent, Depth: it.depth, Operation: n.op, Component: n.comp, A: n.a, B: n.b}
		switch {
		case n.a == nil:
			cn.Status = "added"
		case n.b == nil:
			cn.Status = "removed"
		case n.a.Calls != n.b.Calls || n.a.Errors != n.b.Errors:
			cn.Status = "changed"
		default:
			cn.Status = "same"
		}
		if n.b != nil {
			cn.DeltaNs += n.b.TotalNs
		}
		if n.a != nil {
			cn.DeltaNs -= n.a.TotalNs
		}
		out.Counts[cn.Status]++
		idx := len(out.Nodes)
		out.Nodes = append(out.Nodes, cn)
		for i := len(n.kids) - 1; i >= 0; i-- {
			stack = append(stack, item{n.kids[i], idx, it.depth + 1})
		}
	}
	return out
}

func side(t *trace.Trace) CompareSide {
	return CompareSide{TraceID: t.ID.String(), Spans: len(t.Spans), Errors: t.Errors(), DurationNs: t.Duration()}
}
