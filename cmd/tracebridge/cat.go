package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/codec/textline"
	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/progress"
	"github.com/tracebridge/tracebridge/internal/record"
	jfrsrc "github.com/tracebridge/tracebridge/internal/source/jfr"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// loadCatalog returns the built-in catalogue extended by the IRL files and
// directories in paths.
func loadCatalog(paths []string) (*record.Catalog, error) {
	cat := trace.Types() // Kieker's types and our span record
	if len(paths) == 0 {
		return cat, nil
	}
	if _, err := irl.LoadInto(cat, paths...); err != nil {
		return nil, withCode(exitConfig, fmt.Errorf("record types (-L): %w", err))
	}
	return cat, nil
}

// skipReporter prints the first skipped records' errors and counts the rest.
type skipReporter struct {
	w     io.Writer
	shown int
	// bar, if it points to a progress bar, is cleared while a line is
	// printed.
	bar **progress.Bar
}

const maxShownSkips = 20

func (s *skipReporter) report(err error) {
	if s.bar != nil {
		(*s.bar).Pause()
		defer (*s.bar).Resume()
	}
	s.shown++
	if s.shown <= maxShownSkips {
		fmt.Fprintf(s.w, "tracebridge: skipped: %v\n", err)
	} else if s.shown == maxShownSkips+1 {
		fmt.Fprintln(s.w, "tracebridge: (further skipped records not shown)")
	}
}

func cmdCat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cat", catSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per record")
	var types repeatFlag
	fs.Var(&types, "type", "print only records of these types: names, names without package, globs such as jdk.GC* (repeatable or comma-separated); JFR inputs decode only those")
	read := logReadFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("cat: no log directory or recording given")
	}
	typeList := splitTypes(types)
	cat, err := loadCatalog(*read.libs)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(stdout, 256<<10)
	defer out.Flush()
	var line []byte
	print := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			line = line[:0]
			if *asJSON {
				line = jsonl.AppendRecord(line, &b.Records[i])
			} else {
				line = textline.AppendRecord(line, &b.Records[i])
			}
			if _, err := out.Write(line); err != nil {
				return err
			}
		}
		return nil
	})
	skips := &skipReporter{w: stderr}
	var sum kiekerlog.Stats
	var dataErrs []error
	filtered, err := jfrsrc.TypeFilter(typeList, print)
	if err != nil {
		return usagef("--type: %v", err)
	}
	for _, p := range pos {
		if jfrsrc.Detect(p) {
			_, err := readJFR(ctx, p, typeList, print, skips)
			var ee exitError
			if errors.As(err, &ee) && ee.code == exitData {
				dataErrs = append(dataErrs, err) // damaged data: the rest was printed
				continue
			}
			if err != nil {
				return err
			}
			continue
		}
		r, err := kiekerlog.Open(p, kiekerlog.Options{Catalog: cat, SkipBad: *read.skipBad, OnSkip: skips.report, Strict: *read.strict, OnCutEnd: warnCutEnd(stderr)})
		if err != nil {
			return err
		}
		err = r.Run(ctx, filtered)
		sum.Add(r.Stats())
		if err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	reportSkipped(stderr, sum)
	if len(dataErrs) > 0 {
		return withCode(exitData, errors.Join(dataErrs...))
	}
	return nil
}

const catSynopsis = `cat [--json] [--type T…] [--skip-bad] [--strict] [-L PATH…] LOGDIR|RECORDING.jfr|REPOSITORY…

Prints the records of Kieker log directories, JFR recordings and JVM JFR
repositories (a JVM's repository directory, or the directory given to
-XX:FlightRecorderOptions:repository, all chunks in order). A JFR event is
a record whose type is the event's name and whose fields are the
recording's, times in epoch nanoseconds and durations in nanoseconds.
Damaged JFR chunks and events are reported with the file, offset and
reason, and skipped; the exit code is then 1.
`

// splitTypes flattens repeated, comma-separated --type values.
func splitTypes(types []string) []string {
	var out []string
	for _, t := range types {
		for _, p := range strings.Split(t, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// warnCutEnd warns about a log whose last data file ends early, as a
// writer killed while writing leaves it (see kiekerlog.Options.OnCutEnd):
// not an error, once per log, naming the file and the offset.
func warnCutEnd(w io.Writer) func(error) {
	return func(err error) {
		fmt.Fprintf(w, "tracebridge: warning: %v: the log's last data file ends early, as a writer killed while writing leaves it; every complete record before that was read\n", err)
	}
}

// reportSkipped says what the log readers skipped: malformed records
// (--skip-bad), and once per type the records whose type is not in the
// catalogue.
func reportSkipped(w io.Writer, s kiekerlog.Stats) {
	switch {
	case s.Skipped == 0:
	case s.SkippedTails == 0:
		fmt.Fprintf(w, "tracebridge: skipped %d malformed records\n", s.Skipped)
	default:
		fmt.Fprintf(w, "tracebridge: skipped %d malformed records; in %d of them the rest of the file could not be read\n", s.Skipped, s.SkippedTails)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Unknown)) {
		fmt.Fprintf(w, "tracebridge: skipped %d records of type %s, which is not in the catalogue (describe it with -L FILE.irl; --strict stops at it)\n", s.Unknown[name], name)
	}
	for _, t := range s.UnknownTails {
		fmt.Fprintf(w, "tracebridge: the rest of %s could not be read after a record of an unknown type (binary records carry no length)\n", t)
	}
}

// openLogs opens logs with opt, printing skipped records and cut ends on
// stderr, and starts a progress bar over the bytes of all of them (drawn
// on a terminal only; cleared while those lines are printed).
func openLogs(logs []*logdir.Log, opt kiekerlog.Options, stderr io.Writer) ([]*kiekerlog.Reader, *progress.Bar, int64, error) {
	var bar *progress.Bar
	skips := &skipReporter{w: stderr, bar: &bar}
	warn := warnCutEnd(stderr)
	opt.OnSkip = skips.report
	opt.OnCutEnd = func(err error) {
		bar.Pause()
		warn(err)
		bar.Resume()
	}
	readers := make([]*kiekerlog.Reader, len(logs))
	var total int64
	for i, l := range logs {
		r, err := kiekerlog.Open(l.Path, opt)
		if err != nil {
			return nil, nil, 0, err
		}
		readers[i] = r
		total += r.Size()
	}
	bar = progress.Start(stderr, total, func() int64 {
		var n int64
		for _, r := range readers {
			n += r.Consumed()
		}
		return n
	})
	return readers, bar, total, nil
}
