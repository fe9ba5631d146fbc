package main

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/trace"
)

const tracesSynopsis = `traces [--json] [--trace-id ID] [--min-duration D] [--errors] [--window D] [-L PATH…] LOGDIR…

Assembles the traces of Kieker logs (event traces across threads,
OperationExecutionRecord traces across hosts, logs written from OTLP) and
prints each as an indented call tree with durations, hosts and threads, or
with --json one JSON object per trace and line.`

func cmdTraces(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("traces", tracesSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per trace and line")
	traceID := fs.String("trace-id", "", "print only this trace (decimal Kieker traceId or 32 hex digits)")
	minDur := fs.Duration("min-duration", 0, "print only traces at least this long (e.g. 5ms)")
	errs := fs.Bool("errors", false, "print only traces with a span in error")
	window := fs.Duration("window", trace.DefaultWindow, "a trace is complete when the log's time has moved this far past its last record")
	maxOpen := fs.Int("max-open-traces", trace.DefaultMaxOpenTraces, "traces assembled at once; beyond, the one idle longest is printed early")
	maxSpans := fs.Int("max-spans", trace.DefaultMaxSpans, "spans held per trace; a larger trace is printed in parts")
	strict := fs.Bool("strict", false, "stop at a record whose type is not in the catalogue")
	libs := libsFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("traces: no log directory given")
	}
	var want trace.ID
	if *traceID != "" {
		if want, err = trace.ParseID(*traceID); err != nil {
			return usagef("traces: --trace-id: %v", err)
		}
	}
	if *minDur < 0 || *window <= 0 {
		return usagef("traces: --min-duration must not be negative, --window must be positive")
	}
	cat, err := loadCatalog(*libs)
	if err != nil {
		return err
	}
	if err := trace.AddTypes(cat); err != nil {
		return withCode(exitConfig, err)
	}
	out := bufio.NewWriterSize(stdout, 256<<10)
	defer out.Flush()
	var line []byte
	var werr error
	var assembled, printed int
	a := trace.NewAssembler(trace.Options{
		Clock: trace.RecordClock, Window: *window, MaxOpenTraces: *maxOpen, MaxSpans: *maxSpans,
		Emit: func(t *trace.Trace) {
			assembled++
			if werr != nil || *traceID != "" && t.ID != want || t.Duration() < int64(*minDur) || *errs && t.Errors() == 0 {
				return
			}
			printed++
			if *asJSON {
				line = append(trace.AppendJSON(line[:0], t), '\n')
				_, werr = out.Write(line)
				return
			}
			werr = trace.WriteText(out, t)
		},
	})
	var sum kiekerlog.Stats
	skips := &skipReporter{w: stderr}
	for _, p := range pos {
		r, err := kiekerlog.Open(p, kiekerlog.Options{Catalog: cat, Strict: *strict, OnSkip: skips.report})
		if err != nil {
			return err
		}
		err = r.Run(ctx, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			a.AddBatch(b)
			a.Tick()
			return werr
		}))
		sum.Add(r.Stats())
		if err != nil {
			return err
		}
	}
	a.Flush()
	if werr != nil {
		return werr
	}
	if err := out.Flush(); err != nil {
		return err
	}
	reportSkipped(stderr, sum)
	if printed == 0 {
		fmt.Fprintf(stderr, "tracebridge: no trace matched (%d assembled)\n", assembled)
	}
	st := a.Stats()
	if st.Untraced > 0 {
		fmt.Fprintf(stderr, "tracebridge: %d OperationExecutionRecords ran outside any trace (traceId -1)\n", st.Untraced)
	}
	if st.Duplicates > 0 {
		fmt.Fprintf(stderr, "tracebridge: %d duplicate records dropped (the same event, execution or span twice in a trace)\n", st.Duplicates)
	}
	if st.Evicted > 0 || st.Early > 0 || st.Parts > 0 {
		fmt.Fprintf(stderr, "tracebridge: %d traces printed early (--max-open-traces), %d Kieker traces that looked whole printed early (the events held reached %d), %d parts of traces over --max-spans\n", st.Evicted, st.Early, trace.DefaultMaxHeldEvents, st.Parts)
	}
	return nil
}
