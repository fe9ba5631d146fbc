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
	"github.com/tracebridge/tracebridge/internal/analysis/reconstruct"
	"github.com/tracebridge/tracebridge/internal/analysis/sequence"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
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

// fromLogs writes the one Kieker output asked for from the Kieker logs in
// dirs, reconstructing traces as Kieker's trace-analysis tool does
// (internal/analysis/reconstruct): each trace is written, drawn or
// classified as it is handed on, so memory holds the open traces and the
// system model, not the log. out is -o (a directory for every sequence
// diagram; "" is stdout).
func (k kiekerOut) fromLogs(ctx context.Context, dirs []string, o kiekerlog.Options, format, out string, stdout, stderr io.Writer) (err error) {
	dst, seqDir := stdout, ""
	switch {
	case k.seq != 0 && k.seqID == "":
		seqDir = out
		if err := os.MkdirAll(seqDir, 0o755); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
	case out != "":
		f, err := os.Create(out)
		if err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("analyze: %w", cerr)
			}
		}()
		dst = f
	}
	w := bufio.NewWriterSize(dst, 1<<20)
	asJSON := format == "json"
	var classes *equivalence.Classifier
	if k.equiv != 0 {
		classes = equivalence.New(k.equiv)
	}
	var (
		buf      []byte
		werr     error
		found    bool
		nJSON    int
		invalid  []string
		nInvalid int
	)
	write := func(b []byte) {
		if werr == nil {
			_, werr = w.Write(b)
		}
	}
	valid := func(t *sysmodel.ExecutionTrace) {
		switch {
		case werr != nil:
		case seqDir != "":
			werr = k.drawFile(seqDir, t, format)
		case k.seq != 0:
			if t.ID == k.seqID && !found {
				found = true
				werr = k.draw(w, t, format)
			}
		case classes != nil:
			classes.Add(t)
		case k.sys:
		case asJSON:
			b, err := json.MarshalIndent(t.JSON(k.msg), "  ", "  ")
			if err != nil {
				werr = err
				return
			}
			if nJSON == 0 {
				write([]byte("[\n  "))
			} else {
				write([]byte(",\n  "))
			}
			nJSON++
			write(b)
		case k.exec:
			buf = sysmodel.AppendExecutionTrace(buf[:0], t)
			write(buf)
		default:
			buf = sysmodel.AppendMessageTrace(buf[:0], t)
			write(buf)
		}
	}
	inv := func(v *reconstruct.Invalid) {
		nInvalid++
		if len(invalid) < 5 {
			invalid = append(invalid, v.String())
		}
	}
	repo := sysmodel.NewRepository()
	rc := reconstruct.New(repo, reconstruct.Options{Valid: valid, Invalid: inv})
	feed := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		rc.Add(b)
		return werr
	})
	skips := &skipReporter{w: stderr}
	o.OnSkip = skips.report
	var sum kiekerlog.Stats
	for _, p := range dirs {
		r, err := kiekerlog.Open(p, o)
		if err != nil {
			return err
		}
		err = r.Run(ctx, feed)
		sum.Add(r.Stats())
		if err != nil {
			if werr != nil {
				return fmt.Errorf("analyze: %w", werr)
			}
			return err
		}
	}
	rc.Finish()
	reportSkipped(stderr, sum)
	switch {
	case werr != nil:
	case k.seq != 0 && seqDir == "" && !found:
		return fmt.Errorf("analyze: no valid trace %s (traces Kieker finds invalid are drawn with --include-invalid)", k.seqID)
	case k.sys && asJSON:
		werr = writeJSON(w, repo.JSON())
	case k.sys:
		werr = repo.WriteHTML(w)
	case classes != nil && asJSON:
		werr = writeJSON(w, equivalence.JSON(k.equiv, classes.Classes()))
	case classes != nil:
		werr = equivalence.Write(w, classes.Classes())
	case asJSON && k.seq == 0 && nJSON == 0:
		write([]byte("[]\n"))
	case asJSON && k.seq == 0:
		write([]byte("\n]\n"))
	}
	if werr == nil {
		werr = w.Flush()
	}
	if werr != nil {
		return fmt.Errorf("analyze: %w", werr)
	}
	s := rc.Stats()
	fmt.Fprintf(stderr, "tracebridge: analysed %d traces (%d calls)", s.Valid, s.Executions)
	if nInvalid == 0 {
		fmt.Fprintln(stderr)
		return nil
	}
	fmt.Fprintf(stderr, "; left out %d invalid traces as Kieker's trace analysis does (--include-invalid keeps them)\n", nInvalid)
	for _, v := range invalid {
		fmt.Fprintf(stderr, "tracebridge: invalid: %s\n", v)
	}
	if nInvalid > len(invalid) {
		fmt.Fprintf(stderr, "tracebridge: (%d more invalid traces not shown)\n", nInvalid-len(invalid))
	}
	return nil
}
