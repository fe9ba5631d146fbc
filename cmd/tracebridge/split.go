package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/handoff"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/progress"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/stage/split"
)

const splitSynopsis = `split --boundary SPEC [--boundary SPEC…] [flags] IN OUT
       tracebridge split --merge [flags] IN OUT

Cuts every trace of the Kieker logs in IN where a call crosses a component
boundary into linked partial traces, and writes one log per input log under
OUT (named like the input's). --merge puts split traces back together.

Boundary specs (the first that matches a class names its component; a class
none matches is in a component of its own):
  package:N          the first N segments of the class's package
  regex:P1 P2 …      each pattern (matching the whole class name) a component
  map:FILE           lines pattern=component; # comments

Merge with the --max-* limits the split used (the defaults, normally).`

// splitMaxEntries is split's default number of records per data file.
const splitMaxEntries = 1_000_000

// specList collects repeated --boundary flags (a spec holds ':', so
// listFlag's splitting does not fit).
type specList []string

func (l *specList) String() string { return strings.Join(*l, ";") }

func (l *specList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

type splitFlags struct {
	boundaries specList
	merge      bool
	to         string
	compress   string
	maxEntries int
	skipBad    bool
	opts       split.Options
}

func cmdSplit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("split", splitSynopsis, stderr)
	var f splitFlags
	fs.Var(&f.boundaries, "boundary", "boundary spec: package:N, regex:PATTERN… or map:FILE (repeatable; ';' separates several)")
	fs.BoolVar(&f.merge, "merge", false, "put split traces back together instead of splitting")
	fs.StringVar(&f.to, "to", "", "output format: ascii or binary (default: that of each input log)")
	fs.StringVar(&f.compress, "compress", "none", "compression of the data files: none, deflate, gzip, zip or xz")
	fs.IntVar(&f.maxEntries, "max-entries", splitMaxEntries, "records per data file (Kieker's maxEntriesInFile; its default, 25000, makes thousands of files of a huge trace)")
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip malformed records instead of stopping, and report how many")
	fs.IntVar(&f.opts.MaxOpenTraces, "max-open-traces", split.DefaultMaxOpenTraces, "traces tracked at once; the least recently active beyond is passed through unsplit")
	fs.IntVar(&f.opts.MaxDepth, "max-depth", split.DefaultMaxDepth, "open calls per trace; a deeper trace passes through unsplit")
	fs.IntVar(&f.opts.MaxFrames, "max-frames", split.DefaultMaxFrames, "open calls of all traces together")
	fs.IntVar(&f.opts.MaxBuffered, "max-buffered", split.DefaultMaxBuffered, "records held back for incomplete OperationExecutionRecord traces")
	libs := libsFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("split: want IN and OUT, got %d arguments", len(pos))
	}
	var bounds *split.Boundaries
	switch {
	case f.merge && len(f.boundaries) > 0:
		return usagef("split: --merge takes no --boundary")
	case !f.merge && len(f.boundaries) == 0:
		return usagef("split: no --boundary given (package:N, regex:PATTERN… or map:FILE)")
	case !f.merge:
		bounds, err = split.Parse(f.boundaries...)
		if errors.Is(err, split.ErrMapFile) {
			return withCode(exitConfig, err)
		}
		if err != nil {
			return usagef("split: %v", err)
		}
	}
	var binary *bool
	switch f.to {
	case "":
	case "ascii", "binary":
		b := f.to == "binary"
		binary = &b
	default:
		return usagef("split: --to must be ascii or binary")
	}
	comp, err := logdir.ParseCompression(f.compress)
	if err != nil {
		return usagef("split: --compress: %v", err)
	}
	if f.maxEntries <= 0 {
		return usagef("split: --max-entries must be positive")
	}
	for _, lim := range []struct {
		name string
		v    int
	}{{"max-open-traces", f.opts.MaxOpenTraces}, {"max-depth", f.opts.MaxDepth}, {"max-frames", f.opts.MaxFrames}, {"max-buffered", f.opts.MaxBuffered}} {
		if lim.v <= 0 {
			return usagef("split: --%s must be positive", lim.name)
		}
	}
	cat, err := loadCatalog(*libs)
	if err != nil {
		return err
	}
	f.opts.Catalog = cat
	f.opts.MaxHold = -1 // the output must not depend on how fast the input is read

	logs, err := logdir.Discover(pos[0])
	if err != nil {
		return err
	}
	readers, bar, total, err := openLogs(logs, srclog.Options{Catalog: cat, SkipBad: f.skipBad}, stderr)
	if err != nil {
		return err
	}
	mal := &malformedReporter{w: stderr, bar: bar}
	f.opts.OnMalformed = mal.report

	start := time.Now()
	var sum split.Stats
	var read srclog.Stats
	for i, l := range logs {
		bin := binary
		if bin == nil {
			b, err := l.Binary()
			if err != nil {
				bar.Stop()
				return err
			}
			bin = &b
		}
		w, err := logwrite.New(logwrite.Config{
			Path:             pos[1],
			Binary:           *bin,
			Compression:      comp,
			MaxEntriesInFile: f.maxEntries,
			BufferSize:       1 << 20,
			NameFromMetadata: true, // the input's own KiekerMetadataRecord is copied
		})
		if err != nil {
			bar.Stop()
			return err
		}
		// Reading and splitting on this goroutine, encoding and writing on
		// another (whose write system calls overlap the encoding, see
		// logdir.Files): two cores.
		out := handoff.New(ctx, w, 4)
		var stage interface {
			pipeline.Consumer
			Finish(context.Context) error
			Stats() split.Stats
		}
		if f.merge {
			stage = split.NewMerger(out, f.opts)
		} else {
			stage = split.New(bounds, out, f.opts)
		}
		runErr := readers[i].Run(ctx, stage)
		if runErr == nil {
			runErr = stage.Finish(ctx)
		}
		handErr := out.Close()
		closeErr := w.Close()
		if err := errors.Join(runErr, handErr, closeErr); err != nil {
			bar.Stop()
			return err
		}
		bar.Pause()
		fmt.Fprintf(stdout, "%s\n", w.Dir())
		bar.Resume()
		sum.Add(stage.Stats())
		read.Add(readers[i].Stats())
	}
	bar.Stop()
	elapsed := time.Since(start)
	printSummary(stderr, f.merge, sum, total, elapsed)
	mal.summary(sum)
	reportSkipped(stderr, read)
	return nil
}

func printSummary(w io.Writer, merge bool, s split.Stats, bytes int64, elapsed time.Duration) {
	rate := float64(bytes) / 1e6 / max(elapsed.Seconds(), 1e-9)
	if merge {
		fmt.Fprintf(w, "tracebridge: merged %d traces in (%d partial traces put back) into %d traces out; deepest nesting %d\n",
			s.TracesIn, s.Partial, s.TracesOut, s.MaxNesting)
	} else {
		fmt.Fprintf(w, "tracebridge: split %d traces in into %d partial traces out (%d cut); deepest nesting %d, deepest call stack %d\n",
			s.TracesIn, s.TracesOut, s.Partial, s.MaxNesting, s.MaxDepth)
	}
	fmt.Fprintf(w, "tracebridge: %d records in, %d out; %s in %.1f s (%.1f MB/s)\n",
		s.RecordsIn, s.RecordsOut, progress.FormatBytes(bytes), elapsed.Seconds(), rate)
}

// malformedReporter prints the first malformed traces as they are found.
type malformedReporter struct {
	w     io.Writer
	bar   *progress.Bar
	shown int
}

const maxShownMalformed = 20

func (m *malformedReporter) report(x split.Malformed) {
	m.shown++
	if m.shown > maxShownMalformed+1 {
		return
	}
	m.bar.Pause()
	if m.shown <= maxShownMalformed {
		fmt.Fprintf(m.w, "tracebridge: passed through unsplit: %v\n", x)
	} else {
		fmt.Fprintln(m.w, "tracebridge: (further malformed traces not shown)")
	}
	m.bar.Resume()
}

func (m *malformedReporter) summary(s split.Stats) {
	if s.Malformed == 0 {
		return
	}
	ids := make([]string, len(s.MalformedIDs))
	for i, id := range s.MalformedIDs {
		ids[i] = fmt.Sprint(id)
	}
	more := ""
	if s.Malformed > int64(len(ids)) {
		more = ", …"
	}
	fmt.Fprintf(m.w, "tracebridge: %d malformed traces passed through unsplit (traceIds %s%s)\n", s.Malformed, strings.Join(ids, ", "), more)
}
