package analysis

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// JSON ------------------------------------------------------------------

type jsonGraph struct {
	Nodes []jsonNode `json:"nodes"`
	Edges []jsonEdge `json:"edges"`
}

type jsonNode struct {
	ID        string     `json:"id"`
	Container *string    `json:"container"`
	Component *string    `json:"component"`
	Operation *string    `json:"operation"`
	Stats     *jsonStats `json:"stats,omitempty"`
}

type jsonStats struct {
	Count int64 `json:"count"`
	Min   int64 `json:"minNs"`
	Avg   int64 `json:"avgNs"`
	Max   int64 `json:"maxNs"`
	Total int64 `json:"totalNs"`
}

type jsonEdge struct {
	From  string     `json:"from"`
	To    string     `json:"to"`
	Calls int64      `json:"calls,omitempty"`
	Order int        `json:"order,omitempty"`
	Stats *jsonStats `json:"stats,omitempty"`
}

func statsJSON(s *Stats) *jsonStats {
	if s == nil {
		return nil
	}
	return &jsonStats{Count: s.Count, Min: s.Min, Avg: s.Avg(), Max: s.Max, Total: s.Total}
}

// MarshalJSON encodes the graph as
// {"nodes":[{"id","container","component","operation","stats"}],"edges":[{"from","to","calls"|"order","stats"}]}:
// fields that do not apply to the kind (and all of the entry node's) are
// null, stats appear when the nodes and edges have them.
func (g *Graph) MarshalJSON() ([]byte, error) {
	out := jsonGraph{Nodes: make([]jsonNode, 0, len(g.Nodes)), Edges: make([]jsonEdge, 0, len(g.Edges))}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		j := jsonNode{ID: n.ID}
		if !n.Entry {
			if g.Kind.deployed() {
				j.Container = &n.Container
			}
			if g.Kind != ContainerGraph {
				j.Component = &n.Component
			}
			if g.Kind.operations() {
				j.Operation = &n.Operation
			}
			j.Stats = statsJSON(n.Stats)
		}
		out.Nodes = append(out.Nodes, j)
	}
	for _, e := range g.Edges {
		out.Edges = append(out.Edges, jsonEdge{From: e.From, To: e.To, Calls: e.Calls, Order: e.Order, Stats: statsJSON(e.Stats)})
	}
	return json.Marshal(out)
}

// DOT -------------------------------------------------------------------

// DOTOptions say how WriteDOT labels nodes.
type DOTOptions struct {
	// ShortLabels leave out package names ("..Class"), as Kieker's
	// --short-labels.
	ShortLabels bool
	// Unit of the response times: "ns" (default), "us", "ms" or "s".
	Unit string
	// AssemblyNames, when set, name the assembly components ("@3") as
	// Kieker numbers them (internal/analysis/sysmodel); without, they
	// are numbered in the order of their names.
	AssemblyNames map[string]string
}

// Kieker's stereotypes and the label of the entry node.
const (
	stereoContainer  = "<<execution container>>"
	stereoAssembly   = "<<assembly component>>"
	stereoDeployment = "<<deployment component>>"
	entryLabel       = "'Entry'"
)

// WriteDOT writes g in Graphviz's DOT language in the style of Kieker's
// trace-analysis tool: dependency graphs left to right with execution
// containers and components as clusters, stereotyped labels, assembly
// components named @1, @2, …, operations as ovals labelled name(..), edges
// labelled with their calls; call trees with unshaped nodes and edges
// labelled 1., 2., … (or their calls). Nodes with stats carry Kieker's
// response-time line.
func WriteDOT(w io.Writer, g *Graph, o DOTOptions) error {
	b := bufio.NewWriter(w)
	asm := o.AssemblyNames
	if asm == nil {
		asm = assemblyNames(g)
	}
	d := dotWriter{b: b, g: g, o: o, asm: asm, pos: make(map[string]int, len(g.Nodes))}
	for i := range g.Nodes {
		d.pos[g.Nodes[i].ID] = i
	}
	if g.Kind.Dependency() {
		d.dependency()
	} else {
		d.tree()
	}
	return b.Flush()
}

type dotWriter struct {
	b   *bufio.Writer
	g   *Graph
	o   DOTOptions
	asm map[string]string // component -> @n
	pos map[string]int    // node id -> position
}

// assemblyNames numbers the components of g (sorted) as Kieker names
// assembly components: @1, @2, …
func assemblyNames(g *Graph) map[string]string {
	var names []string
	for i := range g.Nodes {
		if !g.Nodes[i].Entry {
			names = append(names, g.Nodes[i].Component)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	m := make(map[string]string, len(names))
	for i, n := range names {
		m[n] = "@" + strconv.Itoa(i+1)
	}
	return m
}

// dotID names a node as Kieker's formatters do: depNode_ and a number (the
// node's position; the entry node is depNode_0).
func (d *dotWriter) dotID(n *Node) string { return "depNode_" + strconv.Itoa(d.pos[n.ID]) }

// esc escapes s for a quoted DOT string.
func esc(s string) string {
	if !strings.ContainsAny(s, "\"\\\n") {
		return s
	}
	s = strings.ReplaceAll(s, "\\", "\\\\")
	s = strings.ReplaceAll(s, "\"", "\\\"")
	return strings.ReplaceAll(s, "\n", "\\n")
}

// component labels a component "@n:pkg.Class" (short: "@n:..Class").
func (d *dotWriter) component(c string) string {
	pkg, typ := "", c
	if i := strings.LastIndexByte(c, '.'); i >= 0 {
		pkg, typ = c[:i], c[i+1:]
	}
	switch {
	case d.o.ShortLabels:
		return d.asm[c] + ":.." + esc(typ)
	case pkg == "":
		return d.asm[c] + ":" + esc(typ)
	}
	return d.asm[c] + ":" + esc(pkg) + "." + esc(typ)
}

// operation labels an operation "name(..)" (Kieker's form), or by the span
// name when that is no identifier.
func operationLabel(n *Node) string {
	if strings.ContainsAny(n.Sig.Name, " /:") {
		return esc(n.Sig.Name)
	}
	return esc(n.Sig.Short())
}

// times appends Kieker's response-time decoration.
func (d *dotWriter) times(label string, n *Node) string {
	s := n.Stats
	if s == nil || s.Count == 0 {
		return label
	}
	unit, div := "ns", int64(1)
	switch d.o.Unit {
	case "us":
		unit, div = "us", 1e3
	case "ms":
		unit, div = "ms", 1e6
	case "s":
		unit, div = "s", 1e9
	}
	avg := float64(s.Total) / float64(s.Count) / float64(div)
	return fmt.Sprintf("%s\\nmin: %d%s, avg: %.0f%s, max: %d%s,\\ntotal: %d%s", label,
		s.Min/div, unit, avg, unit, s.Max/div, unit, s.Total/div, unit)
}

func (d *dotWriter) node(n *Node, label, shape string) {
	if n.Entry {
		fmt.Fprintf(d.b, "\"%s\" [label=\"%s\",shape=\"none\"]\n", d.dotID(n), entryLabel)
		return
	}
	fmt.Fprintf(d.b, "\"%s\" [label=\"%s\",shape=\"%s\",style=\"filled\",color=\"#000000\",fillcolor=\"white\"]\n",
		d.dotID(n), d.times(label, n), shape)
}

func (d *dotWriter) cluster(id, label string) {
	fmt.Fprintf(d.b, "subgraph \"cluster_%s\" {\n label = \"%s\";\n shape = \"box\";\n style = \"filled\";\n fillcolor = \"white\";\n", id, label)
}

func (d *dotWriter) dependency() {
	g := d.g
	d.b.WriteString("digraph G {\n rankdir=LR;\n")
	byID := map[string]*Node{}
	for i := range g.Nodes {
		byID[g.Nodes[i].ID] = &g.Nodes[i]
	}
	d.node(&g.Nodes[0], "", "")
	rest := g.Nodes[1:]
	containers := groupBy(rest, func(n *Node) string { return n.Container })
	switch g.Kind {
	case ContainerGraph:
		for i := range rest {
			d.node(&rest[i], stereoContainer+"\\n"+esc(rest[i].Container), "box3d")
		}
	case AssemblyComponentGraph:
		for i := range rest {
			d.node(&rest[i], stereoAssembly+"\\n"+d.component(rest[i].Component), "box")
		}
	case DeploymentComponentGraph:
		for ci, c := range containers {
			d.cluster("container"+strconv.Itoa(ci+1), stereoContainer+"\\n"+esc(c.key))
			for _, n := range c.nodes {
				d.node(n, stereoDeployment+"\\n"+d.component(n.Component), "box")
			}
			d.b.WriteString("}\n")
		}
	case DeploymentOperationGraph:
		k := 0
		for ci, c := range containers {
			d.cluster("container"+strconv.Itoa(ci+1), stereoContainer+"\\n"+esc(c.key))
			for _, comp := range groupBy2(c.nodes) {
				k++
				d.cluster("component_"+strconv.Itoa(k), stereoDeployment+"\\n"+d.component(comp.key))
				for _, n := range comp.nodes {
					d.node(n, operationLabel(n), "oval")
				}
				d.b.WriteString("}\n")
			}
			d.b.WriteString("}\n")
		}
	case AssemblyOperationGraph:
		all := make([]*Node, len(rest))
		for i := range rest {
			all[i] = &rest[i]
		}
		for k, comp := range groupBy2(all) {
			d.cluster("component_"+strconv.Itoa(k+1), stereoAssembly+"\\n"+d.component(comp.key))
			for _, n := range comp.nodes {
				d.node(n, operationLabel(n), "oval")
			}
			d.b.WriteString("}\n")
		}
	}
	for _, e := range g.Edges {
		fmt.Fprintf(d.b, "%s->%s[label=%d, style=\"solid\", arrowhead=\"open\", color=\"#000000\"]\n",
			d.dotID(byID[e.From]), d.dotID(byID[e.To]), e.Calls)
	}
	d.b.WriteString("}\n")
}

type group struct {
	key   string
	nodes []*Node
}

// groupBy groups nodes (sorted by container, component) by f, keeping
// their order.
func groupBy(nodes []Node, f func(*Node) string) []group {
	var out []group
	for i := range nodes {
		k := f(&nodes[i])
		if len(out) == 0 || out[len(out)-1].key != k {
			out = append(out, group{key: k})
		}
		out[len(out)-1].nodes = append(out[len(out)-1].nodes, &nodes[i])
	}
	return out
}

// groupBy2 groups nodes by component.
func groupBy2(nodes []*Node) []group {
	var out []group
	for _, n := range nodes {
		if len(out) == 0 || out[len(out)-1].key != n.Component {
			out = append(out, group{key: n.Component})
		}
		out[len(out)-1].nodes = append(out[len(out)-1].nodes, n)
	}
	slices.SortStableFunc(out, func(a, b group) int { return cmp.Compare(a.key, b.key) })
	return out
}

// tree writes a call tree as Kieker's call-tree filters do.
func (d *dotWriter) tree() {
	g := d.g
	d.b.WriteString("digraph G {\n")
	for i := range g.Nodes {
		n := &g.Nodes[i]
		label := entryLabel
		if !n.Entry {
			label = d.component(n.Component) + "\\n." + operationLabel(n)
			if g.Kind != AggregatedAssemblyCallTree {
				label = esc(n.Container) + "::\\n" + label
			}
			label = d.times(label, n)
		}
		fmt.Fprintf(d.b, "%d[label =\"%s\",shape=none];\n", i, label)
	}
	for _, e := range g.Edges {
		l := strconv.FormatInt(e.Calls, 10)
		if g.Kind == CallTree {
			l = strconv.Itoa(e.Order) + "."
		}
		fmt.Fprintf(d.b, "%d->%d[style=solid,arrowhead=none,label=\"%s\" ]\n", d.pos[e.From], d.pos[e.To], l)
	}
	d.b.WriteString("}\n")
}
