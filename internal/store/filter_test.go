package store

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestFilterKiekerPairs: the filter holds the pair of every Kieker
// position trace.KiekerAttrs gives a span (it hashes them without building
// them: orderIndex, eoi and ess as bits, hashed once a block), and every
// string of the spans.
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
	got := map[uint64]struct{}{}
	f.eachPair(func(h uint64) { got[h] = struct{}{} })
	if !maps.Equal(got, want) {
		t.Errorf("the filter holds %d pairs, want %d", len(got), len(want))
	}
	// A head's search asks for the small positions by key and value.
	for _, c := range []struct {
		key, value string
		has        bool
	}{{"kieker.orderIndex", "0", true}, {"kieker.orderIndex", "00", false}, {"kieker.orderIndex", "1000", false},
		{"kieker.eoi", "39", true}, {"kieker.eoi", "40", false}, {"kieker.ess", "4", true}, {"kieker.traceId", "1", false}} {
		if got := f.hasSmall(c.key, c.value); got != c.has {
			t.Errorf("hasSmall(%s, %s) = %v, want %v", c.key, c.value, got, c.has)
		}
	}
	if !maps.Equal(f.strings, wantStr) {
		t.Errorf("the filter holds strings %v, want %v", f.strings, wantStr)
	}
}
