package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/sink/kiekerlog"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

func cmdConvert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("convert", "convert --to ascii|binary [--compress none|deflate|gzip|zip|xz] [--max-entries N] [--skip-bad] [--strict] [-L PATH…] IN OUT", stderr)
	to := fs.String("to", "", "output format: ascii or binary (required)")
	compress := fs.String("compress", "none", "compression of the data files: none, deflate, gzip, zip or xz")
	maxEntries := fs.Int("max-entries", logdir.DefaultMaxEntriesInFile, "records per data file (Kieker's maxEntriesInFile)")
	skipBad := fs.Bool("skip-bad", false, "skip malformed records instead of stopping, and report how many")
	strict := fs.Bool("strict", false, "stop at a record whose type is not in the catalogue (by default such records are skipped and counted per type)")
	var libs listFlag
	fs.Var(&libs, "L", "IRL file or directory with more record types (repeatable, or ':'-separated)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("convert: want IN and OUT, got %d arguments", len(pos))
	}
	var binary bool
	switch *to {
	case "ascii":
	case "binary":
		binary = true
	default:
		return usagef("convert: --to must be ascii or binary")
	}
	comp, err := logdir.ParseCompression(*compress)
	if err != nil {
		return usagef("convert: --compress: %v", err)
	}
	if *maxEntries <= 0 {
		return usagef("convert: --max-entries must be positive")
	}
	cat, err := loadCatalog(libs)
	if err != nil {
		return err
	}
	logs, err := logdir.Discover(pos[0])
	if err != nil {
		return err
	}
	// One output log per input log: IN may hold several. On a terminal a
	// progress bar shows the bytes read of all of them.
	var bar *progress
	skips := &skipReporter{w: stderr, bar: &bar}
	warn := warnCutEnd(stderr)
	cutEnd := func(err error) {
		bar.pause()
		warn(err)
		bar.resume()
	}
	readers := make([]*srclog.Reader, len(logs))
	var total int64
	for i, l := range logs {
		if readers[i], err = srclog.Open(l.Path, srclog.Options{Catalog: cat, SkipBad: *skipBad, OnSkip: skips.report, Strict: *strict, OnCutEnd: cutEnd}); err != nil {
			return err
		}
		total += readers[i].Size()
	}
	bar = startProgress(stderr, total, func() int64 {
		var n int64
		for _, r := range readers {
			n += r.Consumed()
		}
		return n
	})
	defer bar.stop()
	for i, l := range logs {
		r := readers[i]
		w, err := kiekerlog.New(kiekerlog.Config{
			Path:             pos[1],
			Binary:           binary,
			Compression:      comp,
			MaxEntriesInFile: *maxEntries,
			NameFromMetadata: true, // the input's own KiekerMetadataRecord is copied
		})
		if err != nil {
			return err
		}
		runErr := r.Run(ctx, w)
		closeErr := w.Close()
		if ctx.Err() != nil {
			bar.stop()
			return convertInterrupted(w, l.Path, i)
		}
		if err := errors.Join(runErr, closeErr); err != nil {
			return err
		}
		st := r.Stats()
		bar.pause()
		fmt.Fprintf(stdout, "%s\n", w.Dir())
		fmt.Fprintf(stderr, "tracebridge: converted %d records from %s (%d files) to %s\n", w.Records(), l.Path, st.Files, w.Dir())
		var sum readStats
		sum.add(st)
		sum.report(stderr)
		bar.resume()
	}
	return nil
}

// convertInterrupted removes the incomplete output of w (it was converting
// the log at in when Ctrl-C or SIGTERM came) and returns the error saying
// what is left: the done logs converted before it are complete.
func convertInterrupted(w *kiekerlog.Writer, in string, done int) error {
	var removed, left []string
	var errs []error
	for _, d := range w.Dirs() {
		if err := os.RemoveAll(d); err != nil {
			left = append(left, d)
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d)
	}
	msg := fmt.Sprintf("convert interrupted after %d records of %s", w.Records(), in)
	if len(removed) > 0 {
		msg += "; removed the incomplete output " + strings.Join(removed, ", ")
	}
	if len(left) > 0 {
		msg += fmt.Sprintf("; could not remove the incomplete output %s (%v)", strings.Join(left, ", "), errors.Join(errs...))
	}
	if done > 0 {
		msg += fmt.Sprintf("; the %d logs converted before it are complete (printed above)", done)
	}
	return withCode(exitInterrupted, errors.New(msg))
}
