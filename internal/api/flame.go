package api

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/flame"
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

// writeFolded writes the tree as folded stacks weighted by self values.
func (n *FlameNode) writeFolded(w *bufio.Writer, path []string) {
	if n.Self > 0 && len(path) > 0 {
		w.WriteString(strings.Join(path, ";"))
		w.WriteByte(' ')
		w.WriteString(strconv.FormatInt(n.Self, 10))
		w.WriteByte('\n')
	}
	for _, c := range n.Children {
		c.writeFolded(w, append(path, foldedFrame(c.Name)))
	}
}

// foldedFrame keeps the separators of the folded format out of a name.
func foldedFrame(s string) string {
	return strings.NewReplacer(";", ":", "\n", " ", "\r", " ").Replace(s)
}

func traceFlame(c *call) error {
	format := c.oneOf("format", "json", "json", "folded", "svg")
	t, err := c.trace()
	if err != nil {
		return err
	}
	tr := newTree(t)
	root := &FlameNode{Name: "all", Children: []*FlameNode{}}
	index := map[flameKey]*FlameNode{}
	nodes := make([]*FlameNode, len(t.Spans))
	for i := range t.Spans {
		s := &t.Spans[i]
		parent := root
		if p := tr.parent(i); p >= 0 {
			parent = nodes[p]
		}
		n := parent.child(s.Operation, index)
		nodes[i] = n
		n.Value += s.Duration()
		n.Self += tr.self(i)
		n.Calls++
		if s.Error {
			n.Errors++
		}
		if parent == root {
			root.Value += s.Duration()
		}
	}
	return c.flame(Flame{Unit: "ns", Root: root}, format, "trace "+t.ID.String())
}

// flame answers a flame graph as JSON, folded stacks or SVG.
func (c *call) flame(f Flame, format, title string) error {
	switch format {
	case "json":
		return c.json(f)
	}
	var folded bytes.Buffer
	w := bufio.NewWriter(&folded)
	f.Root.writeFolded(w, nil)
	w.Flush()
	if format == "folded" {
		return c.raw("text/plain; charset=utf-8", folded.Bytes())
	}
	st, err := flame.ReadFolded(&folded)
	if err != nil {
		return err
	}
	var svg bytes.Buffer
	if err := st.WriteSVG(&svg, flame.SVGOptions{Title: title, Unit: f.Unit}); err != nil {
		return err
	}
	// The SVG is an image: no script runs in it (flame writes none).
	c.w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	return c.raw("image/svg+xml", svg.Bytes())
}

// Profiles gives flame graphs of sampled stacks (JFR execution samples).
// A JFR profile stage implements it and publishes itself in
// pipeline.Shared under "profiles"; until one does, the profile
// endpoints answer 404.
type Profiles interface {
	// Stacks returns the stacks sampled on host between since and until
	// (unix ns), merged; nil without samples there.
	Stacks(ctx context.Context, host string, since, until int64) (*flame.Stacks, error)
}

func profileFlame(c *call) error {
	now := c.a.opt.Now()
	host := c.str("host")
	if host == "" {
		c.bad("host", "required")
	}
	since, until := c.when("since", now), c.when("until", now)
	format := c.oneOf("format", "json", "json", "folded", "svg")
	if since == 0 {
		since = now.Add(-15 * time.Minute).UnixNano()
	}
	if until == 0 {
		until = now.UnixNano()
	}
	if since > until {
		c.bad("since", "after until")
	}
	if err := c.check(); err != nil {
		return err
	}
	var p Profiles = c.a.opt.Shared.Profiles()
	if p == nil {
		return errorf(http.StatusNotFound, "no profiles: this bridge keeps no JFR samples (it needs a JFR receiver and the profile stage)")
	}
	st, err := p.Stacks(c.ctx, host, since, until)
	if err != nil {
		return err
	}
	if st == nil || st.Total() == 0 {
		return errorf(http.StatusNotFound, "no samples of host %s between %s and %s", host,
			time.Unix(0, since).UTC().Format(time.RFC3339), time.Unix(0, until).UTC().Format(time.RFC3339))
	}
	root, err := stacksTree(st)
	if err != nil {
		return err
	}
	return c.flame(Flame{Unit: "samples", Root: root}, format, fmt.Sprintf("%s, %s to %s", host,
		time.Unix(0, since).UTC().Format(time.RFC3339), time.Unix(0, until).UTC().Format(time.RFC3339)))
}

// stacksTree turns folded stacks into a tree.
func stacksTree(st *flame.Stacks) (*FlameNode, error) {
	var b bytes.Buffer
	if err := st.WriteFolded(&b); err != nil {
		return nil, err
	}
	root := &FlameNode{Name: "all", Children: []*FlameNode{}}
	index := map[flameKey]*FlameNode{}
	for line := range strings.Lines(b.String()) {
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
	return root, nil
}

func sortFlame(n *FlameNode) {
	slices.SortFunc(n.Children, func(a, b *FlameNode) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range n.Children {
		sortFlame(c)
	}
}
