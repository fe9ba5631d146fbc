package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Summary is a trace found: what `tracebridge query --json` prints per
// line (the root span's attributes with their JSON types).
type Summary struct {
	Host string `json:"host"`
	// Service is the root span's service, when it has one.
	Service    string `json:"service,omitempty"`
	TraceID    string `json:"traceId"`
	Start      int64  `json:"start"`
	DurationNs int64  `json:"durationNs"`
	Name       string `json:"name"`
	Spans      int    `json:"spans"`
	Errors     int    `json:"errors"`
	Error      bool   `json:"error"`
	// Broken: the assembler marked the trace broken (the reasons are in
	// the trace and its view).
	Broken     bool                       `json:"broken,omitempty"`
	Attributes map[string]json.RawMessage `json:"attributes"`
}

// NewSummary renders a store's summary.
func NewSummary(t store.Summary) Summary {
	attrs := make(map[string]json.RawMessage, len(t.Attrs))
	for _, a := range t.Attrs {
		attrs[a.Key] = trace.AttrJSON(a)
	}
	return Summary{t.Host, t.Service, t.TraceID, t.Start, t.Duration, t.Name, t.Spans, t.Errors, t.Error, t.Broken, attrs}
}

// SearchResult is a page of a search.
type SearchResult struct {
	Traces []Summary `json:"traces"`
	// More: there may be more; Cursor continues after this page.
	More   bool   `json:"more"`
	Cursor string `json:"cursor"`
	// Partial: the time budget ended the search early.
	Partial bool `json:"partial"`
	// Scanned counts the index entries looked at.
	Scanned int `json:"scanned"`
}

// filters reads the store filters of a request (docs/QUERY.md); budget
// is the default of the budget parameter.
func (c *call) filters(budget time.Duration) store.Query {
	now := c.a.opt.Now()
	q := store.Query{
		Hosts:       c.strs("host"),
		Since:       c.when("since", now),
		Until:       c.when("until", now),
		MinDuration: c.dur("minDuration", 0, 0, 1<<62),
		MaxDuration: c.dur("maxDuration", 0, 0, 1<<62),
		Errors:      c.bool("errors"),
		Name:        c.str("name"),
		Service:     c.str("service"),
		Deep:        c.bool("deep"),
		TotalBudget: c.dur("budget", budget, time.Millisecond, maxBudget),
	}
	if q.Since != 0 && q.Until != 0 && q.Since > q.Until {
		c.bad("since", "after until")
	}
	if q.MaxDuration != 0 && q.MinDuration > q.MaxDuration {
		c.bad("minDuration", "above maxDuration")
	}
	for _, a := range c.strs("attr") {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			c.bad("attr", "%q: want KEY=VALUE", a)
			continue
		}
		q.Attrs = append(q.Attrs, trace.Attr{Key: k, Value: v})
	}
	if text := c.str("q"); text != "" {
		if expr, ok := strings.CutPrefix(text, "~"); ok {
			re, err := compileRegex(expr)
			if err != nil {
				c.bad("q", "~REGEX: %v", err)
			}
			q.Regex = re
		} else {
			q.Text = text
		}
	}
	if e := c.str("eql"); e != "" {
		x, err := eql.Parse(e)
		if err != nil {
			c.bad("eql", "%v", err)
		} else {
			q.SetEQL(x) // Match, and what it requires for the indexes
		}
	}
	if op := c.str("operation"); op != "" {
		q.Match = withOperation(q.Match, op, q.Service)
	}
	return q
}

// withOperation narrows match (nil: every trace) to traces with a span
// of operation op and, when svc is not "", of service svc as Jaeger's
// API and /api/v1/names name services (store.ServiceOf): the search page's
// service and operation drop-downs, as Jaeger's search has them.
func withOperation(match func(*trace.Trace, bool) bool, op, svc string) func(*trace.Trace, bool) bool {
	return func(t *trace.Trace, deep bool) bool {
		if match != nil && !match(t, deep) {
			return false
		}
		for i := range t.Spans {
			s := &t.Spans[i]
			if s.Operation == op && (svc == "" || store.ServiceOf(s) == svc) {
				return true
			}
		}
		return false
	}
}

func searchTraces(c *call, st *store.Store) error {
	q := c.filters(5 * time.Second)
	q.Oldest = c.bool("oldest")
	q.Limit = c.int("limit", 20, 1, 100_000)
	q.Cursor = c.str("cursor")
	if err := c.check(); err != nil {
		return err
	}
	page, err := st.Search(q)
	if errors.Is(err, store.ErrBadCursor) {
		return errorf(http.StatusBadRequest, "cursor: not a cursor this store made")
	}
	if err != nil {
		return err
	}
	res := SearchResult{Traces: make([]Summary, 0, len(page.Traces)), More: page.More, Cursor: page.Cursor, Partial: page.Partial, Scanned: page.Scanned}
	for _, t := range page.Traces {
		res.Traces = append(res.Traces, NewSummary(t))
	}
	return c.json(res)
}

// PivotResult is a pivot's rows.
type PivotResult struct {
	Key     string           `json:"key"`
	Rows    []store.PivotRow `json:"rows"`
	Partial bool             `json:"partial"`
}

func pivot(c *call, st *store.Store) error {
	key := c.str("key")
	if key == "" {
		c.bad("key", "required: the root span's attribute to group by")
	}
	q := c.filters(5 * time.Second)
	if err := c.check(); err != nil {
		return err
	}
	rows, partial, err := st.Pivot(q, key)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []store.PivotRow{}
	}
	return c.json(PivotResult{Key: key, Rows: rows, Partial: partial})
}

// trace reads the trace of the path parameter id.
func (c *call) trace() (*trace.Trace, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	id := c.traceID("id")
	if err := c.check(); err != nil {
		return nil, err
	}
	t, err := st.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, "trace %s not found", c.str("id"))
	}
	return t, err
}
