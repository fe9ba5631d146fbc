package jfr

import (
	"context"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TestTypeFilterConsumer: records of other types are not handed on, a
// batch without matches not at all; no patterns is the consumer itself.
func TestTypeFilterConsumer(t *testing.T) {
	var got []string
	next := pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		got = append(got, "batch")
		for _, r := range b.Records {
			got = append(got, r.Type.Name)
		}
		return nil
	})
	sample := record.MustType("jdk.ExecutionSample")
	order := record.MustType("shop.Order")
	f, err := TypeFilter([]string{"ExecutionSample"}, next)
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	b.Add(sample, 1)
	b.Add(order, 2)
	b.Add(sample, 3)
	f.Consume(context.Background(), &b)
	b.Reset()
	b.Add(order, 4)
	f.Consume(context.Background(), &b)
	if want := "batch jdk.ExecutionSample jdk.ExecutionSample"; strings.Join(got, " ") != want {
		t.Errorf("handed on %q, want %q", strings.Join(got, " "), want)
	}
	if _, err := TypeFilter([]string{"[bad"}, next); err == nil {
		t.Error("a bad pattern is no error")
	}
	if f, _ := TypeFilter(nil, next); f == nil {
		t.Error("no consumer without patterns")
	}
}
