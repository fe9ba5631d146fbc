package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/mapping"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/sink/forward"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/stage/throttle"
)

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", "replay LOGDIR --to kieker-tcp://HOST:PORT|kdb-tcp://HOST:PORT [--mapping FILE] [--rate N] [--skip-bad] [-L PATH…]", stderr)
	to := fs.String("to", "", "target bridge: kieker-tcp://HOST:PORT (Kieker's single-socket TCP) or kdb-tcp://HOST:PORT (KDB binary)")
	mappingFile := fs.String("mapping", "", "KDB mapping file for kdb-tcp (default: common Kieker types)")
	rate := fs.Float64("rate", 0, "records per second (0: as fast as the target takes them)")
	skipBad := fs.Bool("skip-bad", false, "skip malformed records instead of stopping")
	libs := libsFlag(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *to == "" {
		return usagef("replay: want one LOGDIR and --to URL")
	}
	if *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0) {
		return usagef("replay: --rate %v: want records per second, or 0 for as fast as the target takes them", *rate)
	}
	target, err := forward.ParseURL(*to)
	if err != nil {
		return usagef("replay: --to: %v", err)
	}
	cat, err := loadCatalog(*libs)
	if err != nil {
		return err
	}
	var m *kdb.Mapping
	if *mappingFile != "" {
		if m, err = mapping.Load(*mappingFile, cat); err != nil {
			return withCode(exitMapping, err)
		}
	}
	r, err := kiekerlog.Open(pos[0], kiekerlog.Options{Catalog: cat, SkipBad: *skipBad, OnSkip: (&skipReporter{w: stderr}).report, OnCutEnd: warnCutEnd(stderr)})
	if err != nil {
		return err
	}
	// The sink says on stderr when the connection is lost and when it is
	// back (replay waits meanwhile), as serve's log does.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sink, err := forward.New(forward.Config{URL: *to, Mapping: m, Catalog: cat, Block: true}, forward.Settings{Logger: logger})
	if err != nil {
		return usagef("replay: %v", err)
	}
	// Fail fast when nobody listens (later outages are waited out). The
	// connection made here carries the records: a single-connection
	// receiver must not see a connection of its own before them.
	if err := sink.Connect(ctx); err != nil {
		sink.Close()
		return withCode(exitComm, fmt.Errorf("replay: %w", err))
	}
	var sent int64
	count := pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
		if err := sink.Consume(ctx, b); err != nil {
			return sendError{err}
		}
		sent += int64(b.Len())
		return nil
	})
	start := time.Now()
	runErr := r.Run(ctx, throttle.New(*rate, count))
	closeErr := sink.Close()
	st := sink.Stats()
	if st.Unconfirmed > 0 {
		// The receiver closed or reset a connection before the end of its
		// stream: what was written on it may not have been read. That is
		// the failure, said once: the sink's own account of the lost
		// connection (from Consume or Close) is the same failure.
		var se sendError
		if errors.As(runErr, &se) {
			runErr = nil
		}
		closeErr = unconfirmedError{n: st.Unconfirmed, sent: sent, addr: target.Addr, protocol: target.Protocol, spoke: st.Confirmed > 0}
	}
	if err := errors.Join(runErr, closeErr); err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(stderr, "tracebridge: replay interrupted after %d records\n", sent)
		}
		// Sending failed: communication; the log was malformed: data.
		var se sendError
		if closeErr != nil || errors.As(err, &se) {
			return withCode(exitComm, err)
		}
		return withCode(exitData, err)
	}
	d := time.Since(start)
	fmt.Fprintf(stdout, "tracebridge: replayed %d records from %s to %s in %.3f s (%.0f records/s)\n",
		sent-st.Dropped, pos[0], target, d.Seconds(), float64(sent-st.Dropped)/d.Seconds())
	if st.Dropped > 0 {
		fmt.Fprintf(stderr, "tracebridge: %d records could not be sent (no id in the KDB mapping)\n", st.Dropped)
	}
	var sum kiekerlog.Stats
	sum.Add(r.Stats())
	reportSkipped(stderr, sum)
	return nil
}

// sendError marks a failure of the target, not of the log being read.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }
func (e sendError) Unwrap() error { return e.err }

// unconfirmedError: records were written on connections the receiver
// closed or reset before the end of the stream. It wraps
// forward.ErrDropped.
type unconfirmedError struct {
	n, sent  int64
	addr     string
	protocol forward.Protocol
	// spoke: the receiver read the last stream to its end, so it speaks
	// the protocol and the connection it dropped was not a rejection.
	spoke bool
}

func (e unconfirmedError) Error() string {
	why := fmt.Sprintf("did it stop, or is it not a %s receiver?", e.protocol)
	if e.spoke {
		why = "it read the last one to its end: did it stop or restart meanwhile?"
	}
	return fmt.Sprintf("replay: %d of the %d records sent may not have arrived: %s closed or reset a connection before the end of its stream (%s)",
		e.n, e.sent, e.addr, why)
}

func (e unconfirmedError) Unwrap() error { return forward.ErrDropped }
