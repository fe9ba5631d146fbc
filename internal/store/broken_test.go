package store

import (
	"slices"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestBrokenReasonsAreKept: a trace the assembler marked broken (here a
// thread whose parent trace never arrived) keeps its reasons in the store,
// after a reopen too, and its summary says it is broken.
func TestBrokenReasonsAreKept(t *testing.T) {
	cat := record.Builtin()
	meta, before, after := cat.Lookup(record.TraceMetadata), cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	var b record.Batch
	add := func(typ *record.Type, vals ...record.Value) { copy(b.Add(typ, record.NoTimestamp).Values, vals) }
	i, s := record.IntValue, record.StringValue
	add(meta, i(200), i(2), s("sess"), s("h1"), i(100), i(2))
	add(before, i(26), i(200), i(0), s("void a.Task.run()"), s("a.Task"))
	add(after, i(35), i(200), i(1), s("void a.Task.run()"), s("a.Task"))
	var trs []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) { trs = append(trs, tr) }})
	a.AddBatch(&b)
	a.Flush()
	want := []string{"parent trace 100 never arrived"}
	if len(trs) != 1 || !slices.Equal(trs[0].Broken, want) {
		t.Fatalf("assembled %d traces, broken %q", len(trs), trs[0].Broken)
	}

	dir := t.TempDir()
	st := open(t, dir, Options{})
	if _, err := st.Append(trs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, Options{})
	got, err := st.Get(trs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Broken, want) {
		t.Fatalf("from the store: broken %q, want %q", got.Broken, want)
	}
	p, err := st.Search(Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Traces) != 1 || !p.Traces[0].Broken {
		t.Fatalf("summaries %+v, want one broken", p.Traces)
	}
}
