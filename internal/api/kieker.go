package api

import (
	"bytes"
	"net/http"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/analysis/equivalence"
	"github.com/tracebridge/tracebridge/internal/analysis/sequence"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// SequenceResult is the UML sequence diagrams of a stored trace: one per
// Kieker trace in it (a thread's part of a Kieker trace, the OERs of a
// traceId) or one for a span trace, numbered as Kieker's trace-analysis
// would number them for this trace alone; Invalid lists the parts
// Kieker's rules drop.
type SequenceResult struct {
	Diagrams []*sequence.Diagram `json:"diagrams"`
	Invalid  []InvalidPart       `json:"invalid"`
}

// InvalidPart is a part of a trace Kieker's trace analysis drops.
type InvalidPart struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Calls  int    `json:"calls"`
}

func invalidParts(inv []analysis.Invalid) []InvalidPart {
	out := make([]InvalidPart, 0, len(inv))
	for _, v := range inv {
		out = append(out, InvalidPart{v.ID, v.Reason, v.Calls})
	}
	return out
}

func traceSequence(c *call) error {
	mode := c.oneOf("mode", "assembly", "assembly", "deployment")
	format := c.oneOf("format", "json", "json", "svg", "pic")
	short := c.bool("shortLabels")
	index := c.int("index", 0, 0, 1<<20)
	t, err := c.trace()
	if err != nil {
		return err
	}
	m, _ := sequence.ParseMode(mode)
	ms, inv := analysis.Messages(t, analysis.Options{})
	model := sysmodel.New()
	for _, mt := range ms {
		model.Add(mt)
	}
	res := SequenceResult{Diagrams: []*sequence.Diagram{}, Invalid: invalidParts(inv)}
	for _, et := range model.Finish() {
		res.Diagrams = append(res.Diagrams, sequence.New(et, m, short))
	}
	if format == "json" {
		return c.json(res)
	}
	if index >= len(res.Diagrams) {
		return errorf(http.StatusNotFound, "trace %s has %d diagrams (Kieker finds %d parts invalid): no diagram %d", t.ID, len(res.Diagrams), len(inv), index)
	}
	var b bytes.Buffer
	if format == "svg" {
		if err := res.Diagrams[index].WriteSVG(&b); err != nil {
			return err
		}
		return c.raw("image/svg+xml", b.Bytes())
	}
	if err := res.Diagrams[index].WritePic(&b, ""); err != nil {
		return err
	}
	return c.raw("text/plain; charset=utf-8", b.Bytes())
}

// EquivalenceResult is Kieker's trace equivalence classes of the selected
// traces, in Kieker's order.
type EquivalenceResult struct {
	Mode    string                  `json:"mode"`
	Classes []equivalence.ClassJSON `json:"classes"`
	Summary AnalysisSummary         `json:"summary"`
}

func analysisEquivalence(c *call) error {
	mode := c.oneOf("mode", "assembly", "assembly", "deployment")
	st, err := c.store()
	if err != nil {
		return err
	}
	q := c.filters(10 * time.Second)
	max := c.int("maxTraces", 10_000, 1, 1_000_000)
	if err := c.check(); err != nil {
		return err
	}
	m, _ := equivalence.ParseMode(mode)
	a := analysis.New(analysis.Options{})
	model := sysmodel.New()
	a.Each = model.Add
	sum, err := scan(c.ctx, st, q, max, q.TotalBudget, func(t *trace.Trace) bool {
		a.Add(t)
		return true
	})
	if err != nil {
		return err
	}
	cl := equivalence.New(m)
	for _, et := range model.Finish() {
		cl.Add(et)
	}
	res := equivalence.JSON(m, cl.Classes())
	if res.Classes == nil {
		res.Classes = []equivalence.ClassJSON{}
	}
	return c.json(EquivalenceResult{Mode: res.Mode, Classes: res.Classes, Summary: summaryOf(a, sum)})
}
