package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	jfrsrc "github.com/tracebridge/tracebridge/internal/source/jfr"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// JFR inputs of cat, convert and analyze --flame: a recording (a file
// beginning with "FLR\0"), a JVM's repository directory or a repository
// root (see jfrsrc.Detect). Everything else is read as Kieker logs.

// readJFR reads a recording or repository once, handing the records (of
// the selected types only) to out. Damaged chunks and events are shown
// through skips, with the file, offset and reason; reading goes on after
// them, and the error returned then says how many there were (exit code
// 1), after every readable record was handed on.
func readJFR(ctx context.Context, path string, types []string, out pipeline.Consumer, skips *skipReporter) (jfrsrc.Stats, error) {
	src, err := jfrsrc.New(jfrsrc.Config{Path: path, Types: types}, jfrsrc.Settings{OnError: skips.report})
	if err != nil {
		return jfrsrc.Stats{}, usagef("%v", err)
	}
	err = src.Run(ctx, out)
	st := src.Stats()
	if err != nil {
		return st, err
	}
	if err := ctx.Err(); err != nil {
		return st, withCode(exitInterrupted, fmt.Errorf("interrupted while reading %s", path))
	}
	if st.Errors > 0 {
		return st, withCode(exitData, fmt.Errorf("%s: %d damaged chunks or events skipped (shown above); every readable event was read", path, st.Errors))
	}
	return st, nil
}

const flameSynopsis = `analyze --flame [--kind K | --type T…] [--per-thread | --per-host] [--every DURATION] [--lines] [-o PREFIX] RECORDING.jfr|REPOSITORY|LOGDIR…

Aggregates JFR stacks into folded stacks and an SVG flame graph. --kind
says which events and how they weigh: cpu (jdk.ExecutionSample, counted;
the default), alloc (jdk.ObjectAllocationSample by its weight in bytes,
the class allocated on top), alloc-tlab (jdk.ObjectAllocationInNewTLAB by
tlabSize, jdk.ObjectAllocationOutsideTLAB by allocationSize), lock
(jdk.JavaMonitorEnter and jdk.ThreadPark by duration in ns, the monitor's
or blocker's class on top), io (jdk.FileRead/FileWrite/SocketRead/
SocketWrite by duration in ns), io-bytes (the same by bytes), exceptions
(jdk.JavaExceptionThrow, counted, the class thrown on top), errors
(jdk.JavaErrorThrow). --type counts other events with a stackTrace
instead, such as jdk.NativeMethodSample. The files: PREFIX.folded and
PREFIX.svg (PREFIX: -o, default the first input's name without .jfr, in
the current directory). With
--per-thread, --per-host or --every, also one pair per thread or host and
time window: PREFIX-GROUP-START.folded/.svg. -o - writes the folded stacks
of all samples to standard output instead. Inputs are recordings, JVM
repositories, or Kieker logs holding such samples.
`

// cmdFlame is analyze --flame.
func cmdFlame(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("analyze", flameSynopsis, stderr)
	fs.Bool("flame", true, "draw flame graphs of execution samples")
	perThread := fs.Bool("per-thread", false, "one profile per thread (name and Java thread id)")
	perHost := fs.Bool("per-host", false, "one profile per monitored host (the records' origin)")
	every := fs.Duration("every", 0, "one profile per time window of this length (e.g. 10s, 1m)")
	lines := fs.Bool("lines", false, "keep line numbers in frames (by default samples of a method add up)")
	out := fs.String("o", "", "output `PREFIX`, or - for the folded stacks on standard output")
	var types repeatFlag
	fs.Var(&types, "type", "event types to count instead of a kind (repeatable or comma-separated)")
	kindName := fs.String("kind", "", "what to weigh: "+strings.Join(flame.KindNames(), ", ")+" (default cpu)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("analyze --flame: no recording, repository or log given")
	}
	if *perThread && *perHost {
		return usagef("analyze --flame: --per-thread or --per-host, not both")
	}
	if *every < 0 {
		return usagef("analyze --flame: --every must be positive")
	}
	typeList := splitTypes(types)
	var kind *flame.Kind
	switch {
	case *kindName != "" && len(typeList) > 0:
		return usagef("analyze --flame: --kind or --type, not both")
	case len(typeList) == 0:
		name := *kindName
		if name == "" {
			name = "cpu"
		}
		if kind, err = flame.KindOf(name); err != nil {
			return usagef("analyze --flame: %v", err)
		}
		typeList = kind.Types()
	}
	prefix := *out
	if prefix == "" {
		prefix = strings.TrimSuffix(filepath.Base(filepath.Clean(pos[0])), ".jfr")
	}
	agg := &flame.Aggregator{Kind: kind, Types: typeList, Window: *every}
	if *lines {
		agg.Frame = flame.Identity
	}
	var host string // the origin of the batch being added
	switch {
	case *perThread:
		agg.Group = flame.ThreadOf
	case *perHost:
		agg.Group = func(*record.Record) string { return host }
	}
	feed := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		host = b.Origin.Host
		for i := range b.Records {
			agg.Add(&b.Records[i])
		}
		return nil
	})
	skips := &skipReporter{w: stderr}
	var dataErr error
	for _, p := range pos {
		if jfrsrc.Detect(p) {
			_, err := readJFR(ctx, p, typeList, feed, skips)
			var ee exitError
			if errors.As(err, &ee) && ee.code == exitData {
				dataErr = err // report after writing what was read
				continue
			}
			if err != nil {
				return err
			}
			continue
		}
		r, err := kiekerlog.Open(p, kiekerlog.Options{Catalog: record.Builtin(), OnSkip: skips.report})
		if err != nil {
			return err
		}
		if err := r.Run(ctx, feed); err != nil {
			return err
		}
		// A log's host is its KiekerMetadataRecord's, not known here.
	}
	merged := agg.Merged()
	if merged.Total() == 0 {
		return errors.Join(fmt.Errorf("analyze --flame: no samples of %s in %s", strings.Join(typeList, ", "), strings.Join(pos, ", ")), dataErr)
	}
	if prefix == "-" {
		if err := merged.WriteFolded(stdout); err != nil {
			return err
		}
		return dataErr
	}
	if err := agg.WriteFiles(prefix, pos, func(name string) { fmt.Fprintf(stdout, "%s.folded\n%s.svg\n", name, name) }); err != nil {
		return err
	}
	unit := "samples"
	if kind != nil {
		unit = kind.Unit
	}
	fmt.Fprintf(stderr, "tracebridge: %d %s, %d distinct stacks", merged.Total(), unit, merged.Len())
	if agg.Group != nil || agg.Window > 0 {
		fmt.Fprintf(stderr, ", %d profiles", len(agg.Profiles()))
	}
	if agg.Dropped > 0 {
		fmt.Fprintf(stderr, " (%d samples of further profiles dropped: more than 10,000 profiles)", agg.Dropped)
	}
	fmt.Fprintln(stderr)
	return dataErr
}
