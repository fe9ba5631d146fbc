package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis/equivalence"
	"github.com/tracebridge/tracebridge/internal/analysis/sequence"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// kiekerOut is which of Kieker's trace-analysis text outputs analyze
// writes.
type kiekerOut struct {
	exec, msg bool
	sys       bool // the system model
	equiv     equivalence.Mode
	seq       sequence.Mode
	seqID     string // the one trace to draw ("": all)
	short     bool
	macros    string // sequence.pic's content
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (k kiekerOut) count() int {
	return btoi(k.exec) + btoi(k.msg) + btoi(k.sys) + btoi(k.equiv != 0) + btoi(k.seq != 0)
}

// write writes the one output asked for.
func (k kiekerOut) write(w io.Writer, m *sysmodel.Model, asJSON bool) error {
	traces := m.Finish()
	switch {
	case k.sys && asJSON:
		return writeJSON(w, m.Repo.JSON())
	case k.sys:
		return m.Repo.WriteHTML(w)
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
	return k.writeTraces(w, traces)
}

// writeTraces writes the execution traces (or, with k.msg, the message
// traces) as text.
func (k kiekerOut) writeTraces(w io.Writer, traces []*sysmodel.ExecutionTrace) error {
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

// sequences draws the sequence diagrams: the one trace k.seqID names into
// w, or every trace into directory dir with Kieker's file names
// (deploymentSequenceDiagram-<traceId>.pic …); done says it wrote the
// files.
func (k kiekerOut) sequences(w io.Writer, traces []*sysmodel.ExecutionTrace, format, dir string) (done bool, err error) {
	if k.seqID != "" {
		for _, t := range traces {
			if t.ID == k.seqID {
				return false, k.draw(w, t, format)
			}
		}
		return false, fmt.Errorf("analyze: no valid trace %s (traces Kieker finds invalid are drawn with --include-invalid)", k.seqID)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("analyze: %w", err)
	}
	for _, t := range traces {
		if err := k.drawFile(dir, t, format); err != nil {
			return false, err
		}
	}
	return true, nil
}

// drawFile draws t's sequence diagram into directory dir under Kieker's
// name (deploymentSequenceDiagram-<traceId>.pic …).
func (k kiekerOut) drawFile(dir string, t *sysmodel.ExecutionTrace, format string) error {
	name := filepath.Join(dir, k.seq.FilePrefix()+"-"+t.ID+"."+format)
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	err = k.draw(bw, t, format)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("analyze: %s: %w", name, err)
	}
	return nil
}

// draw writes t's sequence diagram in format.
func (k kiekerOut) draw(w io.Writer, t *sysmodel.ExecutionTrace, format string) error {
	d := sequence.New(t, k.seq, k.short)
	switch format {
	case "svg":
		return d.WriteSVG(w)
	case "json":
		return writeJSON(w, d)
	}
	return d.WritePic(w, k.macros)
}

// analyzeStore hands emit every trace of the store loc names that starts
// within since and until and has a span on one of hosts (any when none),
// oldest first.
func analyzeStore(ctx context.Context, loc *storeLocation, since, until string, hosts []string, emit func(*trace.Trace)) error {
	now := time.Now()
	q := store.Query{Hosts: hosts, Oldest: true, Limit: 1000, HitBudget: time.Hour, TotalBudget: time.Hour}
	var err error
	if q.Since, err = parseWhen(since, now); err != nil {
		return usagef("analyze: --since: %v", err)
	}
	if q.Until, err = parseWhen(until, now); err != nil {
		return usagef("analyze: --until: %v", err)
	}
	st, closeStore, err := loc.open(store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer closeStore()
	dir := loc.loc
	for {
		page, err := st.Search(q)
		if err != nil {
			return fmt.Errorf("analyze: store %s: %w", dir, err)
		}
		for _, s := range page.Traces {
			if err := ctx.Err(); err != nil {
				return err
			}
			t, err := st.Get(s.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("analyze: store %s: trace %s: %w", dir, s.ID, err)
			}
			emit(t)
		}
		if !page.More || page.Cursor == "" {
			return nil
		}
		q.Cursor = page.Cursor
	}
}
