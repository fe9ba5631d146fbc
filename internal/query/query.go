// Package query answers the questions of `tracebridge query` from a trace
// store on disk (Local) or from a running bridge over its HTTP API
// (Remote): one interface, Source, over both, so that the command prints
// the same for either.
//
// Errors are the store's where both can fail alike: store.ErrBadCursor
// for a cursor the store did not make, store.ErrNotFound (wrapped with the
// trace id) for an unknown trace. Remote's own failures are a
// *BadRequestError (the bridge refused a malformed request),
// ErrUnauthorized (a token is missing or wrong) and ErrUnreachable (the
// bridge could not be asked).
package query

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Source answers the queries.
type Source interface {
	Search(ctx context.Context, q store.Query) (api.SearchResult, error)
	Pivot(ctx context.Context, q store.Query, key string) ([]store.PivotRow, bool, error)
	// Trace returns the trace as JSON (with a newline) or as its tree.
	Trace(ctx context.Context, id string, asJSON bool) ([]byte, error)
	Rank(ctx context.Context, id string) ([]trace.MethodStat, error)
	// Find returns the spans holding text (~REGEX: matching it) in the
	// fields (fieldsText is the same fields as the API spells them).
	Find(ctx context.Context, id, text string, fields trace.Fields, fieldsText string, ignoreCase bool) ([]api.Hit, error)
}

// Local reads a store.
type Local struct{ Store *store.Store }

var _ Source = Local{}

func (l Local) Search(_ context.Context, q store.Query) (api.SearchResult, error) {
	page, err := l.Store.Search(q)
	if err != nil {
		return api.SearchResult{}, err
	}
	res := api.SearchResult{More: page.More, Cursor: page.Cursor, Partial: page.Partial}
	for _, t := range page.Traces {
		res.Traces = append(res.Traces, api.NewSummary(t))
	}
	return res, nil
}

func (l Local) Pivot(_ context.Context, q store.Query, key string) ([]store.PivotRow, bool, error) {
	return l.Store.Pivot(q, key)
}

func (l Local) get(id string) (*trace.Trace, error) {
	tid, _ := trace.ParseID(id)
	t, err := l.Store.Get(tid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("trace %s: %w", id, err)
	}
	return t, err
}

func (l Local) Trace(_ context.Context, id string, asJSON bool) ([]byte, error) {
	t, err := l.get(id)
	if err != nil {
		return nil, err
	}
	if asJSON {
		return append(trace.AppendJSON(nil, t), '\n'), nil
	}
	var b strings.Builder
	trace.WriteText(&b, t)
	return []byte(b.String()), nil
}

func (l Local) Rank(_ context.Context, id string) ([]trace.MethodStat, error) {
	t, err := l.get(id)
	if err != nil {
		return nil, err
	}
	return trace.Rank(t), nil
}

// Find: a ~REGEX that does not compile is an error.
func (l Local) Find(_ context.Context, id, text string, fields trace.Fields, _ string, ignoreCase bool) ([]api.Hit, error) {
	var re *regexp.Regexp
	if r, ok := strings.CutPrefix(text, "~"); ok {
		if ignoreCase {
			r = "(?i)" + r
		}
		var err error
		if re, err = regexp.Compile(r); err != nil {
			return nil, err
		}
	}
	t, err := l.get(id)
	if err != nil {
		return nil, err
	}
	var hits []api.Hit
	for _, i := range trace.Find(t, text, re, fields, ignoreCase) {
		sp := &t.Spans[i]
		hits = append(hits, api.Hit{Index: i, SpanID: sp.SpanID.String(), Depth: sp.Depth, Operation: sp.Operation, Component: sp.Component, DurationNs: sp.Duration()})
	}
	return hits, nil
}
