package trace

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestRouteKey: every Kieker trace record has one key, span records the
// key of their trace id, other records none; Shard spreads keys over n.
func TestRouteKey(t *testing.T) {
	cat := record.Builtin()
	var b record.Batch
	for _, name := range []string{record.TraceMetadata, record.BeforeOperationEvent, record.AfterOperationEvent, record.OperationExecutionRecord, record.SplitEvent} {
		r := b.Add(cat.Lookup(name), 1)
		if ti := Classify(r.Type); ti.TraceID >= 0 {
			r.Values[ti.TraceID] = record.IntValue(int64(b.Len()))
		}
	}
	AppendInvocation(&b, Invocation{ID: 1, TraceID: 99, ParentID: -1})
	var rt Router
	for i := range b.Records {
		if key, ok := rt.Key(&b.Records[i]); !ok || key != KiekerKey {
			t.Errorf("%s: key %#x %v, want KiekerKey", b.Records[i].Type.Name, key, ok)
		}
	}
	b.Reset()
	b.Add(cat.Lookup(record.CPUUtilizationRecord), 1)
	if _, ok := rt.Key(&b.Records[0]); ok {
		t.Error("a CPU utilization record has a routing key")
	}
	const n = 4
	seen := map[int]int{}
	for i := range 1000 {
		b.Reset()
		id := ID{Hi: uint64(i % 7), Lo: uint64(i)}
		AppendSpan(&b, id, &Span{SpanID: 1})
		AppendSpan(&b, id, &Span{SpanID: 2, ParentID: 1, Operation: "other"})
		k1, ok1 := rt.Key(&b.Records[0])
		k2, ok2 := rt.Key(&b.Records[1])
		if !ok1 || !ok2 || k1 != k2 {
			t.Fatalf("trace %v: keys %#x %v and %#x %v, want one", id, k1, ok1, k2, ok2)
		}
		s := Shard(k1, n)
		if s < 0 || s >= n {
			t.Fatalf("shard %d of %d", s, n)
		}
		seen[s]++
	}
	for s := range n {
		if seen[s] < 150 {
			t.Errorf("shard %d got %d of 1000 traces: %v", s, seen[s], seen)
		}
	}
	if Shard(KiekerKey, 1) != 0 {
		t.Error("one shard is not shard 0")
	}
}
