package analysis

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// Kind is what a graph shows.
type Kind uint8

// The graphs: Kieker's five dependency graphs, its two aggregated call
// trees and the call tree of one trace.
const (
	ContainerGraph Kind = iota + 1
	DeploymentComponentGraph
	AssemblyComponentGraph
	DeploymentOperationGraph
	AssemblyOperationGraph
	AggregatedDeploymentCallTree
	AggregatedAssemblyCallTree
	CallTree
)

var kindNames = [...]string{"", "container", "deployment-component", "assembly-component",
	"deployment-operation", "assembly-operation", "aggregated-deployment-call-tree",
	"aggregated-assembly-call-tree", "call-tree"}

// String returns the kind's name as the analyze command spells it.
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "graph?"
}

// ParseKind parses a kind's name ("container", "assembly-operation", …).
func ParseKind(s string) (Kind, error) {
	for k := ContainerGraph; k <= CallTree; k++ {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown graph %q (want one of %s)", s, strings.Join(kindNames[1:], ", "))
}

// Dependency reports whether k is a dependency graph (not a tree).
func (k Kind) Dependency() bool { return k >= ContainerGraph && k <= AssemblyOperationGraph }

// deployed reports whether k's nodes sit on execution containers.
func (k Kind) deployed() bool {
	switch k {
	case ContainerGraph, DeploymentComponentGraph, DeploymentOperationGraph, AggregatedDeploymentCallTree, CallTree:
		return true
	}
	return false
}

// operations reports whether k's nodes are operations.
func (k Kind) operations() bool { return k >= DeploymentOperationGraph }

// EntryID is the id of the 'Entry' node, where a trace's root calls come
// from.
const EntryID = "entry"

// Graph is a dependency graph or a call tree. Nodes come in a fixed order
// (the entry node first; dependency graphs by container, component and
// operation; trees in depth-first call order), edges by their ends.
type Graph struct {
	Kind  Kind
	Nodes []Node
	Edges []Edge
}

// Node is an execution container, a component or an operation (a call
// tree's node: an operation at a place in the tree). Fields that do not
// apply to the graph's kind are empty: Container on assembly level,
// Component in the container graph, Operation in the container and
// component graphs.
type Node struct {
	ID        string
	Entry     bool
	Container string
	Component string // the assembly component (its fully qualified class)
	Operation string // the signature as logged
	// Sig is Operation parsed (for labels).
	Sig Signature
	// Stats are the response times of the calls into the node (nil when
	// not wanted).
	Stats *Stats
}

// Edge is a dependency (Calls messages from From to To) or a call tree's
// edge: Order is the call's position in its trace (1 for the entry call),
// 0 in aggregated trees, which count Calls. Stats are the response times
// of these calls (nil when not wanted): a node's Stats merge the calls of
// every edge into it, an edge's only its caller's.
type Edge struct {
	From, To string
	Calls    int64
	Order    int
	Stats    *Stats
}

// Stats are response times in ns.
type Stats struct {
	Count           int64
	Min, Max, Total int64
}

func (s *Stats) add(d int64) {
	if s.Count == 0 || d < s.Min {
		s.Min = d
	}
	if s.Count == 0 || d > s.Max {
		s.Max = d
	}
	s.Count++
	s.Total += d
}

// Avg returns the mean, rounded to whole ns as Kieker rounds it.
func (s *Stats) Avg() int64 {
	if s.Count == 0 {
		return 0
	}
	return int64(math.Round(float64(s.Total) / float64(s.Count)))
}

// WithoutSelfLoops returns g without the edges from a node to itself
// (Kieker draws none unless asked to); the nodes stay.
func (g *Graph) WithoutSelfLoops() *Graph {
	out := &Graph{Kind: g.Kind, Nodes: g.Nodes}
	for _, e := range g.Edges {
		if e.From != e.To {
			out.Edges = append(out.Edges, e)
		}
	}
	return out
}

// WithoutStats returns g with no response times on its nodes and edges.
func (g *Graph) WithoutStats() *Graph {
	out := &Graph{Kind: g.Kind, Nodes: slices.Clone(g.Nodes), Edges: slices.Clone(g.Edges)}
	for i := range out.Nodes {
		out.Nodes[i].Stats = nil
	}
	for i := range out.Edges {
		out.Edges[i].Stats = nil
	}
	return out
}

// Node returns the node with the given id, or nil.
func (g *Graph) Node(id string) *Node {
	for i := range g.Nodes {
		if g.Nodes[i].ID == id {
			return &g.Nodes[i]
		}
	}
	return nil
}

// key returns the identity of e's node in a graph of kind k.
func key(k Kind, e *Execution) string {
	switch k {
	case ContainerGraph:
		return e.Container
	case DeploymentComponentGraph:
		return e.Container + "\x00" + e.Assembly
	case AssemblyComponentGraph:
		return e.Assembly
	case DeploymentOperationGraph, AggregatedDeploymentCallTree, CallTree:
		return e.Container + "\x00" + e.Assembly + "\x00" + e.OpKey
	}
	return e.Assembly + "\x00" + e.OpKey
}

// node returns e's node (without id) in a graph of kind k.
func node(k Kind, e *Execution) Node {
	n := Node{Component: e.Assembly, Operation: e.Operation, Sig: e.Sig}
	if k.deployed() {
		n.Container = e.Container
	}
	if k == ContainerGraph {
		n.Component = ""
	}
	if !k.operations() {
		n.Operation, n.Sig = "", Signature{}
	}
	return n
}

// Analyzer accumulates the graphs and statistics of many traces in memory
// that grows with the number of distinct nodes, not with the traces.
type Analyzer struct {
	opt   Options
	deps  [AssemblyOperationGraph + 1]depGraph
	trees [2]*callTree // aggregated deployment, assembly call trees
	ops   map[string]*OperationStats
	sum   Summary
	// Each, when set, is handed every valid message trace Add finds (the
	// Kieker trace outputs keep them: internal/analysis/sysmodel).
	Each func(*MessageTrace)
}

// Summary counts what an Analyzer took.
type Summary struct {
	// Traces counts the assembled traces, Messages the (Kieker) traces
	// analysed and Calls their executions.
	Traces, Messages, Calls int64
	// Invalid counts the traces (and parts) dropped, with the first
	// MaxInvalidKept of them.
	Invalid     int64
	InvalidList []Invalid
}

// MaxInvalidKept bounds Summary.InvalidList.
const MaxInvalidKept = 100

type depGraph struct {
	nodes map[string]*depNode
	edges map[[2]string]*Stats
	named map[nodeKey]keyedNode // the nodes by the names key joins, looked up without joining them
}

type depNode struct {
	n     Node
	stats Stats
}

// New returns an Analyzer.
func New(o Options) *Analyzer {
	a := &Analyzer{opt: o, ops: map[string]*OperationStats{}}
	for k := ContainerGraph; k <= AssemblyOperationGraph; k++ {
		a.deps[k] = depGraph{nodes: map[string]*depNode{}, edges: map[[2]string]*Stats{}, named: map[nodeKey]keyedNode{}}
	}
	a.trees[0] = newCallTree()
	a.trees[1] = newCallTree()
	return a
}

// Add analyses an assembled trace (it keeps nothing of it).
func (a *Analyzer) Add(t *trace.Trace) {
	a.sum.Traces++
	ms, invalid := Messages(t, a.opt)
	for _, v := range invalid {
		a.sum.Invalid++
		if len(a.sum.InvalidList) < MaxInvalidKept {
			a.sum.InvalidList = append(a.sum.InvalidList, v)
		}
	}
	for _, m := range ms {
		a.AddMessages(m)
		if a.Each != nil {
			a.Each(m)
		}
	}
}

// AddMessages analyses one message trace.
func (a *Analyzer) AddMessages(m *MessageTrace) {
	a.sum.Messages++
	a.sum.Calls += int64(len(m.Execs))
	for k := ContainerGraph; k <= AssemblyOperationGraph; k++ {
		if !a.wants(k) {
			continue
		}
		g := &a.deps[k]
		for i := range m.Execs {
			e := &m.Execs[i]
			to := g.get(k, e)
			from := EntryID
			if e.Caller >= 0 {
				from = g.get(k, &m.Execs[e.Caller]).key
			}
			ek := [2]string{from, to.key}
			es := g.edges[ek]
			if es == nil {
				es = &Stats{}
				g.edges[ek] = es
			}
			es.add(e.Duration())
			if from != to.key {
				to.stats.add(e.Duration())
			}
		}
	}
	if a.wants(AggregatedDeploymentCallTree) {
		a.trees[0].addTrace(AggregatedDeploymentCallTree, m)
	}
	if a.wants(AggregatedAssemblyCallTree) {
		a.trees[1].addTrace(AggregatedAssemblyCallTree, m)
	}
	if len(a.opt.Graphs) == 0 || a.opt.Operations {
		a.addOps(m)
	}
}

// wants reports whether the analyzer builds graph k (Options.Graphs).
func (a *Analyzer) wants(k Kind) bool {
	return len(a.opt.Graphs) == 0 || slices.Contains(a.opt.Graphs, k)
}

// Summary returns the counts so far.
func (a *Analyzer) Summary() Summary { return a.sum }

type keyedNode struct {
	key string
	*depNode
}

func (g *depGraph) get(k Kind, e *Execution) keyedNode {
	nk := names(k, e)
	if kn, ok := g.named[nk]; ok {
		return kn
	}
	kk := key(k, e)
	n := g.nodes[kk]
	if n == nil {
		n = &depNode{n: node(k, e)}
		g.nodes[kk] = n
	}
	kn := keyedNode{kk, n}
	g.named[nk] = kn
	return kn
}

// names returns the names key(k, e) joins, unjoined.
func names(k Kind, e *Execution) nodeKey {
	switch k {
	case ContainerGraph:
		return nodeKey{container: e.Container}
	case DeploymentComponentGraph:
		return nodeKey{container: e.Container, assembly: e.Assembly}
	case AssemblyComponentGraph:
		return nodeKey{assembly: e.Assembly}
	case DeploymentOperationGraph, AggregatedDeploymentCallTree, CallTree:
		return nodeKey{container: e.Container, assembly: e.Assembly, op: e.OpKey}
	}
	return nodeKey{assembly: e.Assembly, op: e.OpKey}
}

// Graph returns the graph of kind k (not CallTree: see TraceCallTree) of
// everything added so far, with response times on its nodes.
func (a *Analyzer) Graph(k Kind) (*Graph, error) {
	switch {
	case k.Dependency():
		return a.deps[k].graph(k), nil
	case k == AggregatedDeploymentCallTree:
		return a.trees[0].root.graph(k, false), nil
	case k == AggregatedAssemblyCallTree:
		return a.trees[1].root.graph(k, false), nil
	}
	return nil, fmt.Errorf("%s: not an aggregate of traces", k)
}

func (g *depGraph) graph(k Kind) *Graph {
	keys := slices.Collect(maps.Keys(g.nodes))
	slices.SortFunc(keys, func(x, y string) int {
		a, b := &g.nodes[x].n, &g.nodes[y].n
		return cmp.Or(cmp.Compare(a.Container, b.Container), cmp.Compare(a.Component, b.Component),
			cmp.Compare(a.Operation, b.Operation), cmp.Compare(x, y))
	})
	out := &Graph{Kind: k, Nodes: []Node{{ID: EntryID, Entry: true}}}
	ids := map[string]string{EntryID: EntryID}
	rank := map[string]int{EntryID: 0}
	for i, kk := range keys {
		n := g.nodes[kk].n
		n.ID = fmt.Sprintf("n%d", i+1)
		st := g.nodes[kk].stats
		n.Stats = &st
		ids[kk] = n.ID
		rank[kk] = i + 1
		out.Nodes = append(out.Nodes, n)
	}
	edges := slices.Collect(maps.Keys(g.edges))
	slices.SortFunc(edges, func(x, y [2]string) int {
		return cmp.Or(cmp.Compare(rank[x[0]], rank[y[0]]), cmp.Compare(rank[x[1]], rank[y[1]]))
	})
	for _, e := range edges {
		st := *g.edges[e]
		out.Edges = append(out.Edges, Edge{From: ids[e[0]], To: ids[e[1]], Calls: st.Count, Stats: &st})
	}
	return out
}

// Call trees ------------------------------------------------------------

// treeNode is a node of an aggregated call tree: an operation reached by
// one path of calls from 'Entry'. Its Node is shared by every path to the
// same operation (callTree.nodes), so a node costs about 100 bytes however
// long its names: aggregated trees grow with the distinct call paths.
type treeNode struct {
	n        *Node
	calls    int64 // calls along the edge from the parent
	stats    Stats
	children []*treeNode
	index    map[*Node]int32 // children by node, once there are many
}

// manyChildren is where a node starts indexing its children.
const manyChildren = 8

// callTree is an aggregated call tree: its root ('Entry') and the nodes
// its paths share.
type callTree struct {
	root  treeNode
	nodes map[nodeKey]*Node
}

// nodeKey identifies a call tree's node: container (deployment trees),
// assembly component and operation.
type nodeKey struct{ container, assembly, op string }

func newCallTree() *callTree { return &callTree{nodes: map[nodeKey]*Node{}} }

// node returns the shared node of e in a tree of kind k.
func (t *callTree) node(k Kind, e *Execution) *Node {
	nk := nodeKey{assembly: e.Assembly, op: e.OpKey}
	if k.deployed() {
		nk.container = e.Container
	}
	n := t.nodes[nk]
	if n == nil {
		nn := node(k, e)
		n = &nn
		t.nodes[nk] = n
	}
	return n
}

func (t *treeNode) child(n *Node) *treeNode {
	if t.index != nil {
		if i, ok := t.index[n]; ok {
			return t.children[i]
		}
	} else {
		for _, c := range t.children {
			if c.n == n {
				return c
			}
		}
	}
	c := &treeNode{n: n}
	t.children = append(t.children, c)
	switch {
	case t.index != nil:
		t.index[n] = int32(len(t.children) - 1)
	case len(t.children) > manyChildren:
		t.index = make(map[*Node]int32, len(t.children))
		for i, c := range t.children {
			t.index[c.n] = int32(i)
		}
	}
	return c
}

// addTrace adds the calls of m below the root.
func (t *callTree) addTrace(k Kind, m *MessageTrace) {
	at := make([]*treeNode, len(m.Execs))
	for i := range m.Execs {
		e := &m.Execs[i]
		parent := &t.root
		if e.Caller >= 0 {
			parent = at[e.Caller]
		}
		c := parent.child(t.node(k, e))
		c.calls++
		c.stats.add(e.Duration())
		at[i] = c
	}
}

// graph numbers the tree's nodes depth first; order says whether edges
// carry their position (a single trace) instead of their calls.
func (t *treeNode) graph(k Kind, order bool) *Graph {
	out := &Graph{Kind: k, Nodes: []Node{{ID: EntryID, Entry: true}}}
	var walk func(p *treeNode, pid string)
	walk = func(p *treeNode, pid string) {
		for _, c := range p.children {
			n := *c.n
			n.ID = fmt.Sprintf("n%d", len(out.Nodes))
			st := c.stats
			n.Stats = &st
			out.Nodes = append(out.Nodes, n)
			// A tree's node has one edge in: the same calls.
			e := Edge{From: pid, To: n.ID, Stats: &st}
			if order {
				e.Order = len(out.Nodes) - 1
			} else {
				e.Calls = c.calls
			}
			out.Edges = append(out.Edges, e)
			walk(c, n.ID)
		}
	}
	walk(t, EntryID)
	return out
}

// TraceCallTree returns the call tree of one message trace, as Kieker's
// TraceCallTreeFilter draws it: a node per execution (deployment
// component and operation), edges numbered in call order.
func TraceCallTree(m *MessageTrace) *Graph {
	root := &treeNode{}
	at := make([]*treeNode, len(m.Execs))
	for i := range m.Execs {
		e := &m.Execs[i]
		parent := root
		if e.Caller >= 0 {
			parent = at[e.Caller]
		}
		n := node(CallTree, e)
		c := &treeNode{n: &n, calls: 1}
		c.stats.add(e.Duration())
		parent.children = append(parent.children, c)
		at[i] = c
	}
	return root.graph(CallTree, true)
}
