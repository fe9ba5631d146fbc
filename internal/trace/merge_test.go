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
