package analysis

import (
	"slices"
	"strconv"
	"strings"
)

// FlameNode is a frame of a flame graph: Value is its width (ns of a
// trace's calls, or samples of a profile), Self the part not in its
// children, Calls how many calls (spans) it merges (0 for profiles).
type FlameNode struct {
	Name     string       `json:"name"`
	Value    int64        `json:"value"`
	Self     int64        `json:"self"`
	Calls    int64        `json:"calls,omitempty"`
	Errors   int64        `json:"errors,omitempty"`
	Children []*FlameNode `json:"children"`
}

// Flame is a flame graph.
type Flame struct {
	// Unit of the values: ns (a trace) or samples (a profile).
	Unit string     `json:"unit"`
	Root *FlameNode `json:"root"`
}

func newFlameRoot() *FlameNode { return &FlameNode{Name: "all", Children: []*FlameNode{}} }

func (n *FlameNode) child(name string, index map[flameKey]*FlameNode) *FlameNode {
	k := flameKey{n, name}
	if c := index[k]; c != nil {
		return c
	}
	c := &FlameNode{Name: name, Children: []*FlameNode{}}
	index[k] = c
	n.Children = append(n.Children, c)
	return c
}

type flameKey struct {
	parent *FlameNode
	name   string
}

// Flame returns the trace's flame graph: its call paths by operation,
// weighed by the calls' time in ns.
func (tr *Tree) Flame() Flame {
	t := tr.t
	root := newFlameRoot()
	index := map[flameKey]*FlameNode{}
	mergePaths(tr, root, func(parent *FlameNode, i int) *FlameNode {
		s := &t.Spans[i]
		n := parent.child(s.Operation, index)
		n.Value += s.Duration()
		n.Self += tr.Self(i)
		n.Calls++
		if s.Error {
			n.Errors++
		}
		if parent == root {
			root.Value += s.Duration()
		}
		return n
	})
	return Flame{Unit: "ns", Root: root}
}

// FoldedFlame returns the flame graph of folded stacks (Brendan Gregg's
// format: frames separated by ';', a space and a count per line), in
// samples; frames are sorted by name. Lines without a count are skipped.
func FoldedFlame(folded string) Flame {
	root := newFlameRoot()
	index := map[flameKey]*FlameNode{}
	for line := range strings.Lines(folded) {
		line = strings.TrimRight(line, "\n")
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil {
			continue
		}
		node := root
		root.Value += n
		for f := range strings.SplitSeq(line[:i], ";") {
			node = node.child(f, index)
			node.Value += n
		}
		node.Self += n
	}
	sortFlame(root)
	return Flame{Unit: "samples", Root: root}
}

func sortFlame(n *FlameNode) {
	slices.SortFunc(n.Children, func(a, b *FlameNode) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range n.Children {
		sortFlame(c)
	}
}
