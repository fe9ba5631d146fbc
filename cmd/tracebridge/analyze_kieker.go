package main

import (
	"encoding/json"
	"io"

	"github.com/tracebridge/tracebridge/internal/analysis/equivalence"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
)

// kiekerOut is which of Kieker's trace-analysis text outputs analyze
// writes.
type kiekerOut struct {
	exec, msg bool
	equiv     equivalence.Mode
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (k kiekerOut) count() int { return btoi(k.exec) + btoi(k.msg) + btoi(k.equiv != 0) }

// write writes the one output asked for.
func (k kiekerOut) write(w io.Writer, traces []*sysmodel.ExecutionTrace, asJSON bool) error {
	switch {
	case k.equiv != 0:
		c := equivalence.New(k.equiv)
		for _, t := range traces {
			c.Add(t)
		}
		classes := c.Classes()
		if asJSON {
			return writeJSON(w, equivalence.JSON(k.equiv, classes))
		}
		return equivalence.Write(w, classes)
	case asJSON:
		return writeJSON(w, sysmodel.TracesJSON(traces, k.msg))
	}
	var b []byte
	for _, t := range traces {
		if k.exec {
			b = sysmodel.AppendExecutionTrace(b, t)
		} else {
			b = sysmodel.AppendMessageTrace(b, t)
		}
		if len(b) > 1<<20 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
