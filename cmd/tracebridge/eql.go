package main

import (
	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// compileEQL compiles an EQL expression into the store's trace predicate
// (the root span, or any span with deep).
func compileEQL(expr string) (func(*trace.Trace, bool) bool, error) {
	e, err := eql.Parse(expr)
	if err != nil {
		return nil, err
	}
	return e.MatchTrace, nil
}
