package handoff

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Moved from cmd/tracebridge/split_test.go (TestHandoff).

// The handoff copies batches (the caller reuses its own) and reports the
// consumer's first error.
func TestHandoff(t *testing.T) {
	ctx := context.Background()
	cat := record.Builtin()
	typ := cat.Lookup(record.TraceMetadata)
	var got []int64
	boom := errors.New("disk full")
	h := New(ctx, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for _, r := range b.Records {
			got = append(got, r.Values[0].Int())
		}
		if len(got) >= 4 {
			return boom
		}
		return nil
	}), 2)
	var b record.Batch
	for i := range 3 {
		b.Reset()
		for j := range 2 {
			b.Add(typ, 0).Values[0] = record.IntValue(int64(2*i + j))
		}
		err := h.Consume(ctx, &b)
		b.Records[0].Values[0] = record.IntValue(-1) // the caller reuses its batch
		if err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	if err := h.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close: %v", err)
	}
	if d := cmp.Diff([]int64{0, 1, 2, 3}, got[:4]); d != "" {
		t.Fatalf("consumed (-want +got):\n%s", d)
	}
}
