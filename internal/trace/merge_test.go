package trace

import (
	"slices"
	"testing"
)

// TestMergeParts: parts of one trace become one tree; a span in two parts
// is one span; a parent found in another part is no longer missing, one
// found nowhere still is.
func TestMergeParts(t *testing.T) {
	sp := func(id, parent SpanID, start int64) Span {
		return Span{SpanID: id, ParentID: parent, Parent: -1, Operation: "op", Start: start, End: start + 10, OrderIndex: -1, EOI: -1, ESS: -1}
	}
	id := ID{Hi: 1, Lo: 2}
	a := &Trace{ID: id, Spans: []Span{sp(1, 0, 100), sp(2, 1, 101)}}
	b := &Trace{ID: id, Spans: []Span{sp(3, 2, 102), sp(2, 1, 101)}, Broken: []string{"span 0000000000000003 (op): parent 0000000000000002 missing", "an unclosed call"}}
	c := &Trace{ID: id, Spans: []Span{sp(4, 9, 103)}, Broken: []string{"span 0000000000000004 (op): parent 0000000000000009 missing"}}
	m := MergeParts([]*Trace{a, b, c})
	if len(m.Spans) != 4 {
		t.Fatalf("%d spans, want 4", len(m.Spans))
	}
	var order []SpanID
	for _, s := range m.Spans {
		order = append(order, s.SpanID)
	}
	if !slices.Equal(order, []SpanID{1, 2, 3, 4}) || m.Spans[2].Parent != 1 || m.Spans[2].Depth != 2 {
		t.Fatalf("tree %v, span 3 parent %d depth %d", order, m.Spans[2].Parent, m.Spans[2].Depth)
	}
	want := []string{"an unclosed call", "span 0000000000000004 (op): parent 0000000000000009 missing"}
	if !slices.Equal(m.Broken, want) {
		t.Fatalf("broken %q, want %q", m.Broken, want)
	}
	if len(a.Spans) != 2 || len(b.Broken) != 2 {
		t.Fatal("a part was changed")
	}
	if MergeParts([]*Trace{a}) != a {
		t.Fatal("one part is not returned as it is")
	}
}

// TestMergePartsCopies: parts stored twice (in a cluster, a trace
// assembled again after a takeover) give every span once: a whole copy is
// left out with its broken reasons (of two with the same spans, the one
// not broken stays), a part whose spans another holds too;
// of two copies of a span the one that says more stays (a Kieker call
// closed in one, still open in the other), whatever the order.
func TestMergePartsCopies(t *testing.T) {
	id := ID{Hi: 3, Lo: 4}
	res := func() *Resource {
		return &Resource{Attributes: []Attr{{Key: "service.name", Value: "svc", Type: TypeString}}}
	}
	sp := func(id, parent SpanID, start, end int64, r *Resource) Span {
		return Span{SpanID: id, ParentID: parent, Parent: -1, Operation: "op", Start: start, End: end, OrderIndex: -1, EOI: -1, ESS: -1, Resource: r}
	}
	whole := func() *Trace {
		r := res()
		return &Trace{ID: id, Resources: []*Resource{r}, Spans: []Span{sp(1, 0, 100, 200, r), sp(2, 1, 110, 150, r), sp(3, 1, 160, 190, r)}}
	}
	check := func(name string, m *Trace, spans int) {
		t.Helper()
		if len(m.Spans) != spans {
			t.Fatalf("%s: %d spans, want %d", name, len(m.Spans), spans)
		}
		seen := map[SpanID]bool{}
		for _, s := range m.Spans {
			if seen[s.SpanID] {
				t.Fatalf("%s: span %s twice", name, s.SpanID)
			}
			seen[s.SpanID] = true
		}
	}
	a, b := whole(), whole()
	m := MergeParts([]*Trace{a, b})
	check("two copies", m, 3)
	if m != a {
		t.Fatal("two copies: the first is not returned as it is")
	}
	// A copy assembled from fewer spans, broken (its root missing), and
	// the whole trace: the whole one, unbroken.
	part := &Trace{ID: id, Spans: []Span{sp(2, 1, 110, 150, nil)}, Broken: []string{"orderIndex 0 to 1 of trace 9 missing"}}
	for _, order := range [][]*Trace{{part, whole()}, {whole(), part}} {
		m = MergeParts(order)
		check("a partial copy", m, 3)
		if len(m.Broken) != 0 {
			t.Fatalf("a partial copy: broken %q", m.Broken)
		}
	}
	// Two copies with the same spans, one broken (its events assembled
	// without the TraceMetadata that came after the window): the whole
	// one, in either order.
	for _, first := range []bool{true, false} {
		w, br := whole(), whole()
		br.Broken = []string{"no TraceMetadata for trace 9"}
		order := []*Trace{w, br}
		if !first {
			order = []*Trace{br, w}
		}
		if m = MergeParts(order); m != w {
			t.Fatalf("a broken copy first %v: got the copy broken %q, want the whole one", !first, m.Broken)
		}
	}
	// Two copies broken for as many reasons, different ones: the same
	// one in either order (nodes read parts in different orders).
	x1, x2 := whole(), whole()
	x1.Broken, x2.Broken = []string{"no TraceMetadata for trace 9"}, []string{"call a.C.m() never returned"}
	if m1, m2 := MergeParts([]*Trace{x1, x2}), MergeParts([]*Trace{x2, x1}); m1 != m2 {
		t.Fatalf("copies broken for as many reasons: %q in one order, %q in the other", m1.Broken, m2.Broken)
	}
	// Overlapping parts: span 2 in both, still open in one (a Kieker call
	// whose return is in the other part).
	r1, r2 := res(), res()
	x := &Trace{ID: id, Resources: []*Resource{r1}, Spans: []Span{sp(1, 0, 100, 200, r1), sp(2, 1, 110, 110, r1)}}
	y := &Trace{ID: id, Resources: []*Resource{r2}, Spans: []Span{sp(2, 1, 110, 150, r2), sp(3, 1, 160, 190, r2)}}
	for _, order := range [][]*Trace{{x, y}, {y, x}} {
		m = MergeParts(order)
		check("overlapping parts", m, 3)
		for _, s := range m.Spans {
			if s.SpanID == 2 && s.End != 150 {
				t.Fatalf("overlapping parts: span 2 ends at %d, want the closed copy's 150", s.End)
			}
		}
		if len(m.Broken) != 0 || len(m.Resources) != 1 {
			t.Fatalf("overlapping parts: broken %q, %d resources (want 1: equal ones are one)", m.Broken, len(m.Resources))
		}
		for _, s := range m.Spans {
			if s.Resource != m.Resources[0] {
				t.Fatal("a span's resource is not the merged trace's")
			}
		}
	}
	if len(x.Spans) != 2 || x.Spans[1].End != 110 || y.Spans[0].Resource != r2 {
		t.Fatal("a part was changed")
	}
}

// FuzzMergeParts: parts of any shape (span ids shared between parts,
// parents anywhere or nowhere, copies with other times) merge without a
// panic into a trace with each span id once that holds every span id of
// the parts, and the parts are left as they were.
func FuzzMergeParts(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 2, 1, 1, 1, 0, 2, 3, 2})
	f.Add([]byte{0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 5})
	f.Add([]byte{3, 7, 7, 3, 7, 7, 2, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		id := ID{Hi: 1, Lo: 1}
		parts := []*Trace{{ID: id}, {ID: id}, {ID: id}}
		for i := 0; i+2 < len(b) && i < 3*64; i += 3 {
			p := parts[int(b[i])%len(parts)]
			sid := SpanID(b[i+1]%12 + 1)
			if slices.ContainsFunc(p.Spans, func(s Span) bool { return s.SpanID == sid }) {
				continue // a stored part has each id once (tree made it so)
			}
			p.Spans = append(p.Spans, Span{SpanID: sid, ParentID: SpanID(b[i+2] % 13), Parent: -1, Operation: "op",
				Start: int64(b[i+2]), End: int64(b[i+2]) + int64(b[i]), OrderIndex: -1, EOI: -1, ESS: -1})
		}
		want := map[SpanID]bool{}
		var before []int
		for _, p := range parts {
			before = append(before, len(p.Spans))
			for _, s := range p.Spans {
				want[s.SpanID] = true
			}
		}
		m := MergeParts(parts)
		got := map[SpanID]bool{}
		for _, s := range m.Spans {
			if got[s.SpanID] {
				t.Fatalf("span %s twice", s.SpanID)
			}
			got[s.SpanID] = true
		}
		for sid := range want {
			if !got[sid] {
				t.Fatalf("span %s lost", sid)
			}
		}
		for i, p := range parts {
			if len(p.Spans) != before[i] {
				t.Fatal("a part was changed")
			}
		}
	})
}
