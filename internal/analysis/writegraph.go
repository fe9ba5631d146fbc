package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// ErrNoDot says that SVG output needs Graphviz's dot program.
var ErrNoDot = errors.New("analyze: --format svg needs Graphviz's dot program on PATH (Debian/Ubuntu: apt-get install graphviz); or write --format dot and render it with dot -Tsvg elsewhere")

// WriteGraph writes g in format: "json" (indented), "svg" (DOT rendered by
// Graphviz's dot, which must be on PATH: else ErrNoDot) or DOT (anything
// else).
func WriteGraph(ctx context.Context, w io.Writer, g *Graph, format string, o DOTOptions) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(g, "", " ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	case "svg":
		dot, err := exec.LookPath("dot")
		if err != nil {
			return ErrNoDot
		}
		var src bytes.Buffer
		if err := WriteDOT(&src, g, o); err != nil {
			return err
		}
		var errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, dot, "-Tsvg")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = &src, w, &errOut
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("analyze: %s -Tsvg: %v: %s", dot, err, strings.TrimSpace(errOut.String()))
		}
		return nil
	}
	return WriteDOT(w, g, o)
}

// WriteOperations writes the statistics per operation: a table (times in
// milliseconds) or JSON ({"operations": [...]}, times in nanoseconds).
func WriteOperations(w io.Writer, ops []OperationStats, asJSON bool) error {
	if asJSON {
		type row struct {
			Component string `json:"component"`
			Operation string `json:"operation"`
			Count     int64  `json:"count"`
			Min       int64  `json:"minNs"`
			Avg       int64  `json:"avgNs"`
			Max       int64  `json:"maxNs"`
			Total     int64  `json:"totalNs"`
			Self      int64  `json:"selfNs"`
			Errors    int64  `json:"errors"`
		}
		rows := make([]row, 0, len(ops))
		for _, o := range ops {
			rows = append(rows, row{o.Component, o.Operation, o.Count, o.Min, o.Avg(), o.Max, o.Total, o.Self, o.Errors})
		}
		b, err := json.MarshalIndent(map[string]any{"operations": rows}, "", " ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "count\tmin ms\tavg ms\tmax ms\ttotal ms\tself ms\terrors\t  operation")
	ms := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
	for _, o := range ops {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t  %s.%s\n", o.Count, ms(o.Min), ms(o.Avg()), ms(o.Max), ms(o.Total), ms(o.Self), o.Errors,
			o.Component, o.Sig.Short())
	}
	return tw.Flush()
}

// TreeFinder looks for the message trace ID among assembled traces (the
// call tree of one trace, --graph call-tree:ID): Add each trace; Tree is
// the first message trace of that id, Invalid why Kieker's analysis drops
// it when it does.
type TreeFinder struct {
	ID      string
	Options Options

	Tree    *MessageTrace
	Invalid *Invalid
}

// Add looks at the message traces of t, until the tree is found.
func (f *TreeFinder) Add(t *trace.Trace) {
	if f.Tree != nil {
		return
	}
	ms, inv := Messages(t, f.Options)
	for _, m := range ms {
		if m.ID == f.ID {
			f.Tree = m
			return
		}
	}
	for _, v := range inv {
		if v.ID == f.ID && f.Invalid == nil {
			f.Invalid = &v
		}
	}
}
