// Package sequence draws a trace as a UML sequence diagram, as Kieker's
// trace-analysis does (SequenceDiagramFilter): one lifeline per assembly
// component or per allocation (deployment) component, numbered as Kieker
// numbers them (internal/analysis/sysmodel), plus the actor for 'Entry';
// one arrow per message of the trace's message trace (calls labelled
// "operation()" or "operation(..)", replies unlabelled).
//
// Three forms: Kieker's pic (WritePic, for pic2plot and the sequence.pic
// macros of Spinellis' UMLGraph, which tracebridge does not ship: the file
// says `copy "sequence.pic";` as Kieker's does when it lacks them, unless
// the macros are given), JSON (participants and messages in order) and
// SVG drawn by tracebridge (WriteSVG), cut at MaxMessages with a note.
package sequence

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
)

// Mode is what a lifeline stands for.
type Mode uint8

// The modes: Kieker's assembly and deployment (allocation) diagrams.
const (
	Assembly Mode = iota + 1
	Deployment
)

// ParseMode parses "assembly" or "deployment".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "assembly":
		return Assembly, nil
	case "deployment", "allocation":
		return Deployment, nil
	}
	return 0, fmt.Errorf("unknown sequence diagram %q (want assembly or deployment)", s)
}

// String returns the mode's name.
func (m Mode) String() string {
	if m == Assembly {
		return "assembly"
	}
	return "deployment"
}

// FilePrefix returns the name Kieker gives the mode's files
// ("assemblySequenceDiagram-<traceId>.pic").
func (m Mode) FilePrefix() string {
	if m == Assembly {
		return "assemblySequenceDiagram"
	}
	return "deploymentSequenceDiagram"
}

// Participant is a lifeline: the 'Entry' actor (ID 0) or a component.
type Participant struct {
	// ID is Kieker's number of the assembly or allocation component (0:
	// 'Entry').
	ID        int    `json:"id"`
	Container string `json:"container,omitempty"` // deployment diagrams
	Label     string `json:"label"`               // "@N:package.Class"
	Actor     bool   `json:"actor,omitempty"`
}

// Message is an arrow.
type Message struct {
	Kind  string `json:"kind"` // "call" or "reply"
	Time  int64  `json:"time"` // ns
	From  int    `json:"from"` // participant ids
	To    int    `json:"to"`
	Label string `json:"label,omitempty"` // calls: "operation(..)"
	// EOI is the called execution's eoi (the callee of a call, the
	// replying execution of a reply).
	EOI int `json:"eoi"`
}

// Diagram is a trace's sequence diagram.
type Diagram struct {
	TraceID      string        `json:"traceId"`
	Mode         string        `json:"mode"`
	Participants []Participant `json:"participants"` // in order of appearance, 'Entry' first
	Messages     []Message     `json:"messages"`
}

// label is Kieker's component label: "@N:" and the package (or ".."
// with short labels), ".", the type's name.
func label(a *sysmodel.Assembly, short bool) string {
	pkg := a.Type.Package + "."
	if short {
		pkg = ".."
	}
	return a.Name() + ":" + pkg + a.Type.Name
}

// New returns the diagram of t.
func New(t *sysmodel.ExecutionTrace, mode Mode, short bool) *Diagram {
	d := &Diagram{TraceID: t.ID, Mode: mode.String(), Participants: []Participant{{ID: 0, Label: "", Actor: true}}}
	seen := map[int]bool{0: true}
	part := func(i int) int {
		if i == sysmodel.Entry {
			return 0
		}
		a := t.Execs[i].Alloc
		id := a.Assembly.ID
		p := Participant{Label: label(a.Assembly, short)}
		if mode == Deployment {
			id, p.Container = a.ID, a.Container.Name
		}
		if !seen[id] {
			seen[id] = true
			p.ID = id
			d.Participants = append(d.Participants, p)
		}
		return id
	}
	msgs := t.Messages()
	d.Messages = make([]Message, 0, len(msgs))
	for _, m := range msgs {
		from, to := part(m.From), part(m.To)
		mm := Message{Kind: "call", Time: m.Time, From: from, To: to, EOI: m.To}
		if m.Reply {
			mm.Kind, mm.Label, mm.EOI = "reply", "", m.From
		} else {
			sig := &t.Execs[m.To].Op.Sig
			mm.Label = sig.Name + "()"
			if len(sig.Params) > 0 {
				mm.Label = sig.Name + "(..)"
			}
		}
		d.Messages = append(d.Messages, mm)
	}
	return d
}

// WritePic writes d as Kieker's SequenceDiagramFilter writes its .pic
// file. macros is the content of sequence.pic to put in the preamble;
// empty, the file copies "sequence.pic" (pic2plot then needs the file in
// its working directory), as Kieker's own output does when it lacks it.
func (d *Diagram) WritePic(w io.Writer, macros string) error {
	b := make([]byte, 0, 4096)
	b = append(b, ".PS\n"...)
	if macros == "" {
		b = append(b, "copy \"sequence.pic\";"...)
	} else {
		b = append(b, macros...)
	}
	b = append(b, "\nboxwid = 1.1;\nmovewid = 0.5;\nactor(O0,\"\");\n"...)
	for _, p := range d.Participants[1:] {
		b = append(b, "object(O"...)
		b = strconv.AppendInt(b, int64(p.ID), 10)
		b = append(b, ",\""...)
		if p.Container != "" {
			b = append(b, p.Container...)
			b = append(b, "::"...)
		}
		b = append(b, "\",\""...)
		b = append(b, p.Label...)
		b = append(b, "\");\n"...)
	}
	b = append(b, "step();\nactive(O0);\n"...)
	first := true
	for _, m := range d.Messages {
		from, to := "O"+strconv.Itoa(m.From), "O"+strconv.Itoa(m.To)
		if m.Kind == "call" {
			if first {
				b = append(b, "async();\n"...)
				first = false
			} else {
				b = append(b, "sync();\n"...)
			}
			b = fmt.Appendf(b, "message(%s,%s, \"%s\");\nactive(%s);\nstep();\n", from, to, m.Label, to)
		} else {
			b = fmt.Appendf(b, "step();\nasync();\nrmessage(%s,%s, \"\");\ninactive(%s);\n", from, to, from)
		}
		if len(b) > 1<<20 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	b = append(b, "inactive(O0);\nstep();\n"...)
	ids := make([]int, 0, len(d.Participants))
	for _, p := range d.Participants {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b = fmt.Appendf(b, "complete(O%d);\n", id)
	}
	b = append(b, "complete(O0);\n.PE\n"...)
	_, err := w.Write(b)
	return err
}
