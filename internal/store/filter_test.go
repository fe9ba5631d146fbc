package store

import (
	"context"
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
				if str != "" { // (no trigrams: not kept)
					wantStr[str] = struct{}{}
				}
			}
			for _, a := range s.Attributes {
				wantStr[a.Key] = struct{}{}
			}
			t1.Spans = append(t1.Spans, s)
		}
		f.add(t1, 0)
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

// TestSearchKiekerPositions: a trace is found by a Kieker position
// (kieker.orderIndex, kieker.eoi, kieker.ess) in its head, and in its
// block once the head is cut; another value finds nothing.
func TestSearchKiekerPositions(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	tr := &trace.Trace{ID: trace.KiekerID(42)}
	for i := range 3 {
		tr.Spans = append(tr.Spans, trace.Span{SpanID: trace.SpanID(i + 1), Parent: int32(i - 1), Depth: int32(i),
			Operation: "op", Host: "h", Start: int64(i), End: 10, OrderIndex: int32(i * 100_000), EOI: -1, ESS: -1, KiekerTrace: 42, Source: trace.FromEvents})
		if i > 0 {
			tr.Spans[i].ParentID = trace.SpanID(i)
		}
	}
	ex := &trace.Trace{ID: trace.KiekerID(43), Spans: []trace.Span{{SpanID: 1, Parent: -1, Operation: "op", Host: "h", Start: 1, End: 2,
		OrderIndex: -1, EOI: 7, ESS: 0, KiekerTrace: 43, Source: trace.FromExecution}}}
	if _, err := s.Append([]*trace.Trace{tr, ex}); err != nil {
		t.Fatal(err)
	}
	count := func(key, value string) int {
		p, err := s.Search(Query{Attrs: []trace.Attr{{Key: key, Value: value}}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Traces)
	}
	for _, where := range []string{"head", "block"} {
		if where == "block" {
			if err := s.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			key, value string
			want       int
		}{{"kieker.orderIndex", "200000", 1}, {"kieker.orderIndex", "100001", 0}, {"kieker.eoi", "7", 1}, {"kieker.ess", "0", 1}, {"kieker.eoi", "8", 0}} {
			if got := count(c.key, c.value); got != c.want {
				t.Errorf("%s: %s=%s finds %d traces, want %d", where, c.key, c.value, got, c.want)
			}
		}
	}
}

// TestPairSet: the filter's open-addressed set holds what a map would,
// through its growth, the hash 0 and hashes that share their low bits.
func TestPairSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s pairSet
	want := map[uint64]uint32{}
	for i := range 20000 {
		x := rng.Uint64()
		switch i % 4 {
		case 0:
			x &^= 0xffff // the same low bits: one long run of slots
		case 1:
			x = uint64(rng.IntN(3000)) // repeats, and 0
		}
		v, added := s.ref(x)
		if _, had := want[x]; had == added {
			t.Fatalf("ref(%#x): added %v, the map had it: %v", x, added, had)
		}
		if added {
			*v = uint32(i + 1)
			want[x] = uint32(i + 1)
		}
	}
	if s.len() != len(want) {
		t.Fatalf("len %d, want %d", s.len(), len(want))
	}
	for x, w := range want {
		if v, ok := s.get(x); !ok || v != w {
			t.Fatalf("get(%#x) = %d %v, want %d", x, v, ok, w)
		}
	}
	for range 1000 {
		if x := rng.Uint64() | 1<<63; s.has(x) != (want[x] != 0) {
			t.Fatalf("has(%#x) = %v", x, s.has(x))
		}
	}
	got := map[uint64]struct{}{}
	s.each(func(x uint64) { got[x] = struct{}{} })
	if len(got) != len(want) {
		t.Fatalf("each: %d hashes, want %d", len(got), len(want))
	}
	for x := range want {
		if _, ok := got[x]; !ok {
			t.Fatalf("each misses %#x", x)
		}
	}
}
