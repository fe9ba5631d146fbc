package zico

import (
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestTraceIDsFromContent: a trace's id is its host's and content's, not
// the receiving node's: the same packet through two receivers (two
// nodes, or one bridge before and after a restart) gives the same trace
// id and span ids; another host, start or duration gives another id.
func TestTraceIDsFromContent(t *testing.T) {
	ids := func(host string, tr *Trace) []record.Record {
		pr, err := newReceiver(&FactoryConfig{Listen: "127.0.0.1:0"}, pipeline.Settings{Name: "zico", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		r := pr.(*Receiver)
		defer r.ln.Close()
		var b record.Batch
		r.appendTrace(&b, host, tr)
		out := make([]record.Record, b.Len())
		for i := range b.Records {
			out[i] = b.Records[i].Clone()
		}
		return out
	}
	key := func(recs []record.Record) (trace.ID, []int64) {
		v := recs[0].Values
		id := trace.ID{Hi: uint64(v[trace.SpanTraceIDHigh].Int()), Lo: uint64(v[trace.SpanTraceIDLow].Int())}
		var spans []int64
		for _, r := range recs {
			if r.Values[trace.SpanTraceIDHigh] != v[trace.SpanTraceIDHigh] || r.Values[trace.SpanTraceIDLow] != v[trace.SpanTraceIDLow] {
				t.Fatalf("one trace's spans under two ids")
			}
			spans = append(spans, r.Values[trace.SpanSpanID].Int())
		}
		return id, spans
	}
	rng := rand.New(rand.NewPCG(1, 2))
	root := zicotest.Generate(rng, 6, time.Unix(1_700_000_000, 0))
	tr := &Trace{Root: &root}
	id1, spans1 := key(ids("shop-1", tr))
	id2, spans2 := key(ids("shop-1", tr))
	if id1 != id2 || len(spans1) != 6 || len(spans1) != len(spans2) {
		t.Fatalf("the same packet through two receivers: ids %v and %v, spans %v and %v", id1, id2, spans1, spans2)
	}
	for i := range spans1 {
		if spans1[i] != spans2[i] {
			t.Fatalf("span ids differ: %v and %v", spans1, spans2)
		}
	}
	if id1.Hi>>63 != 1 {
		t.Errorf("id %v: the high half's top bit is not set", id1)
	}
	if id1 != TraceID("shop-1", tr) {
		t.Errorf("TraceID differs from the receiver's id")
	}

	// Any difference gives another id.
	other := func(name string, host string, change func(r *codec.TraceRecord)) {
		c := zicotest.Generate(rand.New(rand.NewPCG(1, 2)), 6, time.Unix(1_700_000_000, 0))
		change(&c)
		if id, _ := key(ids(host, &Trace{Root: &c})); id == id1 {
			t.Errorf("%s: the same id %v", name, id)
		}
	}
	other("another host", "shop-2", func(*codec.TraceRecord) {})
	other("another start", "shop-1", func(r *codec.TraceRecord) { r.Marker.Clock++ })
	other("a child's duration", "shop-1", func(r *codec.TraceRecord) { r.Children[0].Time++ })
	other("an attribute", "shop-1", func(r *codec.TraceRecord) {
		r.Attrs = append(r.Attrs, codec.Attr{Key: "k", Value: codec.Value{Kind: codec.KindInt, Int: 1}})
	})
}
