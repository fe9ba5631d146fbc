package bridgetest

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/logwrite"
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

// WriteEventLog writes a Kieker log of n BeforeOperationEvents with cfg
// and returns its directory: event j has timestamp j, the trace id and
// order index trace(j) gives, and the same operation and class.
func WriteEventLog(tb testing.TB, cfg logwrite.Config, n int, trace func(j int) (traceID, orderIndex int64)) string {
	tb.Helper()
	w, err := logwrite.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	typ := record.Builtin().Lookup(record.BeforeOperationEvent)
	var b record.Batch
	for i := 0; i < n; i += 1000 {
		b.Reset()
		for j := i; j < min(i+1000, n); j++ {
			id, order := trace(j)
			r := b.Add(typ, record.NoTimestamp)
			r.Values[0] = record.IntValue(int64(j))
			r.Values[1] = record.IntValue(id)
			r.Values[2] = record.IntValue(order)
			r.Values[3] = record.StringValue("public void some.pkg.Clazz.method(int)")
			r.Values[4] = record.StringValue("some.pkg.Clazz")
		}
		if err := w.Consume(context.Background(), &b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return w.Dir()
}
