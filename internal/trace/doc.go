// Package trace is tracebridge's knowledge of traces: which record types
// belong to traces and where their trace fields sit (Classify, TypeCache).
// It imports only the record model, so stages, sinks and commands that
// work on traces share one classification.
package trace
