package record

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// tally counts ts per type, in the order first seen: what Frames.Counts
// must hold.
func tally(ts []*Type) []TypeCount {
	var out []TypeCount
next:
	for _, t := range ts {
		for i := range out {
			if out[i].Type == t {
				out[i].N++
				continue next
			}
		}
		out = append(out, TypeCount{Type: t, N: 1})
	}
	return out
}

// TestFramesCounts checks that a batch of frames only counts its frames
// per type through AddFrame, Copy (AddFrames), Truncate and Reset.
func TestFramesCounts(t *testing.T) {
	before, after := MustType("test.Before", Field{Name: "a", Kind: Long}), MustType("test.After", Field{Name: "a", Kind: Long})
	meta := MustType("test.Meta", Field{Name: "a", Kind: Long})
	check := func(what string, f *Frames) {
		t.Helper()
		if diff := cmp.Diff(tally(f.Types), f.Counts, cmp.Comparer(func(a, b *Type) bool { return a == b }), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Counts differ from the frames' types (-want +got):\n%s", what, diff)
		}
	}
	var b Batch
	b.Frames.Source = 1
	for i := range 10 {
		typ := before
		switch {
		case i%2 == 1:
			typ = after
		case i == 4:
			typ = meta
		}
		b.Frames.Data = append(b.Frames.Data, make([]byte, 20)...)
		b.Frames.AddFrame(len(b.Frames.Data), typ)
	}
	check("built", &b.Frames)
	if b.Len() != 10 || len(b.Frames.Counts) != 3 {
		t.Fatalf("Len %d, %d types counted, want 10 and 3", b.Len(), len(b.Frames.Counts))
	}

	var c Batch
	c.Copy(&b)
	c.Copy(&b)
	check("two copies", &c.Frames)
	if got := c.Frames.Counts[0].N; got != 8 {
		t.Errorf("two copies count %d Before frames, want 8", got)
	}

	b.Truncate(4) // the meta frame and what follows go
	check("truncated", &b.Frames)
	if len(b.Frames.Counts) != 2 {
		t.Errorf("after Truncate(4) %d types counted, want 2", len(b.Frames.Counts))
	}
	b.Reset()
	check("reset", &b.Frames)
	if len(b.Frames.Counts) != 0 {
		t.Errorf("after Reset %d types counted", len(b.Frames.Counts))
	}
}
