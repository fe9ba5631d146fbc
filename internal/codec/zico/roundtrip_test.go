package zico_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// expectDecoded is what decoding r should give: tagged values' names
// are resolved only if their ids were announced (zorka announces the
// symbols of records, exceptions, attribute keys and markers, not of
// tagged values), and how many ids stay unresolved.
func expectDecoded(r zico.TraceRecord, syms *zico.SymbolMap) (zico.TraceRecord, int) {
	c := clone(&r)
	unresolved := 0
	c.Walk(func(rec *zico.TraceRecord, _ int) bool {
		for i := range rec.Attrs {
			for v := &rec.Attrs[i].Value; v != nil && v.Kind == zico.KindTagged; v = v.Elem {
				if name, ok := syms.Lookup(int32(v.Int)); ok {
					v.Str = name
				} else {
					v.Str = ""
					unresolved++
				}
			}
		}
		return true
	})
	return c, unresolved
}

func countRecords(r *zico.TraceRecord) int {
	n := 0
	r.Walk(func(*zico.TraceRecord, int) bool { n++; return true })
	return n
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := zicotest.NewPayload(zicotest.NewRegistry())
	syms := zico.NewSymbolMap(0, 0)
	d := zico.NewDecoder(zico.Limits{})
	for i := range 60 {
		if i == 30 { // a new connection: symbols again
			p.Reconnect()
			syms.Reset()
		}
		var recs []*zico.TraceRecord
		for range 1 + rng.IntN(3) {
			r := zicotest.Generate(rng, 1+rng.IntN(400), clock)
			recs = append(recs, &r)
		}
		res := decode(d, p.Append(nil, recs...), syms)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		var got []zico.Trace
		for _, o := range res.Objects {
			if tr, ok := o.(zico.Trace); ok {
				got = append(got, tr)
			}
		}
		if len(got) != len(recs) {
			t.Fatalf("packet %d: %d traces, want %d", i, len(got), len(recs))
		}
		for k, r := range recs {
			want, unresolved := expectDecoded(*r, syms)
			if !reflect.DeepEqual(want, *got[k].Root) { // cmp is slow on deep trees
				t.Fatalf("packet %d trace %d (-want +got):\n%s", i, k, cmp.Diff(want, *got[k].Root))
			}
			if got[k].Records != countRecords(r) || got[k].Unresolved != unresolved {
				t.Fatalf("packet %d trace %d: %d records, %d unresolved; want %d, %d", i, k,
					got[k].Records, got[k].Unresolved, countRecords(r), unresolved)
			}
		}
	}
}

// TestDecoderReuse: a Decoder that decoded other payloads before gives
// the same objects as a new one.
func TestDecoderReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var payloads [][]byte
	for range 5 {
		p := zicotest.NewPayload(zicotest.NewRegistry())
		r := zicotest.Generate(rng, 2000, clock)
		payloads = append(payloads, p.Append(nil, &r))
	}
	reused := zico.NewDecoder(zico.Limits{})
	for round := range 3 {
		for i, pl := range payloads {
			want := decode(zico.NewDecoder(zico.Limits{}), pl, zico.NewSymbolMap(0, 0))
			got := decode(reused, pl, zico.NewSymbolMap(0, 0))
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("round %d payload %d (-new +reused):\n%s", round, i, cmp.Diff(want, got))
			}
		}
	}
}
