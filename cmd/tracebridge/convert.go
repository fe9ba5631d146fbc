package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	jfrsrc "github.com/tracebridge/tracebridge/internal/source/jfr"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

func cmdConvert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("convert", convertSynopsis, stderr)
	to := fs.String("to", "", "output format: ascii or binary (required for a Kieker log; binary by default for a JFR recording)")
	var types repeatFlag
	fs.Var(&types, "type", "JFR input: convert only the events of these types (names, names without package, globs; repeatable or comma-separated)")
	compress := fs.String("compress", "none", "compression of the data files: none, deflate, gzip, zip or xz")
	maxEntries := fs.Int("max-entries", logdir.DefaultMaxEntriesInFile, "records per data file (Kieker's maxEntriesInFile)")
	read := logReadFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("convert: want IN and OUT, got %d arguments", len(pos))
	}
	isJFR := jfrsrc.Detect(pos[0])
	if *to == "" && isJFR {
		*to = "binary"
	}
	if len(types) > 0 && !isJFR {
		return usagef("convert: --type is for JFR recordings")
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
	if isJFR {
		return convertJFR(ctx, pos[0], pos[1], splitTypes(types), logwrite.Config{
			Path: pos[1], Binary: binary, Compression: comp, MaxEntriesInFile: *maxEntries, Metadata: true,
		}, stdout, stderr)
	}
	cat, err := loadCatalog(*read.libs)
	if err != nil {
		return err
	}
	logs, err := logdir.Discover(pos[0])
	if err != nil {
		return err
	}
	// One output log per input log: IN may hold several. On a terminal a
	// progress bar shows the bytes read of all of them.
	readers, bar, _, err := openLogs(logs, srclog.Options{Catalog: cat, SkipBad: *read.skipBad, Strict: *read.strict}, stderr)
	if err != nil {
		return err
	}
	defer bar.Stop()
	for i, l := range logs {
		r := readers[i]
		w, err := logwrite.New(logwrite.Config{
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
			bar.Stop()
			return convertInterrupted(w, l.Path, i)
		}
		if err := errors.Join(runErr, closeErr); err != nil {
			return err
		}
		st := r.Stats()
		bar.Pause()
		fmt.Fprintf(stdout, "%s\n", w.Dir())
		fmt.Fprintf(stderr, "tracebridge: converted %d records from %s (%d files) to %s\n", w.Records(), l.Path, st.Files, w.Dir())
		reportSkipped(stderr, st)
		bar.Resume()
	}
	return nil
}

const convertSynopsis = `convert [--to ascii|binary] [--compress none|deflate|gzip|zip|xz] [--max-entries N] [--skip-bad] [--strict] [-L PATH…] IN OUT

Rewrites the Kieker logs under IN as Kieker logs under OUT (--to is required
then), or writes the events of a JFR recording or JVM repository IN as a
Kieker log under OUT (binary unless --to ascii; --type selects event types).
Record types Kieker lacks (JFR events) are described in IRL files beside
kieker.map, so cat, convert and traces read the log without -L.
`

// convertJFR writes the events of a recording or repository as one Kieker
// log. Damaged chunks and events are reported (file, offset, reason) and
// skipped; the log then holds every readable event, and the exit code is 1.
func convertJFR(ctx context.Context, in, out string, types []string, cfg logwrite.Config, stdout, stderr io.Writer) error {
	w, err := logwrite.New(cfg)
	if err != nil {
		return err
	}
	skips := &skipReporter{w: stderr}
	st, runErr := readJFR(ctx, in, types, w, skips)
	closeErr := w.Close()
	if ctx.Err() != nil {
		return convertInterrupted(w, in, 0)
	}
	var ee exitError
	if runErr != nil && !(errors.As(runErr, &ee) && ee.code == exitData) {
		return errors.Join(runErr, closeErr)
	}
	if closeErr != nil {
		return closeErr
	}
	for _, d := range w.Dirs() {
		fmt.Fprintln(stdout, d)
	}
	fmt.Fprintf(stderr, "tracebridge: converted %d events (%d chunks) from %s to %s\n", st.Records, st.Chunks, in, strings.Join(w.Dirs(), ", "))
	return runErr
}

// convertInterrupted removes the incomplete output of w (it was converting
// the log at in when Ctrl-C or SIGTERM came) and returns the error saying
// what is left: the done logs converted before it are complete.
func convertInterrupted(w *logwrite.Writer, in string, done int) error {
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
