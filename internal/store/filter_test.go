package store

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestFilterKiekerPairs: the filter holds the pair of every Kieker
// position trace.KiekerAttrs gives a span (it hashes them without building
// them, each value once), and every string of the spans.
func TestFilterKiekerPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f blockFilter
	want := map[uint64]struct{}{}
	wantStr := map[string]struct{}{}
	for tr := range 50 {
		t1 := &trace.Trace{ID: trace.KiekerID(int64(tr))}
		for i := range 40 {
			s := trace.Span{Operation: "op" + string(rune('a'+rng.IntN(5))), KiekerTrace: int64(tr % 7), Session: []string{"", "s1", "s2"}[rng.IntN(3)]}
			switch rng.IntN(3) {
			case 0:
				s.Source, s.OrderIndex, s.EOI, s.ESS = trace.FromEvents, int32(rng.IntN(100)-3), -1, -1
			case 1:
				s.Source, s.OrderIndex, s.EOI, s.ESS = trace.FromExecution, -1, int32(i), int32(rng.IntN(5))
				if i == 7 {
					s.EOI = 1 << 20 // past the bit set
				}
			default:
				s.Source = trace.FromSpan
				s.Attributes = []trace.Attr{{Key: "k", Value: "v" + string(rune('0'+i%3))}}
			}
			for _, a := range append(trace.KiekerAttrs(&s), s.Attributes...) {
				want[pairHash(a.Key, a.Value)] = struct{}{}
			}
			for _, str := range []string{s.Operation, s.Component, s.Host, s.Service, s.Thread} {
				wantStr[str] = struct{}{}
			}
			for _, a := range s.Attributes {
				wantStr[a.Key] = struct{}{}
			}
			t1.Spans = append(t1.Spans, s)
		}
		f.add(t1)
	}
	if !maps.Equal(f.pairs, want) {
		t.Errorf("the filter holds %d pairs, want %d", len(f.pairs), len(want))
	}
	if !maps.Equal(f.strings, wantStr) {
		t.Errorf("the filter holds strings %v, want %v", f.strings, wantStr)
	}
}
