package zico

import (
	"log/slog"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestTraceIDsDoNotRepeatAfterARestart: the receivers of two runs of the
// bridge give the same host's traces different ids (ids that started at
// 1 in every run made the store merge a trace of the last run with one of
// this run: the trace store merges the parts of one id).
func TestTraceIDsDoNotRepeatAfterARestart(t *testing.T) {
	firstID := func() (hi, lo int64) {
		pr, err := newReceiver(&FactoryConfig{Listen: "127.0.0.1:0"}, pipeline.Settings{Name: "zico", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		r := pr.(*Receiver)
		defer r.ln.Close()
		var b record.Batch
		r.appendTrace(&b, "shop-1", &Trace{Root: &TraceRecord{Time: 1000}})
		if b.Len() != 1 {
			t.Fatalf("%d span records for a trace of one call", b.Len())
		}
		return b.Records[0].Values[trace.SpanTraceIDHigh].Int(), b.Records[0].Values[trace.SpanTraceIDLow].Int()
	}
	hi1, lo1 := firstID()
	hi2, lo2 := firstID()
	if hi1 == hi2 && lo1 == lo2 {
		t.Fatalf("the first trace of two runs has the same id %x%x", hi1, lo1)
	}
}
