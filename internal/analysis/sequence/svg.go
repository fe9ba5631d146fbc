package sequence

import (
	"fmt"
	"html"
	"io"
)

// MaxMessages bounds what an SVG draws; a longer trace is cut with a note.
const MaxMessages = 2000

// SVG geometry (px).
const (
	colWidth  = 170
	rowHeight = 22
	headTop   = 10
	headH     = 40
	margin    = 20
	actWidth  = 8
)

// WriteSVG draws d as an SVG: a box per participant (a stick figure for
// 'Entry'), dashed lifelines, an activation bar while a participant's
// call runs, calls as solid arrows with their labels, replies as dashed
// arrows. At most MaxMessages messages are drawn; the rest is counted in a
// note at the bottom.
func (d *Diagram) WriteSVG(w io.Writer) error {
	col := make(map[int]int, len(d.Participants))
	// Each column is as wide as its label needs (about 6.5 px a
	// character at 11 px), at least colWidth.
	centers := make([]int, len(d.Participants))
	widths := make([]int, len(d.Participants))
	width := margin
	for i, p := range d.Participants {
		col[p.ID] = i
		widths[i] = max(colWidth, (13*max(len(p.Label), len(p.Container)+2))/2+24)
		centers[i] = width + widths[i]/2
		width += widths[i]
	}
	width += margin
	msgs := d.Messages
	cut := 0
	if len(msgs) > MaxMessages {
		cut = len(msgs) - MaxMessages
		msgs = msgs[:MaxMessages]
	}
	x := func(c int) int { return centers[c] }
	y0 := headTop + headH + rowHeight
	y := func(i int) int { return y0 + i*rowHeight }
	height := y(len(msgs)) + rowHeight + margin
	if cut > 0 {
		height += rowHeight
	}
	b := fmt.Appendf(nil, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	b = fmt.Appendf(b, `<title>%s sequence diagram of trace %s</title>`+"\n", d.Mode, html.EscapeString(d.TraceID))
	b = append(b, `<defs><marker id="a" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker>`+
		`<marker id="o" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8" fill="none" stroke="black"/></marker></defs>`+"\n"...)
	for i, p := range d.Participants {
		cx := x(i)
		if p.Actor {
			b = fmt.Appendf(b, `<g class="actor"><circle cx="%d" cy="%d" r="5" fill="none" stroke="black"/><path d="M%d %d v12 M%d %d h14 M%d %d l-6 9 M%d %d l6 9" stroke="black"/></g>`+"\n",
				cx, headTop+6, cx, headTop+11, cx-7, headTop+16, cx, headTop+23, cx, headTop+23)
		} else {
			b = fmt.Appendf(b, `<g class="object"><rect x="%d" y="%d" width="%d" height="%d" fill="white" stroke="black"/>`, cx-widths[i]/2+6, headTop, widths[i]-12, headH)
			if p.Container != "" {
				b = fmt.Appendf(b, `<text x="%d" y="%d" text-anchor="middle">%s::</text>`, cx, headTop+15, html.EscapeString(p.Container))
			}
			b = fmt.Appendf(b, `<text x="%d" y="%d" text-anchor="middle" text-decoration="underline">%s</text></g>`+"\n", cx, headTop+31, html.EscapeString(p.Label))
		}
		b = fmt.Appendf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="gray" stroke-dasharray="4 3"/>`+"\n", cx, headTop+headH, cx, height-margin)
	}
	// Activation bars: a stack of open calls per participant.
	open := map[int][]int{}
	bar := func(id, from, to int) {
		b = fmt.Appendf(b, `<rect class="active" x="%d" y="%d" width="%d" height="%d" fill="#ddd" stroke="black"/>`+"\n", x(col[id])-actWidth/2, from, actWidth, max(to-from, 2))
	}
	for i, m := range msgs {
		if m.Kind == "call" {
			open[m.To] = append(open[m.To], y(i))
		} else if s := open[m.From]; len(s) > 0 {
			bar(m.From, s[len(s)-1], y(i))
			open[m.From] = s[:len(s)-1]
		}
	}
	for id, s := range open { // calls still open where the diagram is cut
		for _, from := range s {
			bar(id, from, y(len(msgs)))
		}
	}
	for i, m := range msgs {
		x1, x2, yy := x(col[m.From]), x(col[m.To]), y(i)
		if m.Kind == "call" {
			if x1 == x2 { // a call within one participant: a loop
				b = fmt.Appendf(b, `<path d="M%d %d h30 v%d h-30" fill="none" stroke="black" marker-end="url(#a)"/>`, x1, yy-rowHeight/2, rowHeight/2)
				b = fmt.Appendf(b, `<text x="%d" y="%d">%s</text>`+"\n", x1+34, yy-2, html.EscapeString(m.Label))
				continue
			}
			b = fmt.Appendf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" marker-end="url(#a)"/>`, x1, yy, x2, yy)
			b = fmt.Appendf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (x1+x2)/2, yy-3, html.EscapeString(m.Label))
		} else if x1 != x2 {
			b = fmt.Appendf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black" stroke-dasharray="5 3" marker-end="url(#o)"/>`+"\n", x1, yy, x2, yy)
		}
		if len(b) > 1<<20 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if cut > 0 {
		b = fmt.Appendf(b, `<text class="cut" x="%d" y="%d">… %d more messages not drawn (a diagram shows at most %d)</text>`+"\n", margin, y(len(msgs))+rowHeight, cut, MaxMessages)
	}
	b = append(b, "</svg>\n"...)
	_, err := w.Write(b)
	return err
}
