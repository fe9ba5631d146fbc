package control

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	ctl "github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

var cat = record.Builtin()

// batch has one record per (type, host, trace).
func batch(origin string, recs ...[3]string) *record.Batch {
	b := &record.Batch{Origin: record.Origin{Host: origin}}
	for _, r := range recs {
		t := cat.Lookup(r[0])
		rec := b.Add(t, -1)
		if j := t.FieldIndex("hostname"); j >= 0 {
			rec.Values[j] = record.StringValue(r[1])
		}
		if j := t.FieldIndex("traceId"); j >= 0 {
			var id int64
			for _, c := range r[2] {
				id = id*10 + int64(c-'0')
			}
			rec.Values[j] = record.IntValue(id)
		}
	}
	return b
}

func names(b *record.Batch) []string {
	var out []string
	for i := range b.Records {
		out = append(out, b.Records[i].Type.ShortName())
	}
	return out
}

func apply(t *testing.T, c *ctl.Controller, reqs ...streammsg.ControlRequest) {
	t.Helper()
	for _, r := range reqs {
		if _, err := c.Apply(r); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
	}
}

func TestFilter(t *testing.T) {
	c, err := ctl.Open(ctl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got *record.Batch
	st := Stage(c)(pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error { got = b; return nil }))
	ctx := context.Background()
	in := func() *record.Batch {
		return batch("", [3]string{record.TraceMetadata, "a", "1"}, [3]string{record.BeforeOperationEvent, "", "1"},
			[3]string{record.OperationExecutionRecord, "b", "2"}, [3]string{record.OperationExecutionRecord, "a", "3"})
	}
	st.Consume(ctx, in())
	if len(names(got)) != 4 {
		t.Fatalf("nothing set: %v", names(got))
	}
	apply(t, c, streammsg.ControlRequest{Op: "disable", Type: "BeforeOperationEvent"}, streammsg.ControlRequest{Op: "disable", Host: "b"})
	st.Consume(ctx, in())
	if diff := cmp.Diff([]string{"TraceMetadata", "OperationExecutionRecord"}, names(got)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// A batch whose origin names a disabled host loses everything.
	b := batch("b", [3]string{record.TraceMetadata, "b", "1"})
	st.Consume(ctx, b)
	if got.Len() != 0 {
		t.Fatalf("%v", names(got))
	}
	apply(t, c, streammsg.ControlRequest{Op: "enable", Type: record.BeforeOperationEvent}, streammsg.ControlRequest{Op: "enable", Host: "b"})
	st.Consume(ctx, in())
	if len(names(got)) != 4 {
		t.Fatalf("all enabled again: %v", names(got))
	}
	// Emit hands the same batch on.
	em := st.(pipeline.Emitter)
	b = in()
	nb, err := em.Emit(ctx, b)
	if err != nil || nb != b {
		t.Fatalf("Emit to a consumer: %v %v", nb == b, err)
	}
}

// TestSample: by trace id for types with one (the same traces kept
// whatever the batch), else every 1/rate-th record.
func TestSample(t *testing.T) {
	c, _ := ctl.Open(ctl.Options{})
	apply(t, c, streammsg.ControlRequest{Op: "sample", Type: "BeforeOperationEvent", Rate: 0.25},
		streammsg.ControlRequest{Op: "sample", Type: "KiekerMetadataRecord", Rate: 0.1})
	var kept []int64
	n := 0
	st := Stage(c)(pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			if v, ok := b.Records[i].Field("traceId"); ok {
				kept = append(kept, v.Int())
			} else {
				n++
			}
		}
		return nil
	}))
	b := &record.Batch{}
	for i := range 4000 {
		b.Add(cat.Lookup(record.BeforeOperationEvent), -1).Values[1] = record.IntValue(int64(i % 2000))
		b.Add(cat.Lookup(record.KiekerMetadataRecord), -1)
	}
	st.Consume(context.Background(), b)
	if len(kept) < 800 || len(kept) > 1200 || n != 400 {
		t.Fatalf("kept %d of 4000 events, %d of 4000 metadata records", len(kept), n)
	}
	seen := map[int64]int{}
	for _, id := range kept {
		seen[id]++
	}
	for id, k := range seen {
		if k != 2 {
			t.Fatalf("trace %d kept %d times of 2", id, k)
		}
	}
	apply(t, c, streammsg.ControlRequest{Op: "sample", Type: "BeforeOperationEvent", Rate: 1})
	if st := c.State(); len(st.Samples) != 1 {
		t.Fatalf("rate 1 ends sampling: %+v", st.Samples)
	}
}
