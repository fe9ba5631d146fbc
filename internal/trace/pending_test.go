package trace

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestPendingSpansKeepEveryField: a span record that waited for its trace
// as bytes comes out as the Span spanRecord reads from it (every field,
// attributes, events, links, resource and scope; the host from the
// service or the origin, the component from the scope), with strings
// that repeat (dictionary ids) and strings that do not (inline), over
// many traces so that the dictionary fills and another one begins.
func TestPendingSpansKeepEveryField(t *testing.T) {
	res := &Resource{Attributes: []Attr{{Key: "service.name", Value: "web", Type: TypeString}, {Key: "process.pid", Value: "7", Type: TypeInt}}}
	sc := &Scope{Name: "lib", Version: "1.2", Attributes: []Attr{{Key: "team", Value: "x", Type: TypeString}}}
	var batches []*record.Batch
	const traces = 9000 // 16 fresh strings a span, each twice: more than a dictionary holds
	for i := range traces {
		b := &record.Batch{Origin: record.Origin{Host: "origin-host"}}
		id := ID{Hi: uint64(i + 1), Lo: 99}
		for j := range 2 {
			s := Span{SpanID: SpanID(j + 1), Operation: "op " + strconv.Itoa(i%50), Service: "web", Start: int64(1000 + i), End: int64(900 + i*3 + j),
				Kind: Kind(j + 1), Status: Status(i % 3), StatusMessage: "msg " + strconv.Itoa(i), Thread: "t" + strconv.Itoa(j), Process: "7"}
			if j == 1 {
				s.ParentID = 1
				s.Service, s.Host = "", "" // the origin's host
				s.Component = "pkg.Class"
				s.Links = []Link{{TraceID: ID{Hi: 5, Lo: 6}, SpanID: 77, TraceState: "a=b", Attributes: []Attr{{Key: "k", Value: "1", Type: TypeInt}}}}
			} else {
				s.Resource, s.Scope = res, sc
				s.Events = []Event{{Name: "ev", Time: 1234, Attributes: []Attr{{Key: "e", Value: "v" + strconv.Itoa(i), Type: TypeString}}}}
			}
			for k := range 16 {
				s.Attributes = append(s.Attributes, Attr{Key: "key" + strconv.Itoa(k), Value: fmt.Sprintf("v%d-%d", i/2, k), Type: TypeString})
			}
			AppendSpan(b, id, &s)
		}
		batches = append(batches, b)
	}
	var want []Span
	for _, b := range batches {
		for i := range b.Records {
			var s Span
			if _, ok := spanRecord(&b.Records[i], &s, false); !ok {
				t.Fatal("not a span record")
			}
			if s.Host == "" {
				s.Host = b.Origin.Host
			}
			o := originOf(b.Records[i].Values)
			s.Resource, s.Scope = o.resource(), o.scopeCopy()
			want = append(want, s)
		}
	}
	var got []Span
	now := time.Unix(0, 0)
	a := NewAssembler(Options{Now: func() time.Time { return now }, Emit: func(tr *Trace) { got = append(got, tr.Spans...) }})
	dicts := map[*spanDict]bool{}
	for i, b := range batches {
		a.AddBatch(b)
		dicts[a.codec.dict] = true
		if i%1000 == 999 {
			now = now.Add(time.Hour)
			a.Tick()
		}
	}
	a.Flush()
	if len(dicts) < 2 {
		t.Errorf("%d dictionaries: the test should fill one", len(dicts))
	}
	key := func(s Span) string { return strconv.FormatInt(s.Start, 10) + "/" + s.SpanID.String() }
	slices.SortFunc(got, func(x, y Span) int { return cmpStrings(key(x), key(y)) })
	slices.SortFunc(want, func(x, y Span) int { return cmpStrings(key(x), key(y)) })
	if len(got) != len(want) {
		t.Fatalf("%d spans, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameSpan(&want[i], &got[i]) {
			t.Fatalf("span %d differs (-spanRecord +assembled):\n%s", i, cmp.Diff(want[i], got[i],
				cmpopts.IgnoreFields(Span{}, "Parent", "Depth"), cmpopts.IgnoreUnexported(Span{}), cmpopts.EquateEmpty()))
		}
	}
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestPendingSpansMerge: span records of a Kieker trace id wait as bytes;
// when Kieker metadata joins their trace to another, both traces' pending
// spans are decoded with their own dictionaries and tables and come out
// once, in one trace.
func TestPendingSpansMerge(t *testing.T) {
	var out []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Emit: func(tr *Trace) { out = append(out, tr) }})
	res := func(svc string) *Resource {
		return &Resource{Attributes: []Attr{{Key: "service.name", Value: svc, Type: TypeString}}}
	}
	b := &record.Batch{}
	AppendSpan(b, KiekerID(1), &Span{SpanID: 1, Operation: "root", Service: "a", Start: 10, End: 100, Resource: res("a")})
	AppendSpan(b, KiekerID(2), &Span{SpanID: 2, ParentID: 1, Operation: "child", Service: "b", Start: 20, End: 30, Resource: res("b")})
	a.AddBatch(b)
	m := &record.Batch{}
	r := m.Add(record.Builtin().Lookup("kieker.common.record.flow.trace.TraceMetadata"), 0)
	ti := a.types.Get(r.Type)
	r.Values[ti.TraceID] = record.IntValue(2)
	r.Values[ti.ParentTraceID] = record.IntValue(1)
	r.Values[ti.ParentOrderID] = record.IntValue(-1)
	a.AddBatch(m)
	a.Flush()
	if len(out) != 1 || len(out[0].Spans) != 2 {
		t.Fatalf("%d traces, want 1 of 2 spans", len(out))
	}
	for _, s := range out[0].Spans {
		if s.Resource == nil || s.Resource.Attributes[0].Value != s.Service {
			t.Errorf("span %s of %s: resource %v", s.Operation, s.Service, s.Resource)
		}
	}
	if out[0].Spans[1].Parent != 0 {
		t.Errorf("child's parent %d, want 0", out[0].Spans[1].Parent)
	}
}

// TestTickBudget: a tick with a budget emits the oldest due traces up to
// about that many spans and keeps the others, still due, for the next
// tick; none is lost or emitted twice.
func TestTickBudget(t *testing.T) {
	now := time.Unix(0, 0)
	var out []*Trace
	a := NewAssembler(Options{Now: func() time.Time { return now }, Emit: func(tr *Trace) { out = append(out, tr) }})
	for i := range 10 {
		b := &record.Batch{}
		for j := range 3 {
			AppendSpan(b, ID{Hi: 1, Lo: uint64(i + 1)}, &Span{SpanID: SpanID(j + 1), Operation: "op", Start: 1, End: 2})
		}
		a.AddBatch(b)
		now = now.Add(time.Millisecond)
	}
	now = now.Add(time.Hour)
	a.TickBudget(0)
	if len(out) != 0 {
		t.Fatalf("budget 0: %d traces", len(out))
	}
	a.TickBudget(4) // two traces of 3 spans: the second goes over
	if len(out) != 2 || out[0].ID.Lo != 1 || out[1].ID.Lo != 2 {
		t.Fatalf("budget 4: %d traces", len(out))
	}
	a.Tick()
	if len(out) != 10 || a.Stats().Open != 0 {
		t.Fatalf("%d traces, %d open", len(out), a.Stats().Open)
	}
	for i, tr := range out {
		if tr.ID.Lo != uint64(i+1) || len(tr.Spans) != 3 {
			t.Errorf("trace %d: %v, %d spans", i, tr.ID, len(tr.Spans))
		}
	}
}
