package bridgetest

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// ReadLog returns copies of every record of the Kieker logs under dir; a
// malformed record fails tb.
func ReadLog(tb testing.TB, dir string) []record.Record {
	tb.Helper()
	return ReadLogWith(tb, dir, srclog.Options{})
}

// ReadLogSkipBad is ReadLog for a log a bridge is still writing or was
// killed while writing: a malformed record (one cut at the end of a file)
// and, in a binary file, the rest of that file are skipped.
func ReadLogSkipBad(tb testing.TB, dir string) []record.Record {
	tb.Helper()
	return ReadLogWith(tb, dir, srclog.Options{SkipBad: true})
}

// ReadLogWith is ReadLog with the reader's options o (a catalogue, bad
// records skipped).
func ReadLogWith(tb testing.TB, dir string, o srclog.Options) []record.Record {
	tb.Helper()
	if dir == "" {
		tb.Fatal("reading a log: no directory (did the bridge print no kieker-log sink?)")
	}
	r, err := srclog.Open(dir, o)
	if err != nil {
		tb.Fatalf("reading the log %s: %v", dir, err)
	}
	var out []record.Record
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
		return nil
	}))
	if err != nil {
		tb.Fatalf("reading the log %s: %v", dir, err)
	}
	return out
}
