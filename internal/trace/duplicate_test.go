package trace

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// assembleStats runs recs through an assembler (record clock) and returns
// the traces and its counts.
func assembleStats(recs []record.Record) ([]*Trace, Stats) {
	var out []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Emit: func(tr *Trace) { out = append(out, tr) }})
	var b record.Batch
	for i := range recs {
		b.AddRecord(&recs[i])
	}
	a.AddBatch(&b)
	a.Flush()
	return out, a.Stats()
}

// TestDuplicateRecordsAreDropped: a trace whose records all arrive twice
// (a log replayed twice, over Kieker TCP and then KDB) is the trace of one
// copy, not broken, with the copies counted: Kieker events,
// OperationExecutionRecords (whose copies were logged at another time)
// and span records alike.
func TestDuplicateRecordsAreDropped(t *testing.T) {
	var spans record.Batch
	id := ID{Hi: 3, Lo: 4}
	AppendSpan(&spans, id, &Span{SpanID: 1, Operation: "GET /", Service: "web", Host: "web", Start: 10, End: 60, Kind: KindServer,
		Attributes: []Attr{{Key: "http.method", Value: "GET", Type: TypeString}},
		Events:     []Event{{Name: "exception", Time: 20, Attributes: []Attr{{Key: "exception.type", Value: "E", Type: TypeString}}}}})
	spanRec(&spans, id, 2, 1, "SELECT", "db", 30, 40)

	oers := []record.Record{
		oerRec("void a.Main.main()", 7, 1, 8, "web", 0, 0),
		oerRec("void a.Web.get()", 7, 2, 5, "web", 1, 1),
		oerRec("void b.Svc.find()", 7, 3, 4, "db", 2, 2),
	}
	copies := slices.Clone(oers)
	for i := range copies {
		copies[i].LoggingTimestamp = 1000 + int64(i) // logged again later
	}

	for _, c := range []struct {
		name   string
		recs   []record.Record
		copies []record.Record // nil: recs again
	}{
		{"events", []record.Record{
			tm(1, 1, "h", 1, -1),
			before(1, 0, 10, "void a.A.main()"),
			before(1, 1, 20, "void a.A.x()"),
			failed(1, 2, 30, "void a.A.x()", "java.io.IOException"),
			call(1, 3, 35, "void a.A.main()", "void a.B.y()"),
			after(1, 4, 40, "void a.A.main()"),
		}, nil},
		{"executions", oers, copies},
		{"spans", slices.Clone(spans.Records), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			once, st1 := assembleStats(c.recs)
			if len(once) != 1 || len(once[0].Broken) != 0 || st1.Duplicates != 0 {
				t.Fatalf("one copy: %d traces, stats %+v, broken %v", len(once), st1, once[0].Broken)
			}
			dup := c.copies
			if dup == nil {
				dup = c.recs
			}
			for seed := range uint64(10) {
				recs := append(slices.Clone(c.recs), dup...)
				if seed > 0 {
					r := rand.New(rand.NewPCG(seed, 3))
					r.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
				}
				trs, st := assembleStats(recs)
				if len(trs) != 1 {
					t.Fatalf("seed %d: %d traces", seed, len(trs))
				}
				if len(trs[0].Broken) != 0 {
					t.Errorf("seed %d: broken: %v", seed, trs[0].Broken)
				}
				if got, want := shape(trs[0]), shape(once[0]); got != want {
					t.Errorf("seed %d: trace\n%s\nwant\n%s", seed, got, want)
				}
				if !slices.EqualFunc(trs[0].Spans, once[0].Spans, func(a, b Span) bool { return sameSpan(&a, &b) }) {
					t.Errorf("seed %d: the spans differ from one copy's", seed)
				}
				want := int64(len(c.recs))
				if c.name == "events" {
					want-- // the TraceMetadata: taken twice, no conflict, no span
				}
				if st.Duplicates != want || st.Broken != 0 || st.Spans != int64(len(once[0].Spans)) {
					t.Errorf("seed %d: stats %+v, want %d duplicates, no broken trace, %d spans", seed, st, want, len(once[0].Spans))
				}
			}
		})
	}
}

// TestConflictingRecordsStayBroken: the same key with other content is
// not a copy: the trace is broken, as before, and nothing is counted as a
// duplicate.
func TestConflictingRecordsStayBroken(t *testing.T) {
	var spans record.Batch
	id := ID{Hi: 5, Lo: 6}
	spanRec(&spans, id, 1, 0, "GET /", "web", 10, 60)
	spanRec(&spans, id, 2, 1, "SELECT", "db", 30, 40)
	spanRec(&spans, id, 2, 1, "SELECT", "db", 30, 41) // another end
	AppendSpan(&spans, id, &Span{SpanID: 1, Operation: "GET /", Service: "web", Host: "web", Start: 10, End: 60, Kind: KindServer,
		Attributes: []Attr{{Key: "k", Value: "v", Type: TypeString}}}) // an attribute more

	for _, c := range []struct {
		name  string
		recs  []record.Record
		spans int
		want  string
	}{
		{"events", []record.Record{
			tm(1, 1, "h", 1, -1),
			before(1, 0, 10, "void a.A.main()"),
			before(1, 1, 20, "void a.A.x()"),
			before(1, 1, 21, "void a.A.x()"), // another time
			after(1, 2, 30, "void a.A.x()"),
			after(1, 3, 40, "void a.A.main()"),
			after(1, 3, 40, "void a.A.other()"), // another operation
		}, 3, "orderIndex 1 of trace 1 used twice"},
		{"executions", []record.Record{
			oerRec("void a.Main.main()", 7, 1, 8, "web", 0, 0),
			oerRec("void a.Web.get()", 7, 2, 5, "web", 1, 1),
			oerRec("void a.Web.get()", 7, 2, 5, "db", 1, 1), // another host
		}, 3, "eoi 1 used twice"},
		{"spans", slices.Clone(spans.Records), 4, "span id 0000000000000002 used twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			trs, st := assembleStats(c.recs)
			if len(trs) != 1 || len(trs[0].Spans) != c.spans || st.Duplicates != 0 || st.Broken != 1 {
				t.Fatalf("%d traces, stats %+v, want %d spans", len(trs), st, c.spans)
			}
			if got := strings.Join(trs[0].Broken, "\n"); !strings.Contains(got, c.want) {
				t.Errorf("broken lacks %q:\n%s", c.want, got)
			}
		})
	}
}

// TestSameSpanFields: sameSpan compares every field of Span but those
// tree derives, so a field added to Span cannot be forgotten there.
func TestSameSpanFields(t *testing.T) {
	a := Span{SpanID: 1, Parent: -1, Operation: "op", OrderIndex: -1, EOI: -1, ESS: -1}
	derived := map[string]bool{"Parent": true, "Depth": true}
	typ := reflect.TypeOf(a)
	for i := range typ.NumField() {
		f := typ.Field(i)
		b := a
		b.Attributes, b.Events, b.Links = slices.Clone(a.Attributes), slices.Clone(a.Events), slices.Clone(a.Links)
		v := reflect.ValueOf(&b).Elem().Field(i)
		switch {
		case f.Name == "afterOrder":
			b.afterOrder++
		case !v.CanSet():
			t.Fatalf("field %s: unexported, not known to this test", f.Name)
		case v.Kind() == reflect.String:
			v.SetString(v.String() + "x")
		case v.CanInt():
			v.SetInt(v.Int() + 1)
		case v.CanUint():
			v.SetUint(v.Uint() + 1)
		case v.Kind() == reflect.Bool:
			v.SetBool(!v.Bool())
		case v.Kind() == reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		case v.Kind() == reflect.Struct && v.Field(0).CanUint():
			v.Field(0).SetUint(v.Field(0).Uint() + 1)
		case v.Kind() == reflect.Pointer && v.IsNil():
			// (A resource or scope: none against an empty one.)
			v.Set(reflect.New(v.Type().Elem()))
		default:
			t.Fatalf("field %s (%s): not known to this test", f.Name, f.Type)
		}
		if got := sameSpan(&a, &b); got != derived[f.Name] {
			t.Errorf("field %s differs: sameSpan %v", f.Name, got)
		}
	}
	// A resource and a scope compare by content: a span delivered twice
	// may point at two copies of them.
	attrs := []Attr{{Key: "service.name", Value: "svc", Type: TypeString}}
	a.Resource, a.Scope = &Resource{Attributes: attrs}, &Scope{Name: "lib", Version: "1"}
	b := a
	b.Resource, b.Scope = &Resource{Attributes: slices.Clone(attrs)}, &Scope{Name: "lib", Version: "1"}
	if !sameSpan(&a, &b) {
		t.Error("copies of one resource and scope differ: sameSpan false")
	}
	b.Resource = &Resource{Attributes: []Attr{{Key: "service.name", Value: "other", Type: TypeString}}}
	if sameSpan(&a, &b) {
		t.Error("another resource: sameSpan true")
	}
}
