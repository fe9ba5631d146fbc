package trace

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestResourcesOncePerTrace: spans of a resource and scope, arriving in
// several batches (each with lists of its own), share one entry of their
// trace's tables; spans of another resource or scope get another; span
// records written back (AppendSpan) carry them again; a trace of span
// records without resources has no tables; a lean assembler keeps none.
func TestResourcesOncePerTrace(t *testing.T) {
	id := ID{Hi: 1, Lo: 2}
	res := func(svc, env string) *Resource {
		return &Resource{Attributes: []Attr{{Key: "service.name", Value: svc, Type: TypeString},
			{Key: "deployment.environment", Value: env, Type: TypeString}, {Key: "process.pid", Value: "42", Type: TypeInt}}}
	}
	scope := func(v string) *Scope {
		return &Scope{Name: "lib", Version: v, Attributes: []Attr{{Key: "team", Value: "x", Type: TypeString}}}
	}
	type sp struct {
		sid, parent SpanID
		svc, env    string
		version     string // "": no scope
	}
	spans := []sp{{1, 0, "web", "prod", "1.0"}, {2, 1, "web", "prod", "1.0"}, {3, 2, "db", "prod", "1.0"}, {4, 3, "db", "prod", "2.0"}, {5, 1, "web", "prod", ""}}
	var batches []*record.Batch
	for i, s := range spans {
		b := &record.Batch{} // a batch per span: no list is shared
		sc := (*Scope)(nil)
		if s.version != "" {
			sc = scope(s.version)
		}
		AppendSpan(b, id, &Span{SpanID: s.sid, ParentID: s.parent, Operation: "op", Service: s.svc, Host: s.svc,
			Start: int64(10 + i), End: int64(100 - i), Resource: res(s.svc, s.env), Scope: sc})
		batches = append(batches, b)
	}
	for _, lean := range []bool{false, true} {
		var out []*Trace
		a := NewAssembler(Options{Clock: RecordClock, Lean: lean, Emit: func(tr *Trace) { out = append(out, tr) }})
		for _, b := range batches {
			a.AddBatch(b)
		}
		a.Flush()
		if len(out) != 1 || len(out[0].Spans) != len(spans) {
			t.Fatalf("lean %v: %d traces", lean, len(out))
		}
		tr := out[0]
		if lean {
			if len(tr.Resources) != 0 || len(tr.Scopes) != 0 {
				t.Errorf("lean: %d resources, %d scopes", len(tr.Resources), len(tr.Scopes))
			}
			continue
		}
		if len(tr.Resources) != 2 || len(tr.Scopes) != 2 {
			t.Fatalf("%d resources and %d scopes, want 2 and 2", len(tr.Resources), len(tr.Scopes))
		}
		for i := range tr.Spans {
			s := &tr.Spans[i]
			var want sp
			for _, w := range spans {
				if w.sid == s.SpanID {
					want = w
				}
			}
			if tr.ResourceIndex(s.Resource) < 0 || !s.Resource.Equal(res(want.svc, want.env)) {
				t.Errorf("span %s: resource %+v", s.SpanID, s.Resource)
			}
			if want.version == "" && s.Scope != nil || want.version != "" && (tr.ScopeIndex(s.Scope) < 0 || !s.Scope.Equal(scope(want.version))) {
				t.Errorf("span %s: scope %+v, want version %q", s.SpanID, s.Scope, want.version)
			}
			if a, ok := s.Attr("deployment.environment"); !ok || a.Value != "prod" {
				t.Errorf("span %s: Attr(deployment.environment) = %v %v", s.SpanID, a, ok)
			}
			if a, ok := s.Attr(ScopeVersionKey); ok != (want.version != "") || ok && a.Value != want.version {
				t.Errorf("span %s: Attr(otel.scope.version) = %v %v", s.SpanID, a, ok)
			}
		}
		// Written back as records, read again: the same tables.
		var b record.Batch
		for i := range tr.Spans {
			AppendSpan(&b, tr.ID, &tr.Spans[i])
		}
		again := assemble(t, b.Records, Options{})
		if len(again) != 1 || len(again[0].Resources) != 2 || len(again[0].Scopes) != 2 {
			t.Fatalf("written back: %d traces", len(again))
		}
	}
	// A span record without a resource or scope (as zorka's): no tables.
	var b record.Batch
	spanRec(&b, id, 1, 0, "GET /", "web", 10, 60)
	if trs := assemble(t, b.Records, Options{}); len(trs) != 1 || trs[0].Resources != nil || trs[0].Scopes != nil || trs[0].Spans[0].Resource != nil {
		t.Errorf("a span without a resource: %+v", trs)
	}
}

// TestResourcesSharedByTraces: the traces of one resource share one copy
// of it (the assembler makes it once, not per trace).
func TestResourcesSharedByTraces(t *testing.T) {
	var out []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Window: 10, Emit: func(tr *Trace) { out = append(out, tr) }})
	for i := range 3 {
		b := &record.Batch{}
		res := &Resource{Attributes: []Attr{{Key: "service.name", Value: "web", Type: TypeString}, {Key: "k8s.pod.name", Value: "web-1", Type: TypeString}}}
		AppendSpan(b, ID{Lo: uint64(i + 1)}, &Span{SpanID: 1, Operation: "op", Service: "web", Start: int64(100 * i), End: int64(100*i + 1), Resource: res})
		a.AddBatch(b)
	}
	a.Flush()
	if len(out) != 3 {
		t.Fatalf("%d traces", len(out))
	}
	for _, tr := range out {
		if len(tr.Resources) != 1 || tr.Resources[0] != out[0].Resources[0] || tr.Spans[0].Resource != tr.Resources[0] {
			t.Errorf("trace %s: resources %v, span's %p; the first trace's %p", tr.ID, tr.Resources, tr.Spans[0].Resource, out[0].Resources[0])
		}
	}
}

// TestSharedResourceLists: span records of one batch sharing their
// resource lists (as the decoders make them: one list per resource),
// interleaved across resources, scopes and traces, get their own
// resource and scope, one table entry each per trace; a batch after it
// whose lists are new (a batch's lists are reused after it) is not
// taken for the last one's.
func TestSharedResourceLists(t *testing.T) {
	mk := func(svc, version string) (*Resource, *Scope) {
		return &Resource{Attributes: []Attr{{Key: "service.name", Value: svc, Type: TypeString}}},
			&Scope{Name: "lib", Version: version}
	}
	type origin struct{ svc, version string }
	origins := []origin{{"web", "1"}, {"db", "1"}, {"web", "2"}}
	b := &record.Batch{}
	var lists [3][2]record.Value
	var want []origin
	for i := range 12 {
		o := origins[i%3]
		if i == 7 {
			o = origins[0] // twice in a row
		}
		res, sc := mk(o.svc, o.version)
		id := ID{Hi: 1, Lo: uint64(1 + i%2)}
		AppendSpan(b, id, &Span{SpanID: SpanID(i + 1), Operation: "op", Service: o.svc, Start: int64(10 + i), End: 100, Resource: res, Scope: sc})
		v := b.Records[len(b.Records)-1].Values
		k := slices.Index(origins, o)
		if lists[k][0].List() == nil {
			lists[k] = [2]record.Value{v[SpanResource], v[SpanResourceTypes]}
		} else {
			v[SpanResource], v[SpanResourceTypes] = lists[k][0], lists[k][1] // shared, as a decoder's
		}
		want = append(want, o)
	}
	// The next batch: one span of "db" whose lists are new.
	b2 := &record.Batch{}
	res, sc := mk("db", "1")
	AppendSpan(b2, ID{Hi: 1, Lo: 1}, &Span{SpanID: 99, Operation: "op", Service: "db", Start: 50, End: 100, Resource: res, Scope: sc})
	var out []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Emit: func(tr *Trace) { out = append(out, tr) }})
	a.AddBatch(b)
	a.AddBatch(b2)
	a.Flush()
	if len(out) != 2 {
		t.Fatalf("%d traces, want 2", len(out))
	}
	seen := 0
	for _, tr := range out {
		if len(tr.Resources) != 2 || len(tr.Scopes) != 2 {
			t.Errorf("trace %s: %d resources, %d scopes, want 2 and 2", tr.ID, len(tr.Resources), len(tr.Scopes))
		}
		for i := range tr.Spans {
			s := &tr.Spans[i]
			w := origin{"db", "1"}
			if s.SpanID != 99 {
				w = want[s.SpanID-1]
			}
			seen++
			if s.Resource == nil || s.Resource.Attributes[0].Value != w.svc || s.Scope == nil || s.Scope.Version != w.version {
				t.Errorf("span %d: resource %v scope %v, want %v", s.SpanID, s.Resource, s.Scope, w)
			}
			if !slices.Contains(tr.Resources, s.Resource) || !slices.Contains(tr.Scopes, s.Scope) {
				t.Errorf("span %d: its resource or scope is not in its trace's tables", s.SpanID)
			}
		}
	}
	if seen != 13 {
		t.Errorf("%d spans, want 13", seen)
	}
}

// TestResourcesSharedAcrossTraces: the traces of one process share its
// Resource and Scope even when many more processes send between them
// (a site of a thousand instrumented processes), and every trace gets
// its own content, whatever the table's slots collide on.
func TestResourcesSharedAcrossTraces(t *testing.T) {
	const procs = 1000
	res := func(p int) *Resource {
		return &Resource{Attributes: []Attr{{Key: "service.name", Value: fmt.Sprintf("svc-%d", p%8), Type: TypeString},
			{Key: "host.name", Value: fmt.Sprintf("node-%d", p%4), Type: TypeString},
			{Key: "process.pid", Value: strconv.Itoa(1000 + p), Type: TypeInt}}}
	}
	scope := &Scope{Name: "otelhttp", Version: "0.60.0"}
	var out []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Emit: func(tr *Trace) { out = append(out, tr) }})
	b := &record.Batch{}
	for round := range 2 {
		for p := range procs {
			id := ID{Hi: uint64(round + 1), Lo: uint64(p + 1)}
			AppendSpan(b, id, &Span{SpanID: 1, Operation: "op", Service: "svc", Start: 10, End: 20, Resource: res(p), Scope: scope})
		}
	}
	a.AddBatch(b)
	a.Flush()
	if len(out) != 2*procs {
		t.Fatalf("%d traces, want %d", len(out), 2*procs)
	}
	byID := map[ID]*Trace{}
	for _, tr := range out {
		byID[tr.ID] = tr
		p := int(tr.ID.Lo - 1)
		if len(tr.Spans) != 1 || !tr.Spans[0].Resource.Equal(res(p)) || !tr.Spans[0].Scope.Equal(scope) {
			t.Fatalf("trace %v: spans %d, resource %+v, scope %+v; want process %d's", tr.ID, len(tr.Spans), tr.Spans[0].Resource, tr.Spans[0].Scope, p)
		}
	}
	shared, scopes := 0, map[*Scope]bool{}
	for p := range procs {
		first, second := byID[ID{Hi: 1, Lo: uint64(p + 1)}], byID[ID{Hi: 2, Lo: uint64(p + 1)}]
		if first.Spans[0].Resource == second.Spans[0].Resource {
			shared++
		}
		scopes[first.Spans[0].Scope], scopes[second.Spans[0].Scope] = true, true
	}
	// 1,000 resources in sets of 8 of 8,192 entries: hardly ever does a set
	// overflow.
	if shared < procs*99/100 {
		t.Errorf("%d of %d processes' traces share their Resource; want at least 99 %%", shared, procs)
	}
	if len(scopes) != 1 {
		t.Errorf("%d Scopes made for one scope", len(scopes))
	}
}
