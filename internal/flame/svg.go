package flame

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"strings"
)

// SVGOptions configure WriteSVG. Zero values select the defaults.
type SVGOptions struct {
	Title    string  // default "Flame Graph"
	Subtitle string  // a second line (group, window)
	Width    int     // image width in pixels (default 1200)
	Frame    int     // frame height in pixels (default 16)
	MinWidth float64 // frames narrower than this many pixels are left out (default 0.1)
	// Unit names what is counted in tooltips (default "samples").
	Unit string
}

// node is a frame in the merged call tree.
type node struct {
	name     string
	value    int64 // samples of this frame and its callees
	children map[string]*node
	sorted   []*node
}

func (n *node) child(name string) *node {
	c := n.children[name]
	if c == nil {
		if n.children == nil {
			n.children = map[string]*node{}
		}
		c = &node{name: name}
		n.children[name] = c
	}
	return c
}

func (s *Stacks) tree() (*node, int) {
	root := &node{name: "all"}
	depth := 0
	for i, k := range s.stacks {
		v := s.counts[i]
		root.value += v
		cur := root
		d := 0
		for _, f := range strings.Split(k, ";") {
			cur = cur.child(f)
			cur.value += v
			d++
		}
		depth = max(depth, d)
	}
	var sortRec func(n *node)
	sortRec = func(n *node) {
		for _, c := range n.children {
			n.sorted = append(n.sorted, c)
		}
		sort.Slice(n.sorted, func(i, j int) bool { return n.sorted[i].name < n.sorted[j].name })
		for _, c := range n.sorted {
			sortRec(c)
		}
	}
	sortRec(root)
	return root, depth
}

const (
	fontSize  = 12
	charWidth = fontSize * 0.59
	xPad      = 10
	topPad    = fontSize*3 + 18 // title, subtitle, details line
	bottomPad = fontSize*2 + 10
)

// WriteSVG renders the stacks as a flame graph: the root at the bottom,
// callees above their callers, each frame as wide as its share of the
// samples, siblings in alphabetical order, colours from a hash of the
// name. Every frame has a tooltip (its name, samples and share). The SVG
// has no script and no external reference.
func (s *Stacks) WriteSVG(w io.Writer, o SVGOptions) error {
	if o.Title == "" {
		o.Title = "Flame Graph"
	}
	if o.Width <= 0 {
		o.Width = 1200
	}
	if o.Frame <= 0 {
		o.Frame = 16
	}
	if o.MinWidth <= 0 {
		o.MinWidth = 0.1
	}
	if o.Unit == "" {
		o.Unit = "samples"
	}
	root, depth := s.tree()
	height := topPad + (depth+1)*o.Frame + bottomPad
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg">
<style type="text/css">text { font-family: Verdana, sans-serif; font-size: %dpx; fill: rgb(0,0,0); } .title { font-size: %dpx; } rect { stroke-width: 0.5; stroke: rgb(255,255,255); }</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="rgb(250,250,240)"/>
`, o.Width, height, o.Width, height, fontSize, fontSize+5)
	fmt.Fprintf(bw, `<text class="title" x="%d" y="%d" text-anchor="middle">%s</text>
`, o.Width/2, fontSize+12, esc(o.Title))
	if o.Subtitle != "" {
		fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle">%s</text>
`, o.Width/2, 2*fontSize+16, esc(o.Subtitle))
	}
	fmt.Fprintf(bw, `<text x="%d" y="%d">%d %s, %d stacks</text>
`, xPad, height-fontSize, root.value, esc(o.Unit), s.Len())
	if root.value > 0 {
		scale := float64(o.Width-2*xPad) / float64(root.value)
		r := &svgRenderer{w: bw, o: o, scale: scale, total: root.value, base: height - bottomPad}
		r.frame(root, 0, 0)
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

type svgRenderer struct {
	w     *bufio.Writer
	o     SVGOptions
	scale float64
	total int64
	base  int // y of the bottom of the root frame
}

func (r *svgRenderer) frame(n *node, x int64, depth int) {
	width := float64(n.value) * r.scale
	if width < r.o.MinWidth {
		return
	}
	px := xPad + float64(x)*r.scale
	y := r.base - (depth+1)*r.o.Frame
	pct := 100 * float64(n.value) / float64(r.total)
	label := n.name
	if depth == 0 {
		label = "all"
	}
	fmt.Fprintf(r.w, `<g><title>%s (%d %s, %s%%)</title><rect x="%s" y="%d" width="%s" height="%d" fill="%s" rx="2" ry="2"/>`,
		esc(label), n.value, esc(r.o.Unit), strconv.FormatFloat(pct, 'f', 2, 64),
		num(px), y, num(width), r.o.Frame-1, color(n.name, depth))
	if chars := int(width / charWidth); chars >= 3 {
		text := label
		if len(text) > chars {
			text = truncate(text, chars-2) + ".."
		}
		fmt.Fprintf(r.w, `<text x="%s" y="%d">%s</text>`, num(px+3), y+r.o.Frame-4, esc(text))
	}
	r.w.WriteString("</g>\n")
	for _, c := range n.sorted {
		r.frame(c, x, depth+1)
		x += c.value
	}
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// color picks a warm colour from a hash of the frame name (the root is
// grey), so a frame has the same colour in every graph.
func color(name string, depth int) string {
	if depth == 0 {
		return "rgb(200,200,200)"
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	r := 205 + v%50
	g := (v >> 8) % 230
	b := (v >> 16) % 55
	return fmt.Sprintf("rgb(%d,%d,%d)", r, g, b)
}
