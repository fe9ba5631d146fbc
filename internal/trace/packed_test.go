package trace

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/record"
)

// assembleWith assembles records (batches of 7) with o, the clock a
// record clock so that packed and unpacked runs cut the same traces.
func assembleWith(recs []record.Record, o Options) ([]*Trace, Stats) {
	var out []*Trace
	o.Clock = RecordClock
	o.Emit = func(t *Trace) { out = append(out, t) }
	a := NewAssembler(o)
	for i := 0; i < len(recs); i += 7 {
		b := &record.Batch{Origin: record.Origin{Host: "origin"}}
		for j := i; j < min(i+7, len(recs)); j++ {
			b.AddRecord(&recs[j])
		}
		a.AddBatch(b)
		a.Tick()
	}
	a.Flush()
	return out, a.Stats()
}

// spanDump renders a trace with every field of its spans, Parent and
// Depth included, for comparing traces made two ways.
func spanDump(t *Trace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s part %d broken %q res %d scopes %d\n", t.ID, t.Part, t.Broken, len(t.Resources), len(t.Scopes))
	for i := range t.Spans {
		s := t.Spans[i]
		ri, si := t.ResourceIndex(s.Resource), t.ScopeIndex(s.Scope)
		s.Resource, s.Scope = nil, nil // (their addresses differ: the indexes say which)
		fmt.Fprintf(&b, "%+v res=%d scope=%d\n", s, ri, si)
	}
	return b.String()
}

// checkPacked assembles recs with o, unpacked and packed, and fails when
// a packed trace, read through an Unpacker or unpacked, differs from the
// trace made of Spans in any field, or the stats differ.
func checkPacked(t *testing.T, recs []record.Record, o Options) {
	t.Helper()
	want, wst := assembleWith(recs, o)
	o.Packed = true
	got, gst := assembleWith(recs, o)
	if wst != gst {
		t.Fatalf("stats: packed %+v, unpacked %+v", gst, wst)
	}
	if len(got) != len(want) {
		t.Fatalf("%d traces packed, %d unpacked", len(got), len(want))
	}
	var u Unpacker
	lu := Unpacker{Lean: true}
	for i := range want {
		w, g := want[i], got[i]
		if g.SpanCount() != len(w.Spans) || g.Source() != w.Source() {
			t.Fatalf("trace %s: %d spans of source %v, want %d of %v", w.ID, g.SpanCount(), g.Source(), len(w.Spans), w.Source())
		}
		ws := spanDump(w)
		if vs := spanDump(u.Trace(g)); vs != ws {
			t.Fatalf("trace %d through an Unpacker (packed %v):\n%s\nwant:\n%s", i, (g.Packed != nil), vs, ws)
		}
		// A lean Unpacker makes the spans as a lean assembler would:
		// the same, less what it does not keep.
		lg := lu.Trace(g)
		if g.Packed != nil {
			for k := range lg.Spans {
				if s := &lg.Spans[k]; s.Resource != nil || s.Scope != nil || s.Attributes != nil || s.Events != nil || s.Links != nil {
					t.Fatalf("trace %d span %d through a lean Unpacker keeps more than its shape: %+v", i, k, *s)
				}
			}
		}
		if ls, lws := spanDump(leanCopy(lg)), spanDump(leanCopy(w)); ls != lws {
			t.Fatalf("trace %d through a lean Unpacker (packed %v):\n%s\nwant:\n%s", i, (g.Packed != nil), ls, lws)
		}
		g.Unpack()
		if g.Packed != nil {
			t.Fatal("still packed after Unpack")
		}
		// The spans by their dump (every field, the unexported too), the
		// trace's own fields by cmp (on all the spans it cost 5 times
		// the rest of a fuzz input).
		if gs := spanDump(g); gs != ws {
			t.Fatalf("trace %d unpacked:\n%s\nwant:\n%s", i, gs, ws)
		}
		wt, gt := *w, *g
		wt.Spans, gt.Spans = nil, nil
		if d := cmp.Diff(&wt, &gt, cmpopts.IgnoreUnexported(Trace{}), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("trace %d unpacked (-want +got):\n%s", i, d)
		}
		checkTree(t, g)
	}
}

// leanCopy returns a copy of t whose spans hold what a lean assembler
// keeps (no resource, scope, attributes, events or links).
func leanCopy(t *Trace) *Trace {
	c := *t
	c.Spans = make([]Span, len(t.Spans))
	for i, s := range t.Spans {
		s.Resource, s.Scope, s.Attributes, s.Events, s.Links = nil, nil, nil, nil, nil
		c.Spans[i] = s
	}
	return &c
}

// TestPackedTracesAreTheSame: a trace emitted packed, read through an
// Unpacker (or a lean one: its shape) or unpacked, is the trace made of
// Spans, field by field,
// Parent and Depth included, with the same Broken list and stats: for
// every kind of trace (Kieker events and executions are never packed,
// traces mixing them with spans neither), every field of a span record
// (attributes, events, links, resources and scopes, inline strings and
// dictionary ids over dictionaries that fill), broken trees (missing
// parents, cycles, own parents, negative durations), span ids used
// twice (copies dropped, conflicts renamed: made as Spans), parts of
// large traces, and lean assembly.
func TestPackedTracesAreTheSame(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var recs []record.Record
	for range 40 {
		recs = append(recs, genTraces(r)...)
	}
	res := &Resource{Attributes: []Attr{{Key: "service.name", Value: "web", Type: TypeString}, {Key: "process.pid", Value: "7", Type: TypeInt}}}
	sc := &Scope{Name: "lib", Version: "1.2", Attributes: []Attr{{Key: "team", Value: "x", Type: TypeString}}}
	var b record.Batch
	for i := range 3000 {
		id := ID{Hi: uint64(i%700 + 1), Lo: 99}
		s := Span{SpanID: SpanID(i%11 + 1), ParentID: SpanID(i % 13), Operation: "op " + strconv.Itoa(i%50), Service: "web",
			Start: int64(1000 + i%17*5), End: int64(1040 + i%23*3), Kind: Kind(i % 6), Status: Status(i % 3),
			StatusMessage: "msg " + strconv.Itoa(i), Thread: "t" + strconv.Itoa(i%3), Process: "7"}
		switch i % 5 {
		case 0:
			s.Resource, s.Scope = res, sc
			s.Events = []Event{{Name: "ev", Time: 1234, Attributes: []Attr{{Key: "e", Value: "v" + strconv.Itoa(i), Type: TypeString}}}}
		case 1:
			s.Service, s.Host = "", "" // the origin's host
			s.Component = "pkg.Class"
			s.Links = []Link{{TraceID: ID{Hi: 5, Lo: 6}, SpanID: 77, TraceState: "a=b", Attributes: []Attr{{Key: "k", Value: "1", Type: TypeInt}}}}
		case 2:
			s.ParentID = s.SpanID // its own parent
		}
		for k := range i % 7 {
			s.Attributes = append(s.Attributes, Attr{Key: "key" + strconv.Itoa(k), Value: fmt.Sprintf("v%d-%d", i/2, k), Type: ValueType(k%6 + 1)})
		}
		AppendSpan(&b, id, &s)
		recs = append(recs, b.Records[len(b.Records)-1].Clone())
		if i%9 == 0 {
			recs = append(recs, b.Records[len(b.Records)-1].Clone()) // a copy
		}
	}
	for _, c := range []struct {
		name string
		o    Options
	}{{"default", Options{}}, {"lean", Options{Lean: true}}, {"parts", Options{MaxSpans: 5}}, {"evicted", Options{MaxOpenTraces: 3}}, {"window", Options{Window: time.Hour}}} {
		t.Run(c.name, func(t *testing.T) { checkPacked(t, recs, c.o) })
	}
	// Most traces of span records are packed (those without ids used
	// twice).
	got, _ := assembleWith(recs, Options{Packed: true})
	packed := 0
	for _, tr := range got {
		if tr.Packed != nil {
			packed++
		}
	}
	if packed < len(got)/4 {
		t.Errorf("%d of %d traces packed", packed, len(got))
	}
}

// TestPackedTracesReadElsewhere: packed traces read on another goroutine
// while the assembler goes on adding strings to the dictionary they
// refer to (run under -race) are the traces made of Spans.
func TestPackedTracesReadElsewhere(t *testing.T) {
	bs := benchSpans(64, 256)
	dumps := func(packed bool) []string {
		ch := make(chan *Trace, 64)
		done := make(chan []string)
		go func() {
			var u Unpacker
			var out []string
			for tr := range ch {
				out = append(out, spanDump(u.Trace(tr)))
			}
			u.Release()
			done <- out
		}()
		now := time.Unix(0, 0)
		a := NewAssembler(Options{Window: time.Second, Packed: packed, Now: func() time.Time { return now }, Emit: func(tr *Trace) { ch <- tr }})
		for r := range 3 {
			restamp(bs, r)
			for _, b := range bs {
				a.AddBatch(b)
				now = now.Add(100 * time.Millisecond)
				a.Tick()
			}
		}
		a.Flush()
		close(ch)
		return <-done
	}
	want, got := dumps(false), dumps(true)
	if len(want) != len(got) || len(want) < 1000 {
		t.Fatalf("%d traces packed, %d unpacked", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("trace %d packed:\n%s\nunpacked:\n%s", i, got[i], want[i])
		}
	}
}

// FuzzPacked: span records with arbitrary ids, parents (themselves,
// cycles, missing), times and copies, among well-formed traces of every
// source: a packed trace is the trace made of Spans.
func FuzzPacked(f *testing.F) {
	for _, s := range [][]byte{{0, 1, 2, 3}, {4, 4, 4, 4, 4, 4, 4, 4}, {7, 0, 0, 7, 1, 1, 5, 5, 5, 2, 2}, []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"), []byte("packed traces, the same")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var seed [8]byte
		copy(seed[:], data)
		recs := genTraces(rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:]), 3)))
		var b record.Batch
		for i := 0; i+4 <= len(data) && i < 1600; i += 4 {
			k, o, x := int64(data[i+1]%5), int64(data[i+2]%9), int64(data[i+3]%9)
			spanRec(&b, ID{Hi: 1, Lo: uint64(k)}, SpanID(o), SpanID(x), "s"+strconv.Itoa(int(data[i]%3)), "svc", x*10, o*10)
			recs = append(recs, b.Records[len(b.Records)-1].Clone())
			if data[i]%7 == 0 {
				recs = append(recs, b.Records[len(b.Records)-1].Clone())
			}
		}
		for _, o := range []Options{{}, {MaxSpans: 3}, {Lean: true}} {
			checkPacked(t, recs, o)
		}
	})
}

// TestPackedEveryField: traces of span records with every field
// (attributes, events, links, resources, scopes, messages), each span id
// once, are all emitted packed, lean or not, and are the traces made of
// Spans.
func TestPackedEveryField(t *testing.T) {
	res := &Resource{Attributes: []Attr{{Key: "service.name", Value: "web", Type: TypeString}}}
	sc := &Scope{Name: "lib", Version: "1.2", Attributes: []Attr{{Key: "team", Value: "x", Type: TypeString}}}
	var recs []record.Record
	var b record.Batch
	for i := range 400 {
		s := Span{SpanID: SpanID(i%4 + 1), ParentID: SpanID(i % 4), Operation: "op " + strconv.Itoa(i%3), Service: "web",
			Start: int64(1000 + i), End: int64(2000 + i), Kind: KindServer, Status: StatusError, StatusMessage: "m" + strconv.Itoa(i),
			Component: "c", Thread: "t", Process: "p", Resource: res, Scope: sc,
			Attributes: []Attr{{Key: "k", Value: "v" + strconv.Itoa(i), Type: TypeString}, {Key: "n", Value: "1", Type: TypeInt}},
			Events:     []Event{{Name: "ev", Time: 1500, Attributes: []Attr{{Key: "e", Value: "x", Type: TypeString}}}},
			Links:      []Link{{TraceID: ID{Hi: 1, Lo: 2}, SpanID: 3, TraceState: "a=b", Attributes: []Attr{{Key: "l", Value: "y", Type: TypeString}}}, {TraceID: ID{Lo: 4}, SpanID: 5}}}
		AppendSpan(&b, ID{Hi: uint64(i/4 + 1), Lo: 1}, &s)
		recs = append(recs, b.Records[len(b.Records)-1].Clone())
	}
	for _, lean := range []bool{false, true} {
		got, _ := assembleWith(recs, Options{Packed: true, Lean: lean})
		if len(got) != 100 {
			t.Fatalf("%d traces, want 100", len(got))
		}
		for _, tr := range got {
			if !(tr.Packed != nil) || tr.SpanCount() != 4 {
				t.Fatalf("trace %s: packed %v, %d spans (lean %v)", tr.ID, (tr.Packed != nil), tr.SpanCount(), lean)
			}
		}
		checkPacked(t, recs, Options{Lean: lean})
	}
}
