package api

import (
	"slices"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestBrokenParentInView: the view of a thread trace whose parent trace
// never arrived, which the UI's trace page shows (trace.js lists
// v.broken), carries the reason.
func TestBrokenParentInView(t *testing.T) {
	cat := record.Builtin()
	var b record.Batch
	add := func(name string, vals ...record.Value) {
		copy(b.Add(cat.Lookup(name), record.NoTimestamp).Values, vals)
	}
	i, s := record.IntValue, record.StringValue
	add(record.TraceMetadata, i(200), i(2), s("sess"), s("h1"), i(100), i(2))
	add(record.BeforeOperationEvent, i(26), i(200), i(0), s("void a.Task.run()"), s("a.Task"))
	add(record.AfterOperationEvent, i(35), i(200), i(1), s("void a.Task.run()"), s("a.Task"))
	var trs []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) { trs = append(trs, tr) }})
	a.AddBatch(&b)
	a.Flush()
	if len(trs) != 1 {
		t.Fatalf("%d traces", len(trs))
	}
	e := newEnv(t, nil, trs...)
	var v TraceView
	e.get("/api/v1/traces/"+trs[0].ID.String()+"/view", &v)
	if !slices.Contains(v.Broken, "parent trace 100 never arrived") {
		t.Fatalf("view's broken %q", v.Broken)
	}
	// The search list says so too.
	var res SearchResult
	e.get("/api/v1/traces", &res)
	if len(res.Traces) != 1 || !res.Traces[0].Broken {
		t.Fatalf("search: %+v", res.Traces)
	}
}
