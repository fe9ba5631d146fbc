package api

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// ScanSummary says how much of the selection an analysis read.
type ScanSummary struct {
	// Traces read; Partial: the time budget ended the reading; Limited:
	// maxTraces ended it while more traces were selected.
	Traces  int  `json:"traces"`
	Partial bool `json:"partial"`
	Limited bool `json:"limited"`
}

// scan hands fn the traces q selects, in q's order, at most max of them,
// within budget; fn returns false to stop. Traces retention removed
// between the index and the read are skipped.
func scan(ctx context.Context, st *store.Store, q store.Query, max int, budget time.Duration, fn func(*trace.Trace) bool) (ScanSummary, error) {
	var sum ScanSummary
	deadline := time.Now().Add(budget)
	q.Cursor = ""
	q.Limit = min(1000, max)
	for {
		rem := time.Until(deadline)
		if rem <= 0 {
			sum.Partial = true
			return sum, nil
		}
		q.TotalBudget, q.HitBudget = rem, rem
		page, err := st.Search(q)
		if err != nil {
			return sum, err
		}
		for i, s := range page.Traces {
			if ctx.Err() != nil || time.Now().After(deadline) {
				sum.Partial = true
				return sum, nil
			}
			if sum.Traces >= max {
				sum.Limited = true
				return sum, nil
			}
			t, err := st.Get(s.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return sum, err
			}
			sum.Traces++
			if !fn(t) {
				sum.Limited = i < len(page.Traces)-1 || page.More
				return sum, nil
			}
		}
		if !page.More {
			return sum, nil
		}
		if page.Cursor == "" {
			sum.Partial = true
			return sum, nil
		}
		if sum.Traces >= max {
			sum.Limited = true
			return sum, nil
		}
		q.Cursor = page.Cursor
	}
}

// analyze runs Kieker's analyses over the traces a request selects.
func (c *call) analyze() (*analysis.Analyzer, ScanSummary, error) {
	st, err := c.store()
	if err != nil {
		return nil, ScanSummary{}, err
	}
	q := c.filters(10 * time.Second)
	max := c.int("maxTraces", 10_000, 1, 1_000_000)
	if err := c.check(); err != nil {
		return nil, ScanSummary{}, err
	}
	a := analysis.New(analysis.Options{})
	sum, err := scan(c.ctx, st, q, max, q.TotalBudget, func(t *trace.Trace) bool {
		a.Add(t)
		return true
	})
	return a, sum, err
}

// AnalysisSummary is what an analysis read and took.
type AnalysisSummary struct {
	ScanSummary
	// Messages counts the (Kieker) traces analysed, Calls their
	// executions, Invalid the traces Kieker's rules drop.
	Messages int64 `json:"messages"`
	Calls    int64 `json:"calls"`
	Invalid  int64 `json:"invalid"`
}

func summaryOf(a *analysis.Analyzer, s ScanSummary) AnalysisSummary {
	as := a.Summary()
	return AnalysisSummary{s, as.Messages, as.Calls, as.Invalid}
}

// GraphResult is a dependency graph or an aggregated call tree.
type GraphResult struct {
	Kind    string          `json:"kind"`
	Graph   *analysis.Graph `json:"graph"`
	Summary AnalysisSummary `json:"summary"`
}

func analysisGraph(c *call) error {
	kindName := c.oneOf("kind", "assembly-operation", "container", "deployment-component", "assembly-component",
		"deployment-operation", "assembly-operation", "aggregated-deployment-call-tree", "aggregated-assembly-call-tree")
	format := c.oneOf("format", "json", "json", "dot")
	selfLoops := c.bool("selfLoops")
	kind, err := analysis.ParseKind(kindName)
	if err != nil {
		c.bad("kind", "%v", err)
	}
	a, sum, err := c.analyze()
	if err != nil {
		return err
	}
	g, err := a.Graph(kind)
	if err != nil {
		return err
	}
	if kind.Dependency() && !selfLoops {
		g = g.WithoutSelfLoops()
	}
	if format == "dot" {
		var b bytes.Buffer
		if err := analysis.WriteDOT(&b, g, analysis.DOTOptions{}); err != nil {
			return err
		}
		return c.raw("text/vnd.graphviz; charset=utf-8", b.Bytes())
	}
	return c.json(GraphResult{Kind: kindName, Graph: g, Summary: summaryOf(a, sum)})
}

// OperationRow is the response times of one operation.
type OperationRow struct {
	Component string `json:"component"`
	Operation string `json:"operation"`
	Count     int64  `json:"count"`
	Errors    int64  `json:"errors"`
	MinNs     int64  `json:"minNs"`
	AvgNs     int64  `json:"avgNs"`
	MaxNs     int64  `json:"maxNs"`
	TotalNs   int64  `json:"totalNs"`
	SelfNs    int64  `json:"selfNs"`
}

// OperationsResult is the statistics per operation, most total time
// first.
type OperationsResult struct {
	Operations []OperationRow  `json:"operations"`
	Summary    AnalysisSummary `json:"summary"`
}

func analysisOperations(c *call) error {
	a, sum, err := c.analyze()
	if err != nil {
		return err
	}
	res := OperationsResult{Operations: []OperationRow{}, Summary: summaryOf(a, sum)}
	for _, o := range a.Operations() {
		res.Operations = append(res.Operations, OperationRow{o.Component, o.Operation, o.Count, o.Errors, o.Min, o.Avg(), o.Max, o.Total, o.Self})
	}
	return c.json(res)
}
