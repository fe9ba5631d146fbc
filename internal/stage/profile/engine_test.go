package profile_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
	storesink "github.com/tracebridge/tracebridge/internal/sink/store"
	"github.com/tracebridge/tracebridge/internal/stage/profile"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// sample adds a sample of thread tid at time ts with the given frames.
var sample = recordtest.AddSample

// TestSamplesOnStoredSpans runs the engine with a profile stage and the
// trace store: an OTLP-like span (thread.id 31) and a Kieker trace
// (TraceMetadata threadId 32) of host "shop-1", and JFR execution samples
// of those threads from a JVM on "shop-1" (a jfr receiver's origin). The
// stored traces' spans carry the samples taken during them.
func TestSamplesOnStoredSpans(t *testing.T) {
	const base = 1_700_000_000_000_000_000
	dir := filepath.Join(t.TempDir(), "store")
	cat := trace.Types()
	src := pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		spans := &record.Batch{}
		otlp := trace.ID{Hi: 7, Lo: 9}
		trace.AppendSpan(spans, otlp, &trace.Span{SpanID: 1, Operation: "GET /cart", Service: "shop", Host: "shop-1", Thread: "31", Start: base, End: base + 100e6})
		trace.AppendSpan(spans, otlp, &trace.Span{SpanID: 2, ParentID: 1, Operation: "SELECT cart", Service: "shop", Host: "shop-1", Thread: "31", Start: base + 40e6, End: base + 80e6})
		// A Kieker trace: TraceMetadata, Before, After.
		meta := spans.Add(cat.Lookup(record.TraceMetadata), record.NoTimestamp)
		meta.Values[0], meta.Values[1], meta.Values[2], meta.Values[3], meta.Values[4] = record.IntValue(77), record.IntValue(32), record.StringValue("s"), record.StringValue("shop-1"), record.IntValue(-1)
		for i, typ := range []string{record.BeforeOperationEvent, record.AfterOperationEvent} {
			r := spans.Add(cat.Lookup(typ), record.NoTimestamp)
			r.Values[0] = record.IntValue(base + int64(i)*50e6)
			r.Values[1] = record.IntValue(77)
			r.Values[2] = record.IntValue(int64(i))
			r.Values[3] = record.StringValue("public void shop.Cart.checkout()")
			r.Values[4] = record.StringValue("shop.Cart")
		}
		if err := out.Consume(ctx, spans); err != nil {
			return err
		}
		jfr := &record.Batch{Origin: record.Origin{Peer: "/var/jfr/2026_01_01_00_00_00_42", Host: "shop-1", Session: "42"}}
		for i := int64(0); i < 10; i++ {
			ts := base + i*10e6 + 5e6
			sample(jfr, 31, ts, "shop.Db.query() line: 9", "shop.Cart.get() line: 4")
			sample(jfr, 32, ts, "shop.Cart.checkout() line: 20")
			sample(jfr, 33, ts, "Idle.run()")
		}
		return out.Consume(ctx, jfr)
	})
	e := engine.New(engine.Settings{})
	e.AddSource("test", src)
	var stage *profile.Stage
	e.AddStage(func(next pipeline.Consumer) pipeline.Consumer {
		stage = profile.New(next, profile.Options{})
		return stage
	})
	sink, err := storesink.New(&storesink.Config{Path: dir}, pipeline.Settings{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	e.AddSink("store", sink)
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	otlp, err := st.Get(trace.ID{Hi: 7, Lo: 9})
	if err != nil {
		t.Fatal(err)
	}
	byOp := map[string]*trace.Span{}
	for i := range otlp.Spans {
		byOp[otlp.Spans[i].Operation] = &otlp.Spans[i]
	}
	check := func(sp *trace.Span, n int, folded string) {
		t.Helper()
		if sp == nil {
			t.Fatal("span missing")
		}
		a, _ := sp.Attr(profile.AttrSamples)
		f, _ := sp.Attr(profile.AttrFolded)
		events := 0
		for _, ev := range sp.Events {
			if ev.Name == profile.EventName {
				events++
				if ev.Time < sp.Start || ev.Time > sp.End {
					t.Errorf("%s: sample at %d outside [%d, %d]", sp.Operation, ev.Time, sp.Start, sp.End)
				}
			}
		}
		if a.Value != strings.TrimSpace(strings.Fields(folded)[len(strings.Fields(folded))-1]) || f.Value != folded || events != n {
			t.Errorf("%s: samples %q, folded %q, %d events; want %d, %q", sp.Operation, a.Value, f.Value, events, n, folded)
		}
	}
	// Samples at 5, 15, …, 95 ms: 45, 55, 65, 75 inside the child.
	check(byOp["GET /cart"], 6, "shop.Cart.get();shop.Db.query() 6\n")
	check(byOp["SELECT cart"], 4, "shop.Cart.get();shop.Db.query() 4\n")

	kieker, err := st.Get(trace.KiekerID(77))
	if err != nil {
		t.Fatal(err)
	}
	if len(kieker.Spans) != 1 || kieker.Spans[0].Thread != "32" {
		t.Fatalf("kieker trace %+v", kieker.Spans)
	}
	check(&kieker.Spans[0], 5, "shop.Cart.checkout() 5\n")
	if s := stage.Stats(); s.Attached != 15 || s.Samples != 30 {
		t.Errorf("stats %+v", s)
	}
}
