package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tracebridge/tracebridge/stream"
)

const dumpSynopsis = "dump nats://HOST:PORT --since T [--until T] [--type T…] [--host H…] [--format kieker|kieker-binary|otlp-json] OUT"

func cmdDump(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump", dumpSynopsis, stderr)
	var sf streamFlags
	sf.define(fs, true)
	since := fs.String("since", "", "the window's start: a duration before now (10m, 2h, 7d), an RFC 3339 time, or 'all' for the repository's oldest (required)")
	until := fs.String("until", "", "the window's end (default: what the repository holds now)")
	format := fs.String("format", stream.FormatKieker, "kieker (a Kieker log directory with .dat files, created in OUT), kieker-binary (.bin files), or otlp-json (the file OUT, one OTLP JSON request per trace)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("dump: want the stream URL and OUT, got %d arguments", len(pos))
	}
	if *since == "" {
		return usagef("dump: --since is required (10m, an RFC 3339 time, or all)")
	}
	switch *format {
	case stream.FormatKieker, stream.FormatKiekerBinary, stream.FormatOTLPJSON:
	default:
		return usagef("dump: --format %q: want kieker, kieker-binary or otlp-json", *format)
	}
	now := time.Now()
	o := stream.DumpOptions{Format: *format, Hosts: sf.hosts}
	if *since != "all" {
		if o.Since, err = stream.ParseTime(*since, now); err != nil {
			return usagef("dump: --since: %v", err)
		}
	}
	if *until != "" {
		if o.Until, err = stream.ParseTime(*until, now); err != nil {
			return usagef("dump: --until: %v", err)
		}
		if !o.Since.IsZero() && !o.Until.After(o.Since) {
			return usagef("dump: --until is not after --since")
		}
	}
	s, err := openStream(pos[0], &sf)
	if err != nil {
		return err
	}
	defer s.Close()
	if len(sf.types) > 0 {
		md, err := s.Metadata(ctx)
		if err != nil {
			return streamError(err)
		}
		if o.Types, err = stream.ResolveTypes(md, sf.types); err != nil {
			return streamError(fmt.Errorf("dump: %w", err))
		}
	}
	st, err := s.Dump(ctx, pos[1], o)
	if err != nil {
		return streamError(fmt.Errorf("dump: %w", err))
	}
	if ctx.Err() != nil {
		return withCode(exitInterrupted, fmt.Errorf("dump interrupted after %d records", st.Records))
	}
	switch *format {
	case stream.FormatOTLPJSON:
		fmt.Fprintf(stdout, "tracebridge: %d traces (%d spans from %d records) written to %s\n", st.Traces, st.Spans, st.Records, st.File)
	default:
		// (Not counting the metadata record the log begins with: an empty
		// window said "1 records written".)
		fmt.Fprintf(stdout, "tracebridge: %d records written to %s\n", max(st.Records-1, 0), st.Dir)
	}
	if st.Missed > 0 {
		fmt.Fprintf(stderr, "tracebridge: %d records of the window were removed by the repository's retention while the dump read\n", st.Missed)
	}
	return nil
}
